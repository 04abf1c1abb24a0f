"""The async sandbox protocol: a provider hands out one isolated ``Sandbox`` per attempt.

    async with open_sandboxes(spec) as sandboxes:
        async with sandboxes.session() as box:        # one attempt: a fresh sandbox
            await box.write_files({"solution.py": code})
            result = await box.run(["python3", "solution.py"], timeout=5)

Commands are argv lists and files move as bytes through the backend's API: nothing the
model wrote is ever pasted into a shell string. Every call is awaitable and none blocks
the event loop, so the engine's other attempts keep going while one runs.
"""

from __future__ import annotations

import asyncio
import posixpath
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import TypeVar

from workbench.sandbox.spec import ExecResult, SandboxSpec

T = TypeVar("T")

FileContents = bytes | str


class Sandbox(ABC):
    """One attempt's sandbox: a private working directory and the commands run in it."""

    backend: str
    """Where the code runs, e.g. ``docker`` or ``local (weaker isolation: no container)``."""

    @abstractmethod
    async def write_files(self, files: Mapping[str, FileContents]) -> None:
        """Create (or replace) files under the working directory; ``str`` is written as UTF-8."""

    @abstractmethod
    async def read_file(self, path: str) -> bytes:
        """The bytes of a file under the working directory; ``FileNotFoundError`` if there is none."""

    @abstractmethod
    async def list_files(self) -> list[str]:
        """Relative paths of the regular files under the working directory, sorted."""

    @abstractmethod
    async def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        stdin: bytes | None = None,
        workdir: str = ".",
    ) -> ExecResult:
        """Run ``argv`` (no shell) in ``workdir`` (relative to the working directory).

        ``timeout`` defaults to the spec's; a command still running then is killed and the
        result says ``timed_out``. The sandbox stays usable afterwards.
        """

    async def stop_processes(self) -> None:  # noqa: B027  (a backend whose commands leave nothing keeps this one)
        """End every process that earlier commands left running in this sandbox.

        Called before a verdict is computed in a sandbox an agent worked in: nothing it started in the
        background may watch the harness start (and read its secrets before they are gone).
        """


class Sandboxes(ABC):
    """A provider of sandboxes, at most ``spec.concurrency`` open at once; ``close()`` removes them all."""

    backend: str

    def __init__(self, spec: SandboxSpec) -> None:
        self.spec = spec.validate()
        self._slots = asyncio.Semaphore(spec.concurrency)
        self._closed = False

    @asynccontextmanager
    async def session(self) -> AsyncIterator[Sandbox]:
        """One sandbox for one attempt, released (removed, or reset for a pool) however the block ends."""
        if self._closed:
            raise RuntimeError("sandbox provider is closed")
        async with self._slots, self._open() as box:
            yield box

    @abstractmethod
    def _open(self) -> AbstractAsyncContextManager[Sandbox]:
        """A context that creates one sandbox and removes (or recycles) it, even when cancelled."""

    async def preflight(self) -> None:  # noqa: B027  (a backend with nothing to check keeps this one)
        """Fail fast, before a run is created, when no sandbox could start at all (``UsageError``)."""

    async def close(self) -> None:
        """Remove every sandbox this provider created; safe to call twice."""
        self._closed = True
        await self._close()

    @abstractmethod
    async def _close(self) -> None: ...

    async def __aenter__(self) -> Sandboxes:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await finish_despite_cancel(self.close())



def open_sandboxes(spec: SandboxSpec) -> Sandboxes:
    """The provider for ``spec.type``; nothing starts until the first session."""
    spec.validate()
    if spec.type == "docker":
        from workbench.extras import require

        require("docker", "the docker sandbox")
        from workbench.sandbox.docker import DockerSandboxes

        return DockerSandboxes(spec)
    from workbench.sandbox.local import LocalSandboxes

    return LocalSandboxes(spec)


def check_relpath(path: str) -> str:
    """``path`` normalised, if it names something inside the working directory; else ``ValueError``.

    Files are addressed relative to the sandbox's working directory; an absolute path or
    one that climbs out with ``..`` would let a caller read or write outside it.
    """
    if not isinstance(path, str) or not path or "\0" in path:
        raise ValueError(f"sandbox path must be a non-empty string without NUL bytes, got {path!r}")
    norm = posixpath.normpath(path)
    if posixpath.isabs(path) or norm == ".." or norm.startswith("../"):
        raise ValueError(f"sandbox path must stay inside the working directory, got {path!r}")
    return norm


def as_bytes(contents: FileContents) -> bytes:
    """UTF-8; a lone surrogate (possible in decoded JSON) is kept rather than failing the write."""
    return contents.encode("utf-8", errors="surrogatepass") if isinstance(contents, str) else bytes(contents)


async def finish_despite_cancel(work: Awaitable[T]) -> T:
    """Await ``work`` to the end even if the caller is cancelled (Ctrl-C), then re-raise the cancel.

    Cleanup (removing a container, a temp dir) must not be abandoned half way because the
    task running it was cancelled: that is exactly how containers get left behind.
    """
    task = asyncio.ensure_future(work)
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(task)
            break
        except asyncio.CancelledError:
            if task.done():
                raise
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    return result
