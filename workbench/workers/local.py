"""Background runs on this machine: start, find, stop and resume them.

``launch`` starts a detached supervisor process (``python -m workbench.workers.supervise``) in a
session of its own, so the run outlives the terminal or TUI that started it. The supervisor starts
one ``nel eval run`` worker per shard, waits for them, merges a sharded run, and keeps a state file
up to date. Everything about a launch lives beside the store, in ``<store>.workers/<launch_id>/``:
``state.json`` (written atomically), ``supervisor.log`` and ``shard-N.log``; so any process that knows
the store can list, stop or resume its background runs.

Stopping sends SIGTERM to the launch's process group: each worker records its run as interrupted
and keeps every completed step; resuming starts the workers again with ``--resume``, which skips the
steps the store already holds.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson

from workbench.errors import UsageError
from workbench.store.live import pid_alive
from workbench.workers.request import RunRequest

LAUNCH_ENV = "NEL_LAUNCH_ID"
"""Set in every worker's environment; the run records it (``runs.config.launch_id``)."""
ACTIVE = ("starting", "running", "merging", "stopping")
_SOURCE_ROOT = Path(__file__).resolve().parents[2]


def workers_root(store: Path) -> Path:
    return store.with_name(store.name + ".workers")


@dataclass(frozen=True, slots=True)
class WorkerState:
    """One shard worker: its process id while it runs, its exit code once it has ended."""

    shard_idx: int
    pid: int | None = None
    exit_code: int | None = None
    log: str = ""


@dataclass(frozen=True, slots=True)
class LaunchState:
    """What ``state.json`` holds. ``status``: starting, running, merging, stopping, then one of
    complete, failed, stopped; ``lost`` is never written: it is what a reader sees when the
    supervisor died without saying so (``kill -9``, a reboot)."""

    launch_id: str
    request: RunRequest
    status: str = "starting"
    supervisor_pid: int | None = None
    run_ids: tuple[str, ...] = ()
    workers: tuple[WorkerState, ...] = ()
    model_url: str | None = None
    model_pid: int | None = None
    """The built-in mock model's process, when the launch started one (in a session of its own)."""
    message: str = ""
    started_at: float = field(default_factory=time.time)
    ended_at: float | None = None
    resumes: int = 0

    @property
    def directory(self) -> Path:
        return workers_root(self.request.store) / self.launch_id

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    def to_json(self) -> dict[str, Any]:
        return {
            "launch_id": self.launch_id, "request": self.request.to_json(), "status": self.status,
            "supervisor_pid": self.supervisor_pid, "run_ids": list(self.run_ids),
            "workers": [{"shard_idx": w.shard_idx, "pid": w.pid, "exit_code": w.exit_code, "log": w.log}
                        for w in self.workers],
            "model_url": self.model_url, "model_pid": self.model_pid, "message": self.message,
            "started_at": self.started_at, "ended_at": self.ended_at, "resumes": self.resumes,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LaunchState:
        return cls(
            launch_id=str(data["launch_id"]), request=RunRequest.from_json(data["request"]),
            status=str(data.get("status", "starting")), supervisor_pid=data.get("supervisor_pid"),
            run_ids=tuple(data.get("run_ids") or ()),
            workers=tuple(WorkerState(**w) for w in data.get("workers") or ()),
            model_url=data.get("model_url"), model_pid=data.get("model_pid"), message=str(data.get("message") or ""),
            started_at=float(data.get("started_at") or 0.0), ended_at=data.get("ended_at"),
            resumes=int(data.get("resumes") or 0),
        )


def write_state(state: LaunchState) -> None:
    """Replace ``state.json`` atomically: a reader sees the old state or the new, never half of one."""
    state.directory.mkdir(parents=True, exist_ok=True)
    path = state.directory / "state.json"
    tmp = path.with_name(f".state-{os.getpid()}.json.tmp")
    tmp.write_bytes(orjson.dumps(state.to_json(), option=orjson.OPT_INDENT_2))
    os.replace(tmp, path)


def read_state(directory: Path) -> LaunchState:
    path = directory / "state.json"
    try:
        return LaunchState.from_json(orjson.loads(path.read_bytes()))
    except FileNotFoundError:
        raise UsageError(f"{path}: no such launch") from None
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"{path}: not a launch state file ({exc})") from None


STARTUP_GRACE_S = 30.0


def observed(state: LaunchState) -> LaunchState:
    """``state`` as it really is now: an active launch whose supervisor is gone is ``lost``."""
    if state.status == "starting" and state.supervisor_pid is None \
            and time.time() - state.started_at < STARTUP_GRACE_S:  # the supervisor has not written its pid yet
        return state
    if state.active and not pid_alive(state.supervisor_pid):
        return replace(state, status="lost", message=state.message or "the supervisor process is gone")
    return state


