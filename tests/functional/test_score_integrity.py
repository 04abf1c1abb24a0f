"""Nothing lost, nothing misreported, where code is scored: a cheating answer scores 0 through ``nel serve`` too,
one attempt's fork bomb does not fail the attempts beside it, and a local sandbox without bubblewrap says so
when a run or a server starts.

The cheats themselves are run in every backend in test_code_exec.py; here ``nel serve`` shares that scoring code.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from nel_helpers import assert_ok, clean_env, nel

from workbench.environments.humaneval import complete_function
from workbench.mock import MockHandle
from workbench.resources import benchmarks_dir
from workbench.sandbox.local import LocalSandboxes, bwrap_problem
from workbench.sandbox.spec import SandboxSpec
from workbench.sandbox.uids import PROBE_UID
from workbench.scoring.code_exec import CodeRunResult, score_humaneval_response
from workbench.serve.process import READY

pytestmark = pytest.mark.timeout(180)
ROOT = os.geteuid() == 0
BWRAP_PROBLEM = bwrap_problem(PROBE_UID if ROOT else None)
WARNING = "nel: warning: --sandbox local without bubblewrap"
ADD = {"test": "def check(candidate):\n    assert candidate(2, 3) == 5\n", "entry_point": "add"}
FORK_BOMB = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"


def fenced(code: str) -> str:
    return f"```python\n{code}```\n"


@contextmanager
def serving(*args: str, env: dict[str, str] | None = None) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``nel serve ARGS --port 0`` until the block ends; yields its URL and the process (stderr readable after)."""
    process = subprocess.Popen([sys.executable, "-m", "workbench.cli", "serve", *args, "--port", "0"],
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env if env is not None else clean_env())
    try:
        assert process.stdout is not None
        url = None
        for line in process.stdout:
            if match := READY.match(line):
                url = match[3]
                break
        assert url, f"nel serve did not get ready: {process.communicate(timeout=30)}"
        yield url, process
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def no_bwrap_env(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH has no bwrap (nor anything else: nel is started by its absolute path)."""
    empty = tmp_path / "no-bwrap-bin"
    empty.mkdir(exist_ok=True)
    return clean_env(PATH=str(empty))


class TestServe:
    """``nel serve --sandbox local`` scores with the same harness: the cheats score 0 there too."""

    def test_cheating_answers_score_zero_and_the_canonical_one_passes(self) -> None:
        import json

        rows = [json.loads(line) for line in (benchmarks_dir() / "humaneval" / "data.jsonl").read_text().splitlines()]
        cheats = {
            0: "class Yes:\n    def __eq__(self, other):\n        return True\n"
               "def has_close_elements(numbers, threshold):\n    return Yes()\n",
            32: "def poly(xs, x):\n    return 0\ndef find_zero(xs):\n    return 0.0\n",
            2: "import os, sys\ndef truncate_number(number):\n    frame = sys._getframe()\n"
               "    while frame is not None:\n        if 'nonce' in frame.f_locals:\n"
               "            print('NEL-PASSED:', frame.f_locals['nonce'], file=sys.stderr, flush=True)\n"
               "            os._exit(0)\n        frame = frame.f_back\n    return 0.0\n",
        }
        with serving("-b", "humaneval", "--sandbox", "local") as (url, process), \
                httpx.Client(base_url=url, timeout=60) as client:
            scored = {idx: client.post("/verify", json={"response": fenced(code), "idx": idx}).json()
                      for idx, code in cheats.items()}
            good = client.post("/verify", json={"response": fenced(complete_function(rows[32])), "idx": 32}).json()
        assert {idx: s["reward"] for idx, s in scored.items()} == {0: 0.0, 32: 0.0, 2: 0.0}, scored
        assert good["reward"] == 1.0, good
        assert "cannot compare safely" in scored[0]["scoring_details"]["stderr_tail"]
        _, err = process.communicate(timeout=30)
        if BWRAP_PROBLEM is None:
            assert WARNING not in err  # bubblewrap isolates here: nothing to warn about

    def test_without_bubblewrap_it_warns_in_one_line_when_it_starts(self, tmp_path: Path) -> None:
        with serving("-b", "humaneval", "--sandbox", "local", env=no_bwrap_env(tmp_path)) as (_, process):
            pass
        _, err = process.communicate(timeout=30)
        lines = [line for line in err.splitlines() if line.startswith(WARNING)]
        assert len(lines) == 1, err
        assert "bwrap is not installed" in lines[0] and "/tmp" in lines[0] and "--sandbox docker" in lines[0]


def test_a_local_run_without_bubblewrap_warns_once_on_stderr(mock: MockHandle, tmp_path: Path) -> None:
    proc = nel("eval", "run", "-b", "humaneval", "--model-url", mock.base_url, "--model-id", "nel-mock",
               "--max-problems", "2", "--sandbox", "local", "--store", str(tmp_path / "nel.duckdb"),
               "--output-dir", str(tmp_path), "--no-progress", cwd=tmp_path, env=no_bwrap_env(tmp_path), timeout=120)
    assert_ok(proc)
    warnings = [line for line in proc.stderr.splitlines() if line.startswith(WARNING)]
    assert len(warnings) == 1, proc.stderr
    assert "the code runs as a user of its own but sees the host's files and /tmp" in warnings[0] or not ROOT


@pytest.mark.skipif(not ROOT, reason="a uid per attempt needs root; otherwise every attempt is the invoking user")
@pytest.mark.parametrize("use_bwrap", [False, pytest.param(None, marks=pytest.mark.skipif(
    BWRAP_PROBLEM is not None, reason=f"bubblewrap unusable: {BWRAP_PROBLEM}"))], ids=["plain", "bwrap"])
def test_one_attempts_fork_bomb_does_not_fail_the_attempts_beside_it(use_bwrap: bool | None) -> None:
    """All attempts ran as nobody and RLIMIT_NPROC counts a user's processes: a fork bomb used up the count of
    every attempt, and the correct ones beside it could not start python."""
    spec = SandboxSpec(type="local", concurrency=3, pids_limit=32, timeout=4)

    async def main() -> list[CodeRunResult]:
        async with LocalSandboxes(spec, bwrap=use_bwrap) as sandboxes:
            async def attempt(code: str, delay: float) -> CodeRunResult:
                await asyncio.sleep(delay)  # the correct ones start once the bomb is at its limit
                async with sandboxes.session() as box:
                    return await score_humaneval_response(box, fenced(code), ADD, spec.timeout)

            correct = "def add(a, b):\n    return a + b\n"
            return list(await asyncio.gather(attempt(FORK_BOMB, 0), attempt(correct, 1), attempt(correct, 1)))

    bomb, *others = asyncio.run(main())
    assert bomb.reward == 0.0 and bomb.details["outcome"] == "timeout"
    assert [r.details["outcome"] for r in others] == ["passed", "passed"], [r.details for r in others]
