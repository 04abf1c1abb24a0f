"""The local backend, for machines without Docker: a subprocess in a private temp dir, under rlimits.

Weaker than a container, and labelled so in every result. What it gives: a fresh temp dir
per session (removed after), a scrubbed environment (no host secrets), rlimits on CPU time,
address space (memory), processes, file size and open files, a process group killed at the
timeout, and, when run as root, an unprivileged uid of the session's own (``uids``): the process
limit is then per attempt, one attempt's fork bomb cannot starve the others, and the session's
processes can all be ended. With bubblewrap (``bwrap``) installed and working, each command also
gets its own namespaces: no network, no host filesystem beyond ``/usr`` (read-only) and its own
dir, and a pid namespace that dies with it. Without bubblewrap the code sees the host filesystem
as an unprivileged user may, shares ``/tmp``, and can reach the network; ``preflight`` says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from contextlib import asynccontextmanager
from functools import cache
from pathlib import Path
from typing import Any

from workbench.errors import UsageError
from workbench.sandbox.base import FileContents, Sandbox, Sandboxes, as_bytes, check_relpath, finish_despite_cancel
from workbench.sandbox.spec import ExecResult, OutputBuffer, SandboxSpec
from workbench.sandbox.uids import PROBE_UID, UidLease, kill_all_of, lease_uid

PLAIN = "local (weaker isolation: no container)"
BWRAP = "local+bwrap (weaker isolation: namespaces, no container)"
BWRAP_WORKDIR = "/work"
PATH = "/usr/local/bin:/usr/bin:/bin"
NOFILE = 256
NO_BWRAP_WARNING = (
    "nel: warning: --sandbox local without bubblewrap ({why}): the code {who}sees the host's files and /tmp and "
    "can reach the network; install bubblewrap (apt-get install bubblewrap) or use --sandbox docker"
)


class LocalSandboxes(Sandboxes):
    """Temp-dir sandboxes; ``bwrap=None`` uses bubblewrap when it works, ``True`` requires it, ``False`` never."""

    def __init__(self, spec: SandboxSpec, *, bwrap: bool | None = None) -> None:
        super().__init__(spec)
        self.own_uids = os.geteuid() == 0
        """As root each session runs as a uid of its own (rlimits on processes do not bind root, and a shared
        uid would share them between attempts)."""
        self.bwrap_problem = bwrap_problem(PROBE_UID if self.own_uids else None) if bwrap is not False \
            else "not wanted"
        if bwrap and self.bwrap_problem:
            raise UsageError(f"sandbox: bubblewrap was asked for but cannot be used: {self.bwrap_problem}")
        self.bwrap = shutil.which("bwrap") if self.bwrap_problem is None else None
        self.backend = BWRAP if self.bwrap else PLAIN
        self._next_uid = 0

    async def preflight(self) -> None:
        """Without bubblewrap, say at the start of a run (or of ``nel serve``) what the code can see: one line."""
        if not self.bwrap:
            who = "runs as a user of its own but " if self.own_uids else "runs as you and "
            print(NO_BWRAP_WARNING.format(why=self.bwrap_problem, who=who), file=sys.stderr, flush=True)

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[Sandbox]:
        lease = None
        if self.own_uids:
            self._next_uid += 1  # start each search past the last lease: fewer locked files to step over
            lease = await asyncio.to_thread(lease_uid, self._next_uid)
        uid = lease.uid if lease else None
        box: LocalSandbox | None = None
        try:
            root = Path(tempfile.mkdtemp(prefix="nel-sandbox-"))
            if uid is not None:
                os.chown(root, uid, uid)
            box = LocalSandbox(self, root, uid)
            yield box
        finally:
            await finish_despite_cancel(asyncio.to_thread(self._end, box, lease))

    def _end(self, box: LocalSandbox | None, lease: UidLease | None) -> None:
        """End what the session left running (a process that escaped its group), remove its dir, free its uid."""
        try:
            if box is not None:
                shutil.rmtree(box.root, True)
        finally:
            if lease is not None:
                lease.release(used=box is not None and box.ran)

    async def _close(self) -> None:
        """Nothing outlives a session: its processes are killed after each command, its dir at its end."""

    def limits(self, uid: int | None) -> Callable[[], None]:
        """The ``preexec_fn`` for a command: rlimits, then (as root) the session's own unprivileged ``uid``."""
        spec, run_as = self.spec, uid
        cpu = math.ceil(spec.timeout) + 1
        # RLIMIT_NPROC counts every process of the user: a uid per session makes it a limit per session.
        # Not as root, every session runs as the invoking user, so they must share it.
        nproc = spec.pids_limit if run_as is not None else spec.pids_limit * spec.concurrency
        memory, fsize = spec.memory_bytes, spec.file_size_bytes

        def apply() -> None:
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
            resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
            if run_as is not None:
                os.setgroups([])
                os.setgid(run_as)
                os.setuid(run_as)

        return apply