def launches(store: Path) -> Iterator[LaunchState]:
    """Every launch recorded beside ``store``, newest first, as observed now."""
    root = workers_root(store)
    if not root.is_dir():
        return
    found = []
    for directory in root.iterdir():
        with contextlib.suppress(UsageError):
            found.append(observed(read_state(directory)))
    yield from sorted(found, key=lambda s: s.started_at, reverse=True)


def find_launch(store: Path, run_id: str) -> LaunchState | None:
    """The newest launch that runs (or ran) ``run_id``."""
    return next((s for s in launches(store) if run_id in s.run_ids or s.request.run_id == run_id), None)


def launch(request: RunRequest) -> LaunchState:
    """Validate ``request`` and start its supervisor in the background; return the first state.

    A run from flags gets its run id now (``request.run_id`` or a fresh one), so the caller can
    watch it at once; a config file's runs are recorded in ``run_ids`` as they appear.
    """
    request.validate()
    if request.config is not None and request.spec is None:
        from workbench.spec import load_config

        load_config(request.config)  # its mistakes now, named by file:line
    elif request.spec is None:
        check_benchmark(str(request.bench), request.sandbox)
    single = request.spec.benchmarks[0] if request.spec is not None and len(request.spec.benchmarks) == 1 else None
    if request.config is None and request.run_id is None and (request.spec is None or single is not None):
        from workbench.engine.identity import new_run_id  # the engine package is heavy: only when launching

        run_id = single.run_id if single is not None and single.run_id else None
        request = replace(request, run_id=run_id or new_run_id(str(request.bench or (single and single.name))))
    launch_id = request.run_id or f"suite-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
    state = LaunchState(launch_id=launch_id, request=request,
                        run_ids=(request.run_id,) if request.run_id else ())
    if (state.directory / "state.json").exists():
        previous = observed(read_state(state.directory))
        if previous.active:
            raise UsageError(f"run {launch_id} is already running in the background (pid {previous.supervisor_pid})")
    return _start_supervisor(state)


def check_benchmark(name: str, sandbox: str | None = None) -> None:
    """A built-in or registered benchmark, or a BYOB ``.py`` file that exists; with a sandbox if it needs one."""
    from workbench.environments import benchmark_names, get_environment

    if "://" in name:  # a remote (gym://) environment: its URL was checked where it was given
        return
    if name.endswith(".py"):
        if not Path(name).expanduser().is_file():
            raise UsageError(f"bench: {name}: no such file")
    elif name not in benchmark_names():
        raise UsageError(f"bench: unknown benchmark {name!r}; known: {', '.join(benchmark_names())}")
    elif sandbox is None and get_environment(name).requires_sandbox:
        raise UsageError(f"sandbox: {name} runs each attempt in a sandbox: choose docker or local")


def resume(store: Path, run_id: str) -> LaunchState:
    """Start the dead, failed or stopped workers of a launch again; they skip the steps already done.

    A shard whose worker finished (exit 0) is not started again: its steps are all in the store, and
    the merge that follows takes them as they are.
    """
    state = find_launch(store, run_id)
    if state is None:
        raise UsageError(f"run {run_id} was not started in the background from this store; resume it with "
                         f"`nel eval run ... --run-id {run_id} --resume`")
    if state.active:
        raise UsageError(f"run {run_id} is still running (pid {state.supervisor_pid})")
    orphans = [w.shard_idx for w in state.workers if w.exit_code is None and pid_alive(w.pid)]
    if orphans:  # a lost supervisor's workers live on: two writers of one shard would repeat steps
        raise UsageError(f"run {run_id}: shard(s) {', '.join(map(str, orphans))} still run without their "
                         f"supervisor; `nel eval stop {run_id}` first")
    finished = tuple(w for w in state.workers if w.exit_code == 0)
    return _start_supervisor(replace(state, status="starting", supervisor_pid=None, workers=finished, message="",
                                     ended_at=None, resumes=state.resumes + 1, started_at=time.time()))


def describe_exit(code: int | None) -> str:
    """A worker's end in words: a negative code is the signal that killed it (``kill -9``: SIGKILL)."""
    if code is None:
        return "running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name}"
    return f"exited with {code}"


