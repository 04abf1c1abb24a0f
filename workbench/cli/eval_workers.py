"""``nel eval run --background/--shards``, ``nel eval status``, ``nel eval stop`` and ``nel eval resume``.

A background run is a launch of ``workbench.workers``: a detached supervisor with one ``nel eval run``
worker per shard. These commands only start, read and signal launches; progress comes from the store's
live view (the same one the TUI's live screen reads), so what ``status`` shows is what the store holds.
"""

from __future__ import annotations

import argparse
import functools
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from workbench.cli.paths import store_path
from workbench.errors import UsageError
from workbench.store.live import pid_alive
from workbench.workers import LaunchState, RunRequest, find_launch, launch, launches, resume, stop
from workbench.workers.local import describe_exit, observed, read_state

if TYPE_CHECKING:
    from workbench.store.reader import Store

_INTERRUPTED = 130


# ---- starting ---------------------------------------------------------------------------------------------
def build_request(args: argparse.Namespace) -> RunRequest:
    """The launch ``nel eval run`` flags (or a config file) ask for: their ``RunSpec``, with absolute paths (the
    supervisor and its workers may outlive the shell, and a store on a shared filesystem is named the same
    everywhere)."""
    from workbench.cli.eval_run import run_spec

    spec = run_spec(args)
    store, output_dir = spec.store_path.absolute(), spec.output_dir.absolute()
    bench = spec.benchmarks[0]
    if bench.name.endswith(".py"):  # a BYOB file: named the same from wherever the workers start
        spec.benchmarks[0] = bench.model_copy(update={"name": str(Path(bench.name).absolute())})
    files = tuple(str(Path(f).absolute()) for f in spec.benchmark_files)
    spec = spec.model_copy(update={"benchmark_files": files})
    return RunRequest(store=store, output_dir=output_dir, config=Path(args.config).absolute() if args.config else None,
                      shards=args.shards or 1, run_id=None if args.config else spec.benchmarks[0].run_id, spec=spec)


def run_with_workers(args: argparse.Namespace) -> int:
    """``--background``: start the launch and return; ``--shards N`` alone: the same launch, waited for."""
    state = launch(build_request(args))
    name = run_name(state)
    store = state.request.store
    if args.background:
        shards = state.request.shards
        print(f"nel: started run {name} in the background: {shards} shard{'s' * (shards > 1)}"
              f" (supervisor pid {state.supervisor_pid})")
        print(f"  logs     {state.directory}/ (supervisor.log, shard-N.log)")
        print(f"  status   nel eval status {name} --store {store}")
        print(f"  stop     nel eval stop {name} --store {store}")
        print(f"  resume   nel eval resume {name} --store {store}")
        print(f"  watch    nel tui --store {store}")
        return 0
    return _wait_in_foreground(state, show_progress=not args.no_progress)


def _wait_in_foreground(state: LaunchState, *, show_progress: bool) -> int:
    """Follow a launch to its end with a one-line progress report; Ctrl-C stops it (resumable)."""
    name = run_name(state)
    print(f"nel: run {name}: {state.request.shards} shard workers (logs in {state.directory}/)", file=sys.stderr)
    last = ""
    try:
        while state.active:
            time.sleep(0.5)
            state = observed(read_state(state.directory))
            if show_progress:
                line = _progress_line(state)
                if line != last and sys.stderr.isatty():
                    print(f"\r{line}", end="", file=sys.stderr, flush=True)
                last = line
    except KeyboardInterrupt:
        state = stop(state.request.store, name)
    if show_progress and sys.stderr.isatty():
        print(file=sys.stderr)
    print(f"run {name} {state.status}" + (f": {state.message}" if state.message else ""))
    if state.status == "complete":
        from workbench.cli.eval_run import read_summary
        from workbench.cli.render import render_summary
        from workbench.store import open_store

        for run_id in state.run_ids:
            print(render_summary(read_summary(state.request.store, run_id), store=state.request.store,
                                 title=f"run {run_id} complete: {state.request.shards} shards, merged"))
            marks = open_store(state.request.store, runs=[run_id]).on_snapshot(functools.partial(_cache_marks, run_id))
            if marks is not None:  # each shard had the cache to itself: the steps' marks add them up
                print(f"  cache    {marks[0]} hits, {marks[1]} misses (all shards)")
        return 0
    if state.status in ("stopped", "failed", "lost"):
        print(f"  resume   nel eval resume {name} --store {state.request.store}")
    return _INTERRUPTED if state.status == "stopped" else 1