class LocalSandbox(Sandbox):
    """A temp dir; commands run with it as their working directory (``/work`` under bubblewrap)."""

    def __init__(self, provider: LocalSandboxes, root: Path, uid: int | None = None) -> None:
        self._provider = provider
        self.root = root
        self.uid = uid
        """The session's own uid (as root), else ``None``: commands run as the invoking user."""
        self.backend = provider.backend
        self.ran = False
        """Whether a command has run: only then can a process be left over."""

    async def write_files(self, files: Mapping[str, FileContents]) -> None:
        await asyncio.to_thread(self._write, {check_relpath(p): as_bytes(c) for p, c in files.items()})

    def _write(self, files: dict[str, bytes]) -> None:
        run_as = self.uid
        for rel, data in files.items():
            target = self.root / rel
            for parent in reversed(target.relative_to(self.root).parents[:-1]):
                folder = self.root / parent
                if not folder.is_dir():
                    folder.mkdir()
                    if run_as is not None:
                        os.chown(folder, run_as, run_as)
            self._check_inside(target.parent)
            target.unlink(missing_ok=True)  # never write through a link the code left in place
            target.write_bytes(data)
            if run_as is not None:
                os.chown(target, run_as, run_as)

    def _check_inside(self, path: Path) -> None:
        """Refuse paths that symlinks (made by the sandboxed code) lead outside the sandbox."""
        if not path.resolve().is_relative_to(self.root.resolve()):
            raise ValueError(f"sandbox path leads outside the working directory: {path}")

    async def read_file(self, path: str) -> bytes:
        target = self.root / check_relpath(path)
        self._check_inside(target)
        return await asyncio.to_thread(target.read_bytes)

    async def list_files(self) -> list[str]:
        def walk() -> list[str]:
            found = [p for p in self.root.rglob("*") if p.is_file() and not p.is_symlink()]
            return sorted(str(p.relative_to(self.root)) for p in found)

        return await asyncio.to_thread(walk)

    async def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        stdin: bytes | None = None,
        workdir: str = ".",
    ) -> ExecResult:
        provider = self._provider
        limit = provider.spec.timeout if timeout is None else timeout
        command = [str(a) for a in argv]
        if not command:
            raise ValueError("run needs a command")
        rel = check_relpath(workdir)
        self._check_inside(self.root / rel)
        if provider.bwrap:
            home = BWRAP_WORKDIR
            chdir = BWRAP_WORKDIR if rel == "." else f"{BWRAP_WORKDIR}/{rel}"
            command = [*bwrap_argv(provider.bwrap, self.root, chdir), *command]
            cwd = self.root
        else:
            home, cwd = str(self.root), self.root / rel
        env = {"PATH": PATH, "LANG": "C.UTF-8", "HOME": home, "PYTHONDONTWRITEBYTECODE": "1"}
        self.ran = True
        loop = asyncio.get_running_loop()
        watch = _Watch(loop)
        started = time.perf_counter()
        transport = await _spawn(loop.subprocess_exec(
            lambda: watch,
            *command,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=provider.limits(self.uid),
        ))
        timed_out = False
        try:
            _feed(transport, stdin)
            try:
                async with asyncio.timeout(limit):  # not wait_for: on Python 3.11 it can swallow a Ctrl-C
                    await asyncio.shield(watch.exited)
            except TimeoutError:
                timed_out = True
            duration_ms = (time.perf_counter() - started) * 1000
        finally:
            _kill_group(transport.get_pid())  # also on cancel: nothing the command started outlives it
            if not timed_out and watch.exited.done():
                # whatever the command left holding its pipes is dead now; let the last output arrive
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(1.0):
                        await asyncio.shield(watch.pipes_closed)
            transport.close()
        code = transport.get_returncode()
        exit_code = None if timed_out or code is None else (128 - code if code < 0 else code)
        err = watch.stderr.text()
        oom = not timed_out and exit_code != 0 and "MemoryError" in err[-4096:]
        return ExecResult(
            exit_code=exit_code,
            stdout=watch.stdout.text(),
            stderr=err,
            timed_out=timed_out,
            oom_killed=oom,
            duration_ms=duration_ms,
            backend=provider.backend,
        )

    async def stop_processes(self) -> None:
        """End every process the session's earlier commands left (as its own uid: all of that uid's). Under
        bubblewrap none is left: each command's pid namespace dies with it. Not as root, the process group
        killed after each command is all there is (a ``setsid`` escapee survives: docs/sandbox.md)."""
        if self.ran and self.uid is not None and not self._provider.bwrap:
            await asyncio.to_thread(kill_all_of, self.uid)


