"""One server process: started in a process group of its own that dies with nel, awaited until it answers
``GET /v1/models``, stopped with its whole group.

The group lets a stop reach every process the server started (vLLM's engine workers). When nel is killed outright
(``kill -9``) nothing in nel runs to stop it: the kernel's parent-death signal (Linux ``prctl(PR_SET_PDEATHSIG)``)
kills the server, and wakes a small guard process that kills the server's whole group. The signal is tied to the
thread that starts the server, so servers are started from the main thread.
"""

from __future__ import annotations

import contextlib
import ctypes
import http.client
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from typing import IO

from workbench.child_process import STOP_GRACE_S
from workbench.errors import RunFailed
from workbench.secrets import redact_text
from workbench.spec.models import redact_args

TAIL_LINES = 20
"""How many of a failed server's last log lines the error quotes."""
_PR_SET_PDEATHSIG = 1


def _parent_death_signal(sig: signal.Signals) -> None:  # runs in the child between fork and exec
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, sig)


def _die_with_parent() -> None:
    _parent_death_signal(signal.SIGKILL)


def _guard_wakes_with_parent() -> None:
    _parent_death_signal(signal.SIGTERM)


_GUARD = """
import os, signal, sys
parent, group = int(sys.argv[1]), int(sys.argv[2])
def end(*_):
    try:
        os.killpg(group, signal.SIGKILL)
    except OSError:
        pass
    os._exit(0)
signal.signal(signal.SIGTERM, end)
if os.getppid() != parent:
    end()
while True:
    signal.pause()
"""
"""The guard: a tiny process that outlives nel only to SIGKILL the server's whole group when nel dies (the
kernel's parent-death signal reaches one process; the server's own workers are in its group)."""


class ServerProcess:
    """A started server: ``wait_ready`` until it answers, ``stop`` it (idempotent); its output goes to a log file
    whose tail a failure quotes."""

    def __init__(self, name: str, argv: list[str], host: str, port: int, env: Mapping[str, str]) -> None:
        self.name, self.argv, self.host, self.port = name, argv, host, port
        # kept open while the server runs (closed by ``close``): the tail a failure quotes is read back from it
        self.log: IO[bytes] = tempfile.TemporaryFile(prefix=f"nel-service-{name}-")  # noqa: SIM115
        try:
            self.process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
                env={**os.environ, **env}, start_new_session=True, preexec_fn=_die_with_parent)
        except OSError as exc:
            self.log.close()
            shown = redact_text(" ".join(redact_args(argv)))
            raise RunFailed(f"services.{name}: cannot start the server ({shown}): {exc.strerror or exc}") from None
        # started after the server, so it costs the server's start-up nothing
        self.guard = subprocess.Popen(
            [sys.executable, "-S", "-c", _GUARD, str(os.getpid()), str(self.process.pid)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=_guard_wakes_with_parent)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def wait_ready(self, timeout_s: float) -> float:
        """Seconds until ``GET /v1/models`` answered 200; polls every 10 ms at first (a fast server is in use
        at once), then every 100 ms. ``RunFailed`` with its exit code or the timeout, and its log's tail."""
        start = time.monotonic()
        deadline = start + timeout_s
        delay = 0.01
        while True:
            code = self.process.poll()
            if code is not None:
                raise self._failed(f"exited with code {code} before it answered GET /v1/models")
            if self._answers():
                return time.monotonic() - start
            if time.monotonic() >= deadline:
                self.stop()
                raise self._failed(f"did not answer GET /v1/models within {timeout_s:g} s (startup_timeout)")
            time.sleep(delay)
            if time.monotonic() - start > 1.0:
                delay = 0.1

    def _answers(self) -> bool:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=2.0)
        try:
            conn.request("GET", "/v1/models")
            return conn.getresponse().status == 200
        except OSError:
            return False
        finally:
            conn.close()

    def stop(self, grace_s: float = STOP_GRACE_S) -> int | None:
        """SIGTERM to its process group, SIGKILL to the group after ``grace_s``; returns its exit code."""
        if self.process.poll() is None:
            self._signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(grace_s)
        self._signal(signal.SIGKILL)  # the group: whatever the server started and left behind
        self.process.wait()
        if self.guard.poll() is None:
            self.guard.kill()  # SIGKILL: no handler runs; the group is gone already
            self.guard.wait()
        return self.process.returncode

    def _signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, sig)

    def tail(self, lines: int = TAIL_LINES) -> str:
        """The last ``lines`` lines the server wrote (secrets redacted)."""
        self.log.seek(0)
        text = self.log.read().decode("utf-8", "replace").rstrip()
        return redact_text("\n".join(text.splitlines()[-lines:]))

    def _failed(self, what: str) -> RunFailed:
        self.stop()
        tail = self.tail()
        quoted = f"; its last lines:\n{tail}" if tail else "; it wrote nothing"
        argv = redact_text(" ".join(redact_args(self.argv)))
        return RunFailed(f"services.{self.name}: the server ({argv}) {what}{quoted}")

    def close(self) -> None:
        self.stop()
        self.log.close()