def _cache_marks(run_id: str, store: Store) -> tuple[int, int] | None:
    return store.cache_marks(run_id)


def _progress_line(state: LaunchState) -> str:
    view = launch_view(state)
    return f"nel: {view.status}: {view.done}/{view.expected or '?'} steps, " + ", ".join(
        f"shard {s.shard_idx} {s.status}" for s in view.shards)


# ---- reading -----------------------------------------------------------------------------------------------
def run_name(state: LaunchState) -> str:
    """What the user types to name the launch: its run id, or the launch id for a suite of runs."""
    return state.run_ids[0] if len(state.run_ids) == 1 else state.launch_id


@dataclass(frozen=True, slots=True)
class ShardView:
    shard_idx: int
    status: str
    """waiting, running, done, stopped, failed or dead (its worker was killed, or vanished unseen)."""
    pid: int | None
    exit_code: int | None
    detail: str
    done: int
    expected: int
    log: str

    def to_json(self) -> dict[str, Any]:
        return {"shard_idx": self.shard_idx, "status": self.status, "pid": self.pid, "exit_code": self.exit_code,
                "detail": self.detail, "steps_done": self.done, "steps_expected": self.expected,
                "percent": _percent(self.done, self.expected), "log": self.log}


@dataclass(frozen=True, slots=True)
class LaunchView:
    state: LaunchState
    shards: list[ShardView]

    @property
    def status(self) -> str:
        return self.state.status

    @property
    def done(self) -> int:
        return sum(s.done for s in self.shards)

    @property
    def expected(self) -> int:
        return sum(s.expected for s in self.shards)

    @property
    def dead(self) -> list[int]:
        return [s.shard_idx for s in self.shards if s.status == "dead"]

    def to_json(self) -> dict[str, Any]:
        st = self.state
        return {"run": run_name(st), "launch_id": st.launch_id, "run_ids": list(st.run_ids), "status": st.status,
                "message": st.message, "supervisor_pid": st.supervisor_pid, "resumes": st.resumes,
                "store": str(st.request.store), "directory": str(st.directory), "started_at": st.started_at,
                "ended_at": st.ended_at, "steps_done": self.done, "steps_expected": self.expected,
                "percent": _percent(self.done, self.expected), "dead_shards": self.dead,
                "shards": [s.to_json() for s in self.shards]}


def _percent(done: int, expected: int) -> float | None:
    return round(100.0 * done / expected, 1) if expected else None


def _progress(state: LaunchState) -> dict[int, tuple[int, int]]:
    """Steps done and expected per shard, summed over the launch's runs, from the store's live view."""
    from workbench.store.queries.triage_live import live_snapshot
    from workbench.store.reader import Store

    totals: dict[int, tuple[int, int]] = {}
    if not state.run_ids:
        return totals
    try:
        store = Store(state.request.store)
        for run_id in state.run_ids:
            snap = live_snapshot(store, run_id, latest=0)
            for s in snap.shards if snap else ():
                done, expected = totals.get(s.shard_idx, (0, 0))
                totals[s.shard_idx] = (done + s.done, expected + s.expected)
    except Exception:  # nothing written yet, or a merge holds the file this instant: no numbers, not an error
        return totals
    return totals


def _shard_status(worker_pid: int | None, exit_code: int | None, launch_status: str) -> tuple[str, str]:
    if exit_code is None:
        if pid_alive(worker_pid):
            return "running", ""
        if worker_pid is None:
            return "waiting", ""
        if launch_status in ("starting", "running", "stopping"):
            return "running", "ending"  # the supervisor has not recorded its exit code yet
        return "dead", "its worker is gone"
    if exit_code == 0:
        return "done", ""
    if exit_code == _INTERRUPTED:
        return "stopped", "interrupted; completed steps kept"
    if exit_code == -signal.SIGTERM and launch_status in ("stopping", "stopped"):
        # stopped while it still started up, before it could take SIGTERM as Ctrl-C: it had no steps to keep
        return "stopped", "stopped while starting"
    if exit_code < 0:
        return "dead", describe_exit(exit_code)
    return "failed", describe_exit(exit_code)


