"""Child processes the workbench starts and waits on (the mock model, ``nel serve``): how to stop one and
what to quote of its stderr when it fails before it is ready."""

from __future__ import annotations

import subprocess
from typing import IO

STOP_GRACE_S = 5.0
"""How long a child gets to exit after SIGTERM before it is killed."""


def stderr_tail(stderr: IO[bytes], limit: int = 2000) -> str:
    """``'; its stderr: …'`` with the last ``limit`` characters a child wrote, or ``''`` when it wrote none."""
    stderr.seek(0)
    text = stderr.read().decode("utf-8", "replace").strip()
    return f"; its stderr: {text[-limit:]}" if text else ""


def stop(process: subprocess.Popen[bytes], grace_s: float = STOP_GRACE_S) -> int:
    """SIGTERM, then SIGKILL if it lingers past ``grace_s``; close its stdout pipe; return its exit code."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if process.stdout is not None:
        process.stdout.close()
    return process.returncode
