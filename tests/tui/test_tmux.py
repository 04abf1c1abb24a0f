"""Smoke test in a real terminal: `nel tui` inside tmux, driven by keys, read back from the pane."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)"),
]
NEL = str(Path(sys.executable).with_name("nel"))


def _tmux(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=10)


@pytest.fixture
def session(demo: Path) -> Iterator[str]:
    name = f"nel-tui-{os.getpid()}"
    env = {k: v for k, v in os.environ.items() if k not in ("NEL_STORE", "TMUX")}
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "120", "-y", "40",
                    f"{NEL} tui --store {demo}"], check=True, env=env, timeout=10)
    try:
        yield name
    finally:
        _tmux("kill-session", "-t", name)


def _wait_for(name: str, text: str, timeout: float = 10.0, *, joined: bool = False) -> str:
    """The pane once ``text`` is on it (``joined``: anywhere in its lines stripped and joined, for wrapped text)."""
    deadline = time.monotonic() + timeout
    pane = ""
    while time.monotonic() < deadline:
        pane = _tmux("capture-pane", "-p", "-t", name).stdout
        if text in ("".join(line.strip() for line in pane.splitlines()) if joined else pane):
            return pane
        time.sleep(0.1)
    raise AssertionError(f"{text!r} never appeared; the pane shows:\n{pane}")


def _keys(name: str, *keys: str) -> None:
    for key in keys:
        _tmux("send-keys", "-t", name, key)
        time.sleep(0.3 if key == "Escape" else 0.05)  # an Escape followed at once by a key reads as alt+key


def test_a_triage_session_from_runs_to_diff_to_sql_and_out(session: str) -> None:
    pane = _wait_for(session, "demo-a")
    assert "0.500 [0.100, 0.900]" in pane and "demo-b" in pane
    _keys(session, "Down", "Enter")
    _wait_for(session, "sometimes 3  never 1  errored 1  always 2  missing 1")
    _keys(session, "b")
    _wait_for(session, "bucket: sometimes")
    _keys(session, "Enter")
    _wait_for(session, "task 2 · task0002 · sometimes · 2/4 pass")
    _keys(session, "d")
    pane = _wait_for(session, "changed region")
    assert "▶" in pane and "outcome: pass (reward 1) → wrong (reward 0)" in pane
    _keys(session, "Escape", "Escape", "Escape", ":")
    _wait_for(session, "named")
    _keys(session, "C-r")
    _wait_for(session, "2 rows")
    _keys(session, "Escape", "q")
    deadline = time.monotonic() + 10
    while _tmux("has-session", "-t", session).returncode == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _tmux("has-session", "-t", session).returncode != 0, "q did not quit the app"


def test_search_a_transcript_copy_a_part_and_export_the_attempts_to_a_file(session: str, tmp_path: Path) -> None:
    _tmux("set-option", "-s", "set-clipboard", "on")  # tmux keeps what the app copies (OSC 52) as a buffer
    _wait_for(session, "demo-a")
    _keys(session, "Down", "Enter")
    _wait_for(session, "sometimes 3  never 1")
    _keys(session, "/", "#", "4", "Enter")
    _wait_for(session, "   1 tasks")  # "#4": task 4 alone (the question column names it)
    assert "Use the calculator tool" in _wait_for(session, "   1 tasks")
    _keys(session, "Enter")
    pane = _wait_for(session, "Q: Use the calculator tool to compute 123 * 45.")
    assert "calculator: 123 * 45" in pane and "output of calculator (call_1; 1 line)" in pane
    _keys(session, "/", *"5535")
    _wait_for(session, "1 of 7 matches")  # the tool's output, the reply, the scoring (5)
    _keys(session, "Enter", "n")
    _wait_for(session, "2 of 7 matches")
    _keys(session, "Escape", "p", "p", "p", "c")  # the search left the reply selected; three parts up, the user
    _wait_for(session, "Copied user")
    assert _tmux("show-buffer").stdout == "Use the calculator tool to compute 123 * 45."
    target = tmp_path / "task4.md"
    _keys(session, "e")
    _wait_for(session, "Export 4 attempt(s) of task 4")
    _keys(session, "C-u", str(target), "Enter")
    # the pane may wrap a long path (xdist's tmp paths are long), and a frame may be caught half drawn: wait for the
    # words and the file name, read across lines
    _wait_for(session, "as Markdown to", joined=True)
    _wait_for(session, "task4.md", joined=True)
    assert "calculator: 123 * 45" in target.read_text()


def test_mark_two_runs_compare_them_open_the_findings_and_every_task_a_finding_cites(session: str) -> None:
    _wait_for(session, "demo-a")
    _keys(session, "Space", "Down", "Space", "c")
    _wait_for(session, "flips: 4 ▼, 2 ▲")
    _keys(session, "f")
    _wait_for(session, "Heuristic")
    _keys(session, "Down", "Down", "Down")
    _wait_for(session, "3 sometimes-pass tasks; pass@4 exceeds pass@1 by 0.214")  # the detail's title: no wrap
    assert "Solve x + 4 = 10 for x." in _wait_for(session, "A train travels 60 km in 1.5 hours")
    _keys(session, "Enter", "Down", "Enter")  # to the cited tasks, the second of them, open it
    _wait_for(session, "Q: A train travels 60 km in 1.5 hours. What is its speed in km/h?")
    _keys(session, "Escape")
    _wait_for(session, "3 sometimes-pass tasks; pass@4 exceeds pass@1 by 0.214")
    _keys(session, "Down", "Enter")  # the next cited task, from where the cursor was left
    pane = _wait_for(session, "Q: Use the calculator tool to compute 123 * 45.")
    assert "task 4 · task0004" in pane
