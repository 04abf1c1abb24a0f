"""The live progress bar of `nel eval run`: drawn on a terminal, absent otherwise."""

import os
import pty
import subprocess
import sys

import pytest
from nel_helpers import clean_env


def run_on_a_terminal(args: list[str], env: dict[str, str]) -> str:
    """Run `nel` with its stdout and stderr on a pseudo-terminal and return what it drew."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "workbench.cli", *args], stdout=follower, stderr=follower,
                            stdin=subprocess.DEVNULL, env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(leader)
    assert proc.returncode == 0, b"".join(chunks).decode(errors="replace")
    return b"".join(chunks).decode(errors="replace")


def eval_args(mock, tmp_path, *extra):
    return ["eval", "run", "-b", "gsm8k", "--model-url", mock.base_url, "--model-id", "nel-mock",
            "--repeats", "2", "--max-problems", "20", "--output-dir", str(tmp_path), *extra]


@pytest.mark.timeout(90)
def test_a_terminal_gets_a_live_bar_with_rate_pass_rate_and_errors(mock, tmp_path):
    screen = run_on_a_terminal(eval_args(mock, tmp_path), clean_env(COLUMNS="160"))
    bar = [line for line in screen.replace("\r", "\n").splitlines() if "steps/s" in line and "pass@1" in line]
    assert bar, screen
    assert "40/40" in bar[-1]
    assert "errors 0" in bar[-1]


@pytest.mark.timeout(90)
def test_no_progress_draws_no_bar_even_on_a_terminal(mock, tmp_path):
    screen = run_on_a_terminal(eval_args(mock, tmp_path, "--no-progress"), clean_env(COLUMNS="160"))
    assert "━" not in screen
    assert "pass@1" in screen  # the summary is still printed
