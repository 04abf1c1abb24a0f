"""The supervisor of one background launch: ``python -m workbench.workers.supervise LAUNCH_DIR``.

It runs in a session of its own (see ``local.launch``): it starts the built-in mock model when the
request asks for it, one ``nel eval run`` worker per shard (``NEL_SHARD_IDX`` / ``NEL_TOTAL_SHARDS``),
records each worker's pid and exit code in ``state.json`` as they change, learns a config file's run
ids from the workers' result files, merges a sharded run once every shard has finished, and says how it ended.
SIGTERM (``local.stop`` signals the whole process group) ends it as ``stopped``: the workers record
their runs as interrupted, keeping every completed step.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import FrameType
from urllib.parse import urlparse

from workbench.spec.io import RESULT_ENV, read_result, spec_json
from workbench.workers.local import LAUNCH_ENV, WorkerState, describe_exit, read_state, write_state

POLL_S = 0.2
RUN_IDS_EVERY_S = 1.0
_INTERRUPTED = 130


class Supervisor:
    def __init__(self, directory: Path) -> None:
        self.state = read_state(directory)
        self.stopping = False
        self.processes: dict[int, subprocess.Popen[bytes]] = {}

    def save(self, **changes: object) -> None:
        self.state = replace(self.state, **changes)  # type: ignore[arg-type]
        write_state(self.state)

    def on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        """The process group got SIGTERM (the workers too): let them record their runs and end."""
        self.stopping = True

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self.on_sigterm)
        self.save(supervisor_pid=os.getpid(), status="starting")
        request = self.state.request
        try:
            with self._model() as model_url:
                if self.stopping:
                    return self._end("stopped", "stopped before the workers started")
                self.save(model_url=model_url)
                self._start_workers(model_url)
                self._wait()
        except Exception as exc:  # a mock that would not start, a worker that could not be spawned
            return self._end("failed", f"{type(exc).__name__}: {exc}")
        codes = {w.shard_idx: w.exit_code for w in self.state.workers}
        if (self.stopping and any(code != 0 for code in codes.values())) or all(
                code == _INTERRUPTED for code in codes.values()):
            return self._end("stopped", "stopped; completed steps are kept (resume continues the run)")
        failed = {i: c for i, c in codes.items() if c != 0}
        if failed:
            dead = sorted(i for i, c in failed.items() if c is not None and c < 0)
            what = "; ".join(self._shard_end(i, c) for i, c in sorted(failed.items()))
            if dead:
                what += (f"; dead shard(s) {', '.join(map(str, dead))}: "
                         f"`nel eval resume {self._run_name()}` continues them")
            return self._end("failed", what)
        if request.shards > 1:
            self.save(status="merging")
            # In a session of its own: a stop asked for now does not cut a merge short (it is quick, and the
            # shards it merges are complete).
            # It answers for this launch's runs only: another run of the store, incomplete, is not this one's
            # failure.
            self._learn_run_ids()
            scope = [arg for run_id in self.state.run_ids for arg in ("--run", run_id)]
            spec = ["--spec", str(self.state.directory / "spec.json")]  # its output.export: the merged runs' exports
            merge = self._nel(["eval", "merge", str(request.store), *scope, *spec],
                              log=self.state.directory / "merge.log",
                              own_session=True)
            if merge.wait() != 0:
                return self._end("failed", f"merge exited with {merge.returncode} "
                                           f"(see {self.state.directory / 'merge.log'})")
        self._learn_run_ids()
        return self._end("complete", "")

    def _shard_end(self, idx: int, code: int | None) -> str:
        """A killed worker wrote no last word: its signal says it all; otherwise the log's last line."""
        if code is not None and code < 0:
            return f"shard {idx} dead ({describe_exit(code)})"
        return f"shard {idx} {describe_exit(code)}: {last_line(self.state.directory / f'shard-{idx}.log')}"

    def _run_name(self) -> str:
        return self.state.run_ids[0] if len(self.state.run_ids) == 1 else self.state.launch_id

    # ---- steps ------------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _model(self) -> Iterator[str | None]:
        request = self.state.request
        if not request.uses_mock:
            yield request.model_url
            return
        from workbench.mock import mock_model

        # A resumed run must reach its model at the same URL (it is part of the run's identity): the
        # mock comes back on the port it had.
        port = urlparse(self.state.model_url).port if self.state.model_url else None
        with mock_model(own_session=True, latency_ms=request.mock_latency_ms, port=port or 0) as mock:
            print(f"supervisor: built-in mock model at {mock.base_url} (a labelled test model)", flush=True)
            self.save(model_pid=mock.process.pid)
            yield mock.base_url

    def _start_workers(self, model_url: str | None) -> None:
        request = self.state.request
        resume = self.state.resumes > 0
        finished = {w.shard_idx: w for w in self.state.workers if w.exit_code == 0}  # kept by a resume
        spec_file = self.state.directory / "spec.json"  # every worker runs this one specification
        tmp = spec_file.with_name(".spec.json.tmp")
        tmp.write_text(spec_json(request.worker_spec(model_url)))
        os.replace(tmp, spec_file)
        argv = ["eval", "run", "--spec", str(spec_file), "--no-progress", *(["--resume"] if resume else [])]
        workers = []
        for idx in range(request.shards):
            if idx in finished:
                workers.append(finished[idx])
                continue
            env = {k: v for k, v in os.environ.items() if k not in ("NEL_SHARD_IDX", "NEL_TOTAL_SHARDS")}
            env[LAUNCH_ENV] = self.state.launch_id
            env[RESULT_ENV] = str(self._result_file(idx))
            if request.shards > 1:
                env["NEL_SHARD_IDX"], env["NEL_TOTAL_SHARDS"] = str(idx), str(request.shards)
            log = self.state.directory / f"shard-{idx}.log"
            process = self._nel(argv, log=log, env=env)
            self.processes[idx] = process
            workers.append(WorkerState(idx, process.pid, None, str(log)))
        self.save(status="running", workers=tuple(workers))

    def _wait(self) -> None:
        last_ids = 0.0
        while True:
            workers = tuple(replace(w, exit_code=self.processes[w.shard_idx].poll()) if w.shard_idx in self.processes
                            else w for w in self.state.workers)
            if workers != self.state.workers:
                self.save(workers=workers)
            if all(w.exit_code is not None for w in workers):
                return
            if time.monotonic() - last_ids >= RUN_IDS_EVERY_S:
                last_ids = time.monotonic()
                self._learn_run_ids()
            if self.stopping and self.state.status != "stopping":
                self.save(status="stopping")
            time.sleep(POLL_S)

    def _result_file(self, idx: int) -> Path:
        return self.state.directory / f"shard-{idx}.result.json"

    def _learn_run_ids(self) -> None:
        """A config file's runs get their ids as they start: each worker says which in its result file."""
        if self.state.request.run_id is not None:
            return
        ids: dict[str, None] = dict.fromkeys(self.state.run_ids)
        for idx in range(self.state.request.shards):
            ids.update(dict.fromkeys(str(r) for r in read_result(self._result_file(idx)).get("run_ids") or ()))
        if tuple(ids) != self.state.run_ids:
            self.save(run_ids=tuple(ids))

    def _nel(self, args: list[str], *, log: Path, env: dict[str, str] | None = None,
             own_session: bool = False) -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            return subprocess.Popen([sys.executable, "-m", "workbench.cli", *args], stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=own_session)

    def _end(self, status: str, message: str) -> int:
        self.save(status=status, message=message, ended_at=time.time())
        print(f"supervisor: {status}" + (f": {message}" if message else ""), flush=True)
        return 0 if status in ("complete", "stopped") else 1


def last_line(log: Path) -> str:
    """The last line a worker wrote: usually the one-line error that ended it."""
    try:
        with log.open("rb") as fh:
            fh.seek(max(0, log.stat().st_size - 4096))
            lines = [line.strip() for line in fh.read().decode(errors="replace").splitlines() if line.strip()]
    except OSError:
        return f"(no log at {log})"
    return lines[-1] if lines else f"(nothing in {log})"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m workbench.workers.supervise LAUNCH_DIR", file=sys.stderr)
        return 2
    return Supervisor(Path(args[0])).run()


if __name__ == "__main__":
    sys.exit(main())
