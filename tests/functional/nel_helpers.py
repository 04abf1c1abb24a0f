"""Helpers for the functional tests: the `nel` command as a subprocess, a clean environment and small
readers over a live store."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from workbench.store import open_store

ROOT = Path(__file__).resolve().parents[2]
NEL = str(Path(sys.executable).with_name("nel"))

# Environment variables that change what `nel` does; the tests set them explicitly when they mean to.
_NEL_ENV = (
    "NEL_SHARD_IDX",
    "NEL_TOTAL_SHARDS",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_COUNT",
    "SLURM_ARRAY_TASK_MIN",
    "NEL_STORE",
    "NEMO_API_KEY",
    "OPENAI_API_KEY",
)

# Small, fast runs: the mock answers in microseconds, so the run time is the engine's own.
CONCURRENCY = 16


def clean_env(**extra: str) -> dict[str, str]:
    """``os.environ`` without the variables that steer `nel`, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in _NEL_ENV}
    env.update(extra)
    return env


def nel(
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    timeout: float = 60.0,
) -> subprocess.CompletedProcess[str]:
    """Run `nel ARGS` to completion and capture its output."""
    return subprocess.run(
        [NEL, *args],
        cwd=cwd,
        env=env if env is not None else clean_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def nel_popen(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start `nel ARGS` in the background (stdout and stderr captured)."""
    return subprocess.Popen(
        [NEL, *args],
        cwd=cwd,
        env=env if env is not None else clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )


def eval_args(
    url: str,
    *,
    problems: int,
    repeats: int,
    store: Path | None = None,
    output_dir: Path | None = None,
    concurrency: int = CONCURRENCY,
    extra: Sequence[str] = (),
) -> list[str]:
    """Arguments of a `nel eval run` of gsm8k against the mock."""
    args = [
        "eval",
        "run",
        "-b",
        "gsm8k",
        "--model-url",
        url,
        "--model-id",
        "nel-mock",
        "--repeats",
        str(repeats),
        "--max-problems",
        str(problems),
        "--max-concurrent",
        str(concurrency),
        "--no-progress",
    ]
    if store is not None:
        args += ["--store", str(store)]
    if output_dir is not None:
        args += ["--output-dir", str(output_dir)]
    return [*args, *extra]


def assert_ok(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr


def assert_one_line_error(proc: subprocess.CompletedProcess[str], code: int) -> str:
    """The command failed with ``code`` and said why in one `nel: error:` line, without a traceback."""
    assert proc.returncode == code, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("nel: error: ")]
    assert len(errors) == 1, proc.stderr
    return errors[0]


def step_count(store: Path) -> int:
    return int(open_store(store).sql("SELECT count(*) AS n FROM steps")["n"][0])


def wait_for(predicate: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def wait_for_steps(store: Path, at_least: int, proc: subprocess.Popen[str], timeout: float = 30.0) -> int:
    """Poll the live store until it holds ``at_least`` steps; fail if ``proc`` ends first."""
    deadline = time.monotonic() + timeout
    n = 0
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the run ended before it could be interrupted ({n} steps seen)"
        try:
            n = step_count(store)
        except Exception as exc:  # the store may not exist yet
            if "no store here" not in str(exc):
                raise
            n = 0
        if n >= at_least:
            return n
        time.sleep(0.03)
    raise AssertionError(f"the store held only {n} steps after {timeout} s")


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process, from /proc."""
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            out[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
    return out


def descendants(root: int) -> list[int]:
    """The pids of every process under ``root`` (children first), from /proc."""
    parents, found, frontier = _parents(), [], [root]
    while frontier:
        children = [pid for pid, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def running(pid: int) -> bool:
    """Alive and not a zombie (a zombie has exited; only its parent has yet to read its status)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def command_line(pid: int) -> str:
    """A process's command line, its arguments joined by spaces ("" once it is gone)."""
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop(proc: subprocess.Popen[bytes] | subprocess.Popen[str], grace: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``grace`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
