"""The docker backend: each sandbox is a locked-down container driven through the engine's API.

A container runs as ``nobody`` with no capabilities, no new privileges, a read-only root
filesystem, no network (unless ``network: bridge``), and memory (no swap), CPU, pids and
file-size limits. Its only writable places are ``/work`` (an anonymous volume, which the
archive API can copy into) and small tmpfs mounts. Files go in and out as tar archives
built in memory; commands are ``exec`` argv lists. Every SDK call runs on a dedicated
thread pool, so a long command never blocks the event loop.

A command that overruns its timeout, or is killed for memory, takes the container down with
it (the only kill that reaches every process it started); the container is then started
again with its ``/work`` intact, so the session stays usable.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import io
import os
import socket
import tarfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, TypeVar

from workbench.errors import UsageError
from workbench.sandbox.base import FileContents, Sandbox, Sandboxes, as_bytes, check_relpath, finish_despite_cancel
from workbench.sandbox.daemon import engine_unreachable
from workbench.sandbox.image import SANDBOX_UID, WORKDIR
from workbench.sandbox.spec import ExecResult, OutputBuffer, SandboxSpec

T = TypeVar("T")

LABEL = "nel.sandbox"
OWNER_LABEL = "nel.sandbox.owner"
BACKEND = "docker"
TMPFS_SIZE = "64m"
NOFILE = 1024
MAX_RUN_S = 3600.0
"""The longest a single command may run, whatever timeout is asked for."""
KILL_GRACE_S = 15.0
"""How long to wait for a killed command's stream to end before giving up on it."""

# PID 1 of every sandbox: ignoring SIGCHLD makes the kernel reap the orphans it adopts, so
# killed processes do not linger as zombies that count against the pids limit.
REAPER = "import signal; signal.signal(signal.SIGCHLD, signal.SIG_IGN)\nwhile True: signal.pause()"

# Pool reset, run as the sandbox user: kill every process it may signal (all of the user's,
# except PID 1 and itself), empty the writable places, then prove the container is clean.
RESET = r"""
import os, signal, sys, time
try:
    os.kill(-1, signal.SIGKILL)
except ProcessLookupError:  # nothing left running
    pass
def wipe(top):  # python3-minimal has no shutil
    for parent, folders, files in os.walk(top, topdown=False):
        for name in files:
            os.unlink(os.path.join(parent, name))
        for name in folders:
            path = os.path.join(parent, name)
            os.unlink(path) if os.path.islink(path) else os.rmdir(path)
for top in ("/work", "/tmp", "/dev/shm"):
    wipe(top)
me = os.getpid()
for _ in range(100):
    others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me)]
    if not others:
        break
    time.sleep(0.01)
dirty = [f"process {p}" for p in others]
dirty += [f"{top}/{n}" for top in ("/work", "/tmp", "/dev/shm") for n in os.listdir(top)]
for kind in ("shm", "msg", "sem"):
    with open(f"/proc/sysvipc/{kind}") as f:
        if len(f.read().splitlines()) > 1:
            dirty.append(f"System V {kind}")
if dirty:
    sys.exit("not clean: " + ", ".join(dirty[:10]))
"""

# Before a verdict in a used container: end every process of the sandbox user (all but PID 1 and this one), then
# wait until they are gone.
STOP = r"""
import os, signal, time
try:
    os.kill(-1, signal.SIGKILL)
except ProcessLookupError:
    pass
me = os.getpid()
for _ in range(200):
    if not [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me)]:
        break
    time.sleep(0.005)
"""

# The container's cgroup counts OOM kills (cgroup v1: memory.oom_control, v2: memory.events).
# Docker's State.OOMKilled only covers PID 1, not a command run with exec.
OOM_COUNT = r"""
for path in ("/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events"):
    try:
        lines = open(path).read().splitlines()
    except OSError:
        continue
    print(sum(int(l.split()[1]) for l in lines if l.split()[0] == "oom_kill"))
    break
"""


