"""`nel` ends without the interpreter's teardown (``workbench.cli._quick_exit``), but never at the cost of what an
ordinary exit does for the user: atexit handlers run, buffered output is written, the exit code is kept, and a
thread still at work is waited for."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROGRAM = """\
import atexit, sys, threading, time
from workbench.cli import _quick_exit
atexit.register(lambda: print("atexit ran"))
sys.stdout.write("buffered, not yet flushed; ")
if "--thread" in sys.argv:
    threading.Thread(target=lambda: (time.sleep(0.3), print("the thread finished")), daemon=False).start()
_quick_exit(3)
"""


@pytest.mark.parametrize("env", [{}, {"NEL_NO_QUICK_EXIT": "1"}])
def test_atexit_handlers_run_output_is_flushed_and_the_code_kept(env: dict[str, str]) -> None:
    proc = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=60,
                          env={**_base_env(), **env})
    assert proc.returncode == 3
    assert proc.stdout == "buffered, not yet flushed; atexit ran\n"


def test_a_thread_still_at_work_is_waited_for() -> None:
    proc = subprocess.run([sys.executable, "-c", PROGRAM, "--thread"], capture_output=True, text=True, timeout=60,
                          env=_base_env())
    assert proc.returncode == 3
    assert "the thread finished" in proc.stdout and "atexit ran" in proc.stdout


def _base_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "NEL_NO_QUICK_EXIT"}



def test_only_non_daemon_threads_are_waited_for() -> None:
    """A library's daemon thread (tqdm's monitor after `nel benchmarks pull`) is abandoned at exit anyway; waiting
    on it meant the interpreter's teardown, in which native code aborted the finished command (exit -6)."""
    import threading

    from workbench.cli import _threads_to_wait_for

    stop = threading.Event()
    daemon = threading.Thread(target=stop.wait, name="a-daemon", daemon=True)
    worker = threading.Thread(target=stop.wait, name="a-worker", daemon=False)
    daemon.start()
    try:
        assert "a-daemon" not in _threads_to_wait_for()
        worker.start()
        assert "a-worker" in _threads_to_wait_for()
    finally:
        stop.set()
        if worker.ident is not None:
            worker.join(5)
        daemon.join(5)
