"""Run ``nel serve`` as a subprocess for the length of a ``with`` block (tests, benchmark scripts).

Starts ``python -m workbench.cli serve ARGS --port 0``, reads stdout until the ready line
(``nel serve: NAME (N problems) at URL``) and yields the URL; leaving the block sends SIGTERM,
then SIGKILL after ``STOP_GRACE_S``.
"""

from __future__ import annotations

import os
import re
import selectors
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from workbench.child_process import stderr_tail, stop
from workbench.errors import RunFailed

READY_TIMEOUT_S = 30.0
READY = re.compile(r"^nel serve: (\S+) \((\d+) problems\) at (http://\S+?)(?:,|$)")
_SOURCE_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True, slots=True)
class ServeHandle:
    """A running ``nel serve``: its base URL, what it serves, and everything it printed before ready."""

    url: str
    benchmark: str
    size: int
    process: subprocess.Popen[bytes]
    preamble: list[str] = field(default_factory=list)


@contextmanager
def serve_process(args: Sequence[str], env: Mapping[str, str] | None = None) -> Iterator[ServeHandle]:
    """``nel serve *args`` (add ``--port 0`` yourself for a free port); raises ``RunFailed`` if it never gets ready."""
    environ = dict(os.environ if env is None else env)
    environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(_SOURCE_ROOT), environ.get("PYTHONPATH")) if p)
    with tempfile.TemporaryFile() as stderr:
        process = subprocess.Popen([sys.executable, "-m", "workbench.cli", "serve", *args], stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=stderr, env=environ)
        try:
            assert process.stdout is not None
            lines = _read_until_ready(process, process.stdout, stderr)
            match = READY.match(lines[-1])
            assert match is not None
            yield ServeHandle(url=match[3], benchmark=match[1], size=int(match[2]), process=process,
                              preamble=lines[:-1])
        finally:
            stop(process)


def _read_until_ready(process: subprocess.Popen[bytes], stdout: IO[bytes], stderr: IO[bytes]) -> list[str]:
    deadline = time.monotonic() + READY_TIMEOUT_S
    buffer = b""
    with selectors.DefaultSelector() as selector:
        selector.register(stdout, selectors.EVENT_READ)
        while True:
            lines = buffer.decode("utf-8", "replace").split("\n")
            if any(READY.match(line) for line in lines[:-1]):
                done = next(i for i, line in enumerate(lines) if READY.match(line))
                return lines[: done + 1]
            left = deadline - time.monotonic()
            if left <= 0:
                raise RunFailed(f"nel serve did not get ready within {READY_TIMEOUT_S:g} s{stderr_tail(stderr)}")
            if not selector.select(left):
                continue
            chunk = os.read(stdout.fileno(), 4096)
            if not chunk:
                process.wait()
                raise RunFailed(f"nel serve exited with code {process.returncode} before it was ready"
                                f"{stderr_tail(stderr)}")
            buffer += chunk