class _Watch(asyncio.SubprocessProtocol):
    """Collects a command's output and notices its exit, which may come before its pipes close."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.stdout, self.stderr = OutputBuffer(), OutputBuffer()
        self.exited: asyncio.Future[None] = loop.create_future()
        self.pipes_closed: asyncio.Future[None] = loop.create_future()
        self._open_pipes = {1, 2}

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        (self.stdout if fd == 1 else self.stderr).add(data if isinstance(data, bytes) else data.encode())

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._open_pipes.discard(fd)
        if not self._open_pipes and not self.pipes_closed.done():
            self.pipes_closed.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


async def _spawn(creating: Coroutine[Any, Any, tuple[asyncio.SubprocessTransport, Any]]) -> asyncio.SubprocessTransport:
    """The transport of a command being started, whole even if the caller is cancelled meanwhile.

    On Python 3.11 a ``subprocess_exec`` cancelled after the process started but before its pipes were connected
    never returns: its transport waits for pipes that will not connect (a cancel ~1.5 ms into a bwrap start hung the
    attempt for good; ``test_a_cancel_at_any_moment_of_a_commands_start_ends_it``). So the start is shielded; a
    cancel lets it finish, ends the command's process group, then goes on."""
    task = asyncio.ensure_future(creating)
    try:
        transport, _ = await finish_despite_cancel(task)
    except asyncio.CancelledError:
        if task.done() and not task.cancelled() and task.exception() is None:
            started, _ = task.result()
            _kill_group(started.get_pid())
            started.close()
        raise
    return transport


def _feed(transport: asyncio.SubprocessTransport, data: bytes | None) -> None:
    pipe = transport.get_pipe_transport(0)
    if pipe is None:
        return
    with contextlib.suppress(ConnectionError):
        if data:
            pipe.write(data)  # type: ignore[attr-defined]
        pipe.close()


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def bwrap_argv(bwrap: str, root: Path, chdir: str) -> list[str]:
    """bubblewrap's arguments: new namespaces (network included), ``/usr`` read-only, ``root`` at ``/work``."""
    argv = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr"]
    for top in ("bin", "sbin", "lib", "lib64", "lib32"):
        host = Path("/") / top
        if host.is_symlink():
            argv += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            argv += ["--ro-bind", str(host), str(host)]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--bind", str(root), BWRAP_WORKDIR]
    return [*argv, "--chdir", chdir, "--"]


@cache
def bwrap_problem(run_as: int | None) -> str | None:
    """Why bubblewrap cannot isolate commands here (not installed, no user namespaces…), or ``None``."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bwrap is not installed"
    with tempfile.TemporaryDirectory(prefix="nel-bwrap-probe-") as tmp:
        if run_as is not None:
            os.chown(tmp, run_as, run_as)
        preexec: Any = None
        if run_as is not None:

            def preexec() -> None:
                os.setgroups([])
                os.setgid(run_as)
                os.setuid(run_as)

        try:
            done = subprocess.run(
                [*bwrap_argv(bwrap, Path(tmp), BWRAP_WORKDIR), "/bin/sh", "-c", "exit 0"],
                capture_output=True,
                text=True,
                timeout=10,
                preexec_fn=preexec,
                env={"PATH": PATH},
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bwrap did not run: {exc}"
    if done.returncode != 0:
        return f"bwrap failed (exit {done.returncode}): {done.stderr.strip()[:300]}"
    return None