def launch_view(state: LaunchState) -> LaunchView:
    progress = _progress(state)
    workers = {w.shard_idx: w for w in state.workers}
    shards = []
    for idx in range(state.request.shards):
        w = workers.get(idx)
        status, detail = _shard_status(w.pid if w else None, w.exit_code if w else None, state.status)
        done, expected = progress.get(idx, (0, 0))
        shards.append(ShardView(idx, status, w.pid if w else None, w.exit_code if w else None, detail, done,
                                expected, w.log if w else str(state.directory / f"shard-{idx}.log")))
    return LaunchView(state, shards)


def render_view(view: LaunchView) -> list[str]:
    st = view.state
    name = run_name(st)
    resumed = f", resumed {st.resumes}x" if st.resumes else ""
    lines = [f"run {name}: {st.status}, {st.request.shards} shard(s){resumed}"
             + (f" (supervisor pid {st.supervisor_pid})" if st.active else "")]
    if st.message:
        lines.append(f"  {st.message}")
    lines.append(f"  {'shard':<6} {'status':<8} {'pid':>8} {'steps':>15} {'%':>6}  detail")
    for s in view.shards:
        lines.append(_row(str(s.shard_idx), s.status, str(s.pid or "-"), s.done, s.expected, s.detail))
    lines.append(_row("total", "", "", view.done, view.expected, ""))
    lines.append(f"  logs   {st.directory}/")
    if view.dead and st.active:
        lines.append(f"  dead   shard(s) {', '.join(map(str, view.dead))}: when the others end, "
                     f"`nel eval resume {name}` continues them")
    elif not st.active and st.status != "complete":
        lines.append(f"  resume nel eval resume {name} --store {st.request.store}")
    return lines


def _row(label: str, status: str, pid: str, done: int, expected: int, detail: str) -> str:
    pct = _percent(done, expected)
    steps = f"{done}/{expected or '?'}"
    share = "-" if pct is None else f"{pct:.0f}%"
    return f"  {label:<6} {status:<8} {pid:>8} {steps:>15} {share:>6}  {detail}".rstrip()


# ---- commands ----------------------------------------------------------------------------------------------
def _store(args: argparse.Namespace) -> Path:
    return store_path(args).absolute()


def _find(store: Path, run_id: str) -> LaunchState:
    state = find_launch(store, run_id)
    if state is None:
        raise UsageError(f"run {run_id}: no background run of that name beside {store} (see `nel eval status`)")
    return state


def cmd_eval_status(args: argparse.Namespace) -> int:
    store = _store(args)
    states = [_find(store, args.run_id)] if args.run_id else list(launches(store))
    views = [launch_view(s) for s in states]
    if args.format == "json":
        print(orjson.dumps({"store": str(store), "launches": [v.to_json() for v in views]},
                           option=orjson.OPT_INDENT_2).decode())
        return 0
    if not views:
        print(f"no background runs beside {store}")
        return 0
    for i, view in enumerate(views):
        if i:
            print()
        print("\n".join(render_view(view)))
    return 0


def cmd_eval_stop(args: argparse.Namespace) -> int:
    store = _store(args)
    _find(store, args.run_id)
    state = stop(store, args.run_id)
    view = launch_view(state)
    print(f"run {run_name(state)}: {state.status}" + (f": {state.message}" if state.message else ""))
    print(f"  kept     {view.done}/{view.expected or '?'} steps")
    if state.status != "complete":
        print(f"  resume   nel eval resume {run_name(state)} --store {store}")
    return 0


def cmd_eval_resume(args: argparse.Namespace) -> int:
    store = _store(args)
    state = resume(store, args.run_id)
    kept = {w.shard_idx for w in state.workers if w.exit_code == 0}
    again = [i for i in range(state.request.shards) if i not in kept]
    print(f"nel: resumed run {run_name(state)} in the background: shard(s) {', '.join(map(str, again))} "
          f"start again and skip the steps already in the store" + (
              f"; shard(s) {', '.join(map(str, sorted(kept)))} had finished" if kept else ""))
    print(f"  status   nel eval status {run_name(state)} --store {store}")
    return 0