def stop(store: Path, run_id: str, *, grace_s: float = 10.0) -> LaunchState:
    """Ask the launch running ``run_id`` to stop (SIGTERM to its process group); wait up to ``grace_s``
    for it to record itself as stopped, then kill what is left."""
    state = find_launch(store, run_id)
    if state is None:
        raise UsageError(f"run {run_id} was not started in the background from this store: stop it where it runs")
    deadline = time.monotonic() + grace_s
    while state.supervisor_pid is None and state.active and time.monotonic() < deadline:
        time.sleep(0.05)  # launched a moment ago: its supervisor has not written its pid yet
        state = observed(read_state(state.directory))
    if state.status == "lost":  # its workers may live on, orphaned: end them and say so
        _signal_group(state, signal.SIGTERM)
        while any(pid_alive(w.pid) for w in state.workers if w.exit_code is None) and time.monotonic() < deadline:
            time.sleep(0.05)
        _signal_group(state, signal.SIGKILL)
        _end_process(state.model_pid, deadline)
        final = replace(state, status="stopped", message="stopped the workers of a supervisor that was gone",
                        ended_at=time.time())
        write_state(final)
        return final
    if not state.active:
        return state
    _signal_group(state, signal.SIGTERM)
    while time.monotonic() < deadline:
        state = observed(read_state(state.directory))
        if not state.active:
            return state
        time.sleep(0.05)
    _signal_group(state, signal.SIGKILL)
    final = replace(state, status="stopped", message="killed: it did not stop within "
                    f"{grace_s:.0f} s of SIGTERM", ended_at=time.time())
    write_state(final)
    return final


def _end_process(pid: int | None, deadline: float) -> None:
    """SIGTERM ``pid``, wait until ``deadline`` (monotonic) for it to go, then SIGKILL it."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not pid_alive(pid):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid or 0, sig)
        while sig == signal.SIGTERM and pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)


def _signal_group(state: LaunchState, sig: signal.Signals) -> None:
    """The supervisor's process group (it leads one), then any worker still alive outside it."""
    if state.supervisor_pid:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(state.supervisor_pid, sig)
    for worker in state.workers:
        if worker.exit_code is None and pid_alive(worker.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(worker.pid or 0, sig)


def _worker_secrets(request: RunRequest) -> dict[str, str]:
    """The API keys the workers need that no file may hold (``workbench.spec.io``): from the spec as this process
    has it, else from the config file it came from (a resume in another shell reads them again)."""
    from workbench.spec import load_config
    from workbench.spec.io import secret_env

    spec = request.spec
    if spec is not None and (keys := secret_env(spec)):
        return keys
    source = request.config or (spec.file if spec is not None else None)
    if source is None or not source.is_file():
        return {}
    with contextlib.suppress(UsageError):
        return secret_env(load_config(source)[0])
    return {}


def _start_supervisor(state: LaunchState) -> LaunchState:
    write_state(state)
    env = {**os.environ, **_worker_secrets(state.request)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_SOURCE_ROOT), env.get("PYTHONPATH")) if p)
    log = (state.directory / "supervisor.log").open("ab")
    with log:
        process = subprocess.Popen(
            [sys.executable, "-m", "workbench.workers.supervise", str(state.directory)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
            start_new_session=True, close_fds=True,
        )
    return replace(state, supervisor_pid=process.pid)  # the supervisor writes its own pid: no lost update


def stop_foreground(store: Path, run_id: str) -> str:
    """Stop a run started from a terminal (no background launch to ask): SIGTERM to each of its running shards'
    processes on this machine, as Ctrl-C would; the workers record the run as interrupted, keeping every completed
    step. Returns what was done, or why nothing could be: one line to show."""
    import socket

    from workbench.store import open_store
    from workbench.store.live import pid_alive
    from workbench.store.queries.triage_live import running_shards

    shards = running_shards(open_store(store, runs=[run_id]), run_id)
    if not shards:
        return f"{run_id} is not running: nothing to stop"
    here = socket.gethostname()
    sent, elsewhere = [], []
    for shard in shards:
        if shard.pid is None or (shard.host and shard.host != here):
            elsewhere.append(f"shard {shard.shard_idx} on {shard.host or 'an unknown host'} (pid {shard.pid})")
        elif pid_alive(shard.pid):
            os.kill(shard.pid, signal.SIGTERM)
            sent.append(str(shard.pid))
    said = [f"sent SIGTERM to pid {', '.join(sent)}: the run stops, keeping every completed step"] if sent else []
    if elsewhere:
        said.append("stop it where it runs (Ctrl-C there, or kill -TERM PID): " + "; ".join(elsewhere))
    return "; ".join(said) or f"{run_id}: its processes are gone (the run will show as interrupted)"
