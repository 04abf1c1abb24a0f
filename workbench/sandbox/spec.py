"""What a sandbox is asked for (``SandboxSpec``) and what running a command in one gave (``ExecResult``).

The spec is the ``sandbox:`` block of a run's config, checked here so that a typo fails
before any container starts, with the field named in the message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from workbench.errors import UsageError

SandboxType = Literal["docker", "local"]
NetworkMode = Literal["none", "bridge"]
PoolMode = Literal["per_attempt", "pool"]

DEFAULT_IMAGE = "nel-sandbox:bookworm"
OUTPUT_LIMIT = 64 * 1024
"""Bytes of stdout (and of stderr) an ``ExecResult`` keeps: the head and the tail of longer output."""
TRUNCATION_MARKER = "\n…[{n} bytes truncated]…\n"

_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]?)(?:i?b)?\s*$", re.IGNORECASE)
MIN_MEMORY = 16 * 1024**2
"""Below this even ``python3 -c pass`` fails, which would read as the model's fault."""


def parse_memory(text: str | int) -> int:
    """Bytes in ``'512m'``, ``'1g'``, ``'256MiB'``, ``'1.5g'`` or a plain number of bytes."""
    if isinstance(text, bool):
        raise ValueError(f"expected a size such as '512m', got {text!r}")
    if isinstance(text, int):
        return text
    match = _MEMORY.match(str(text))
    if not match:
        raise ValueError(f"expected a size such as '512m' or '2g', got {text!r}")
    return int(float(match[1]) * _UNITS[match[2].lower()])


@dataclass(frozen=True)
class SandboxSpec:
    """Where and under which limits the model's code runs.

    ``mode="per_attempt"`` (the default) gives every attempt a fresh container: nothing an
    attempt leaves (files, processes, System V IPC, a crashed container) can reach the next.
    ``"pool"`` keeps ``concurrency`` warm containers and resets them between attempts;
    faster, but its isolation is only as good as the reset (see docs/sandbox.md).
    """

    type: SandboxType = "docker"
    image: str = DEFAULT_IMAGE
    timeout: float = 10.0
    """Seconds a single command may run before it is killed (``run`` may pass a shorter one)."""
    memory: str | int = "512m"
    cpus: float = 1.0
    network: NetworkMode = "none"
    concurrency: int = 4
    """Sandboxes open at once; further sessions wait for a free one."""
    pids_limit: int = 128
    mode: PoolMode = "per_attempt"
    file_size_limit: str | int = "64m"
    """Largest single file the code may write (RLIMIT_FSIZE): bounds what a runaway write costs the disk."""
    labels: dict[str, str] = field(default_factory=dict)
    """Extra container labels, e.g. a run id, so leftovers can be traced."""

    def validate(self) -> SandboxSpec:
        """Return ``self`` if every field is usable, else raise ``UsageError`` naming the field."""
        if self.type not in ("docker", "local"):
            raise UsageError(f"sandbox.type: expected 'docker' or 'local', got {self.type!r}")
        if self.type == "docker" and (not isinstance(self.image, str) or not self.image.strip()):
            raise UsageError("sandbox.image: expected an image name such as 'nel-sandbox:bookworm'")
        _positive_number("timeout", self.timeout)
        _positive_number("cpus", self.cpus)
        for name, low in (("memory", MIN_MEMORY), ("file_size_limit", 1)):
            try:
                size = parse_memory(getattr(self, name))
            except ValueError as exc:
                raise UsageError(f"sandbox.{name}: {exc}") from None
            if size < low:
                raise UsageError(f"sandbox.{name}: {getattr(self, name)!r} is too small (at least {low} bytes)")
        if self.network not in ("none", "bridge"):
            raise UsageError(f"sandbox.network: expected 'none' or 'bridge', got {self.network!r}")
        for name in ("concurrency", "pids_limit"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"sandbox.{name}: expected a whole number of at least 1, got {value!r}")
        if self.pids_limit < 8:
            raise UsageError(f"sandbox.pids_limit: {self.pids_limit} is too small to start python (at least 8)")
        if self.mode not in ("per_attempt", "pool"):
            raise UsageError(f"sandbox.mode: expected 'per_attempt' or 'pool', got {self.mode!r}")
        return self

    @property
    def memory_bytes(self) -> int:
        return parse_memory(self.memory)

    @property
    def file_size_bytes(self) -> int:
        return parse_memory(self.file_size_limit)


def _positive_number(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise UsageError(f"sandbox.{name}: expected a number greater than 0, got {value!r}")


@dataclass(frozen=True)
class ExecResult:
    """One command's outcome. ``backend`` says where it ran, so weak isolation shows in scoring details."""

    exit_code: int | None
    """The process's exit status; ``None`` when it was killed before it reported one (a timeout)."""
    stdout: str
    stderr: str
    timed_out: bool
    oom_killed: bool
    duration_ms: float
    backend: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.oom_killed


class OutputBuffer:
    """Collects a stream, keeping at most ``limit`` bytes: its head and its tail, where errors show."""

    def __init__(self, limit: int = OUTPUT_LIMIT) -> None:
        self._limit = limit
        self._head = bytearray()
        self._tail = bytearray()
        self._dropped = 0

    def add(self, chunk: bytes) -> None:
        room = self._limit // 2 - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self._tail += chunk
        excess = len(self._tail) - self._limit // 2
        if excess > 0:
            del self._tail[:excess]
            self._dropped += excess

    def text(self) -> str:
        head = self._head.decode("utf-8", errors="replace")
        tail = self._tail.decode("utf-8", errors="replace")
        if self._dropped:
            return head + TRUNCATION_MARKER.format(n=self._dropped) + tail
        return head + tail


def truncate_output(data: bytes, limit: int = OUTPUT_LIMIT) -> str:
    """``data`` as text, its middle replaced by a marker when it is longer than ``limit`` bytes."""
    buffer = OutputBuffer(limit)
    buffer.add(data)
    return buffer.text()