def _owner_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class DockerSandboxes(Sandboxes):
    """Containers for ``spec``: a fresh one per session (``per_attempt``) or warm ones reset between (``pool``)."""

    backend = BACKEND

    def __init__(self, spec: SandboxSpec, client: Any = None) -> None:
        super().__init__(spec)
        self.owner = _owner_id()
        self._workers = spec.concurrency * 2 + 2
        self._threads = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="nel-sandbox")
        self._given_client = client
        self._connected: Any = None
        self._connecting = threading.Lock()
        self._idle: list[str] = []
        """Pool mode: ids of reset containers waiting for a session."""
        self.oom_seen: dict[str, int] = {}
        """OOM kills counted so far per container: a SIGKILL is blamed on memory only if the count rose."""

    @property
    def _client(self) -> Any:
        """The SDK client, connected on first use, on a worker thread (connecting asks the engine its version)."""
        with self._connecting:
            if self._connected is None:
                import docker

                try:
                    # Reads on an exec's output stream wait as long as the command is silent: allow the longest run.
                    timeout = int(MAX_RUN_S) + 60
                    self._connected = self._given_client or docker.from_env(
                        timeout=timeout, max_pool_size=self._workers
                    )
                except docker.errors.DockerException as exc:
                    raise engine_unreachable(exc) from None
            return self._connected

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking SDK call on this provider's threads."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._threads, functools.partial(fn, *args, **kwargs))

    async def preflight(self) -> None:
        """The engine answers and has the image: checked before a run starts, not on its first attempt."""
        await self.call(self._check_image)

    def _check_image(self) -> None:
        from docker.errors import DockerException, ImageNotFound

        try:
            self._client.images.get(self.spec.image)
        except ImageNotFound:
            raise UsageError(f"sandbox.image: {self.spec.image!r} is not in the local Docker engine; build it with "
                             f"`nel sandbox image --image {self.spec.image}` (see docs/sandbox.md)") from None
        except DockerException as exc:
            raise engine_unreachable(exc) from None
        except Exception as exc:  # the requests error of a connection lost since the client was made
            if type(exc).__module__.split(".")[0] not in ("requests", "urllib3"):
                raise
            raise engine_unreachable(exc) from None

    def _open(self) -> AbstractAsyncContextManager[Sandbox]:
        return self._pooled() if self.spec.mode == "pool" else self._fresh()

    @asynccontextmanager
    async def _fresh(self) -> AsyncIterator[Sandbox]:
        name = f"nel-sandbox-{uuid.uuid4().hex[:12]}"
        creating = asyncio.ensure_future(self.call(self._create, name))
        try:
            container_id = await asyncio.shield(creating)
            yield DockerSandbox(self, container_id)
        finally:
            await finish_despite_cancel(self._discard(creating, name))

    @asynccontextmanager
    async def _pooled(self) -> AsyncIterator[Sandbox]:
        container_id: str | None = self._idle.pop() if self._idle else None
        name = f"nel-sandbox-{uuid.uuid4().hex[:12]}"
        creating = None
        if container_id is None:
            creating = asyncio.ensure_future(self.call(self._create, name))
        released = False
        try:
            if creating is not None:
                container_id = await asyncio.shield(creating)
            assert container_id is not None
            yield DockerSandbox(self, container_id)
            released = await finish_despite_cancel(self._reset(container_id))
        finally:
            if not released:
                await finish_despite_cancel(self._discard(creating, container_id or name))

    async def _reset(self, container_id: str) -> bool:
        """Put a used container back in the pool if it resets clean; ``False`` (discard it) otherwise."""
        if self._closed:
            return False
        try:
            code, _ = await self.call(self._exec_quiet, container_id, ["python3", "-c", RESET])
        except Exception:
            return False
        if code != 0:
            return False
        self._idle.append(container_id)
        return True

    async def _discard(self, creating: asyncio.Future[str] | None, name_or_id: str) -> None:
        """Remove the container, after its creation (if still under way) has finished."""
        if creating is not None:
            with contextlib.suppress(BaseException):  # a failed create may still have left a container
                self.oom_seen.pop(await creating, None)
        self.oom_seen.pop(name_or_id, None)
        await self.call(self._remove, name_or_id)

    async def _close(self) -> None:
        self._idle.clear()
        try:
            if self._connected is not None:
                await self.call(remove_containers, self._connected, self.owner)
        finally:
            self._threads.shutdown(wait=False)
            if self._connected is not None:
                self._connected.close()

    # --- blocking SDK calls (run on self._threads) ---

    def _create(self, name: str) -> str:
        from docker.errors import ImageNotFound
        from docker.types import Mount, Ulimit

        spec = self.spec
        labels = {LABEL: "1", OWNER_LABEL: self.owner, **spec.labels}
        fsize = spec.file_size_bytes
        try:
            container = self._client.containers.create(
                spec.image,
                command=["python3", "-c", REAPER],
                name=name,
                labels=labels,
                user=f"{SANDBOX_UID}:{SANDBOX_UID}",
                working_dir=WORKDIR,
                environment={"HOME": WORKDIR, "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"},
                network_mode=spec.network,
                mem_limit=spec.memory_bytes,
                memswap_limit=spec.memory_bytes,
                nano_cpus=int(spec.cpus * 1e9),
                pids_limit=spec.pids_limit,
                read_only=True,
                mounts=[Mount(WORKDIR, None, type="volume", labels=labels)],
                tmpfs={"/tmp": f"rw,nosuid,nodev,size={TMPFS_SIZE}"},
                shm_size=TMPFS_SIZE,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                ulimits=[Ulimit(name="fsize", soft=fsize, hard=fsize), Ulimit(name="nofile", soft=NOFILE, hard=NOFILE),
                         Ulimit(name="core", soft=0, hard=0)],
                ipc_mode="private",
                auto_remove=False,
                detach=True,
            )
        except ImageNotFound as exc:
            raise UsageError(
                f"sandbox.image: {spec.image!r} is not in the local Docker engine; build it with "
                f"`nel sandbox image --image {spec.image}` (see docs/sandbox.md)"
            ) from exc
        try:
            container.start()
        except BaseException:
            self._remove(container.id)
            raise
        return str(container.id)

    def _remove(self, name_or_id: str) -> None:
        from docker.errors import NotFound

        with contextlib.suppress(NotFound):
            self._client.api.remove_container(name_or_id, force=True, v=True)

    def _exec_quiet(self, container_id: str, argv: list[str]) -> tuple[int | None, bytes]:
        api = self._client.api
        exec_id = api.exec_create(container_id, argv, user=f"{SANDBOX_UID}:{SANDBOX_UID}", workdir=WORKDIR)["Id"]
        output = api.exec_start(exec_id)
        return api.exec_inspect(exec_id).get("ExitCode"), output

    def exec_streaming(
        self, container_id: str, argv: list[str], workdir: str, stdout: OutputBuffer, stderr: OutputBuffer
    ) -> int | None:
        """Run ``argv`` to its end, collecting its output; its exit code (``None`` if killed with the container)."""
        api = self._client.api
        exec_id = api.exec_create(
            container_id, argv, user=f"{SANDBOX_UID}:{SANDBOX_UID}", workdir=workdir, stdout=True, stderr=True
        )["Id"]
        try:
            for out, err in api.exec_start(exec_id, stream=True, demux=True):
                if out:
                    stdout.add(out)
                if err:
                    stderr.add(err)
        except Exception:  # the stream breaks when the container is killed under it
            return None
        code = api.exec_inspect(exec_id).get("ExitCode")
        return None if code is None else int(code)

    def restart_after_kill(self, container_id: str, *, kill: bool) -> None:
        """Kill the container (every process in it) and start it again; ``/work`` survives in its volume."""
        from docker.errors import APIError

        api = self._client.api
        if kill:
            with contextlib.suppress(APIError):  # already stopped
                api.kill(container_id)
        api.wait(container_id, timeout=KILL_GRACE_S)
        api.start(container_id)

    def oom_kills(self, container_id: str) -> int:
        """How many processes the kernel has killed for memory in this container (its cgroup's count)."""
        try:
            code, output = self._exec_quiet(container_id, ["python3", "-c", OOM_COUNT])
            if code == 0:
                return int(output.strip() or 0)
        except Exception:  # no room to start a reader (pids limit): fall back on docker's own flag
            pass
        return int(bool(self._client.api.inspect_container(container_id)["State"].get("OOMKilled")))

    def put_archive(self, container_id: str, data: bytes) -> None:
        if not self._client.api.put_archive(container_id, WORKDIR, data):
            raise RuntimeError("docker refused to copy files into the sandbox")

    def get_archive(self, container_id: str, path: str) -> bytes:
        from docker.errors import NotFound

        try:
            chunks, _ = self._client.api.get_archive(container_id, path)
        except NotFound:
            raise FileNotFoundError(path) from None
        return b"".join(chunks)


class DockerSandbox(Sandbox):
    """One container, addressed by id; its working directory is ``/work``."""

    backend = BACKEND

    def __init__(self, provider: DockerSandboxes, container_id: str) -> None:
        self._provider = provider
        self.container_id = container_id
        self.ran = False
        """Whether a command has run here: only then can a process be left over (PID 1 aside)."""

    async def stop_processes(self) -> None:
        if self.ran:
            await self._provider.call(self._provider._exec_quiet, self.container_id, ["python3", "-c", STOP])

    async def write_files(self, files: Mapping[str, FileContents]) -> None:
        await self._provider.call(self._provider.put_archive, self.container_id, _tar_of(files))

    async def read_file(self, path: str) -> bytes:
        rel = check_relpath(path)
        data = await self._provider.call(self._provider.get_archive, self.container_id, f"{WORKDIR}/{rel}")
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            member = tar.next()
            if member is None or not member.isfile():
                raise IsADirectoryError(path) if member is not None and member.isdir() else FileNotFoundError(path)
            extracted = tar.extractfile(member)
            assert extracted is not None
            return extracted.read()

    async def list_files(self) -> list[str]:
        data = await self._provider.call(self._provider.get_archive, self.container_id, f"{WORKDIR}/.")
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            names = [m.name for m in tar.getmembers() if m.isfile()]
        return sorted(n[2:] if n.startswith("./") else n.split("/", 1)[-1] for n in names)

    async def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        stdin: bytes | None = None,
        workdir: str = ".",
    ) -> ExecResult:
        provider = self._provider
        limit = min(provider.spec.timeout if timeout is None else timeout, MAX_RUN_S)
        command = [str(a) for a in argv]
        if not command:
            raise ValueError("run needs a command")
        if stdin is not None:
            # The exec API's stdin needs a hijacked socket; a file and a fixed redirect is simpler and as safe:
            # the script is a constant, the file name and the command are passed as arguments.
            await self.write_files({".nel-stdin": stdin})
            redirect = 'f="$1"; shift; exec < "$f"; rm -f "$f"; exec "$@"'
            command = ["/bin/sh", "-c", redirect, "sh", f"{WORKDIR}/.nel-stdin", *command]
        rel = check_relpath(workdir)
        cwd = WORKDIR if rel == "." else f"{WORKDIR}/{rel}"
        stdout, stderr = OutputBuffer(), OutputBuffer()
        self.ran = True
        started = time.perf_counter()
        running = asyncio.ensure_future(
            provider.call(provider.exec_streaming, self.container_id, command, cwd, stdout, stderr)
        )
        timed_out = False
        try:
            async with asyncio.timeout(limit):  # not wait_for: on Python 3.11 it can swallow a Ctrl-C
                exit_code = await asyncio.shield(running)
        except TimeoutError:
            timed_out, exit_code = True, None
        duration_ms = (time.perf_counter() - started) * 1000
        oom = False
        if timed_out:
            await provider.call(provider.restart_after_kill, self.container_id, kill=True)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(KILL_GRACE_S):
                    await running
            provider.oom_seen[self.container_id] = 0  # a restart gives the container a fresh cgroup
        elif exit_code == 137:  # SIGKILL: from the OOM killer if the cgroup's count went up
            kills = await provider.call(provider.oom_kills, self.container_id)
            oom = kills > provider.oom_seen.get(self.container_id, 0)
            provider.oom_seen[self.container_id] = kills
        return ExecResult(
            exit_code=exit_code,
            stdout=stdout.text(),
            stderr=stderr.text(),
            timed_out=timed_out,
            oom_killed=oom,
            duration_ms=duration_ms,
            backend=BACKEND,
        )


def _tar_of(files: Mapping[str, FileContents]) -> bytes:
    """An in-memory tar of ``files`` (relative paths), owned by the sandbox user, with their parent folders."""
    buffer = io.BytesIO()
    now = time.time()
    folders: set[str] = set()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, contents in files.items():
            rel = check_relpath(path)
            parts = rel.split("/")[:-1]
            for depth in range(1, len(parts) + 1):
                folder = "/".join(parts[:depth])
                if folder not in folders:
                    folders.add(folder)
                    tar.addfile(_member(folder, tarfile.DIRTYPE, 0o755, 0, now))
            data = as_bytes(contents)
            tar.addfile(_member(rel, tarfile.REGTYPE, 0o644, len(data), now), io.BytesIO(data))
    return buffer.getvalue()


def _member(name: str, kind: bytes, mode: int, size: int, mtime: float) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.size, info.mtime = kind, mode, size, mtime
    info.uid = info.gid = SANDBOX_UID
    info.uname, info.gname = "nobody", "nogroup"
    return info


def orphaned_owners(client: Any = None) -> list[str]:
    """Owners of sandbox containers that were started on this host by a process that is gone (a
    ``kill -9``): their containers are leftovers. A container of a live run is never one of them."""
    import docker

    from workbench.store.live import pid_alive

    own_client = client is None
    client = client or docker.from_env()
    try:
        owners = {c["Labels"].get(OWNER_LABEL, "") for c in client.api.containers(all=True, filters={"label": LABEL})}
    finally:
        if own_client:
            client.close()
    host = socket.gethostname()
    orphans = []
    for owner in sorted(owners):
        owner_host, _, rest = owner.rpartition("-")[0].rpartition("-")
        pid = rest if owner_host == host else ""
        if pid.isdigit() and not pid_alive(int(pid)):
            orphans.append(owner)
    return orphans


def remove_containers(client: Any = None, owner: str | None = None) -> int:
    """Remove sandbox containers (with their volumes): those of ``owner``, or every one when ``None``.

    The sweep for leftovers: a process killed with ``kill -9`` cannot clean up after itself.
    """
    import docker
    from docker.errors import APIError, NotFound

    own_client = client is None
    client = client or docker.from_env()
    try:
        wanted = [f"{LABEL}=1"] + ([f"{OWNER_LABEL}={owner}"] if owner else [])
        removed = 0
        for found in client.api.containers(all=True, filters={"label": wanted}):
            with contextlib.suppress(NotFound):
                client.api.remove_container(found["Id"], force=True, v=True)
                removed += 1
        volumes = client.api.volumes(filters={"label": wanted, "dangling": True}).get("Volumes") or []
        for volume in volumes:  # a container removed without its volume (e.g. by hand, without -v)
            with contextlib.suppress(APIError):
                client.api.remove_volume(volume["Name"])
        return removed
    finally:
        if own_client:
            client.close()
