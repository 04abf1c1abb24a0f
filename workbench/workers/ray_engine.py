"""Shards as Ray tasks: ``nel eval run --engine ray --shards N [--ray-address ADDRESS]``.

Each task runs exactly what a local shard worker runs: ``python -m workbench.cli eval run --spec env`` in a
subprocess with the run specification in ``NEL_RUN_SPEC`` and ``NEL_SHARD_IDX`` / ``NEL_TOTAL_SHARDS`` set, so a
Ray shard and a local one share the engine path, the store segments and the resume rules; it reports its run ids
in a result file. The driver only waits, then merges the
segments into the store (``ingest``) and exports each complete run, as ``nel eval merge`` does.

What is per task: the model requests and the segment files of one shard. What is central: the store
(every node writes its segments next to it, so it must live on a filesystem all nodes share) and the
merge. API keys travel in the tasks' ``runtime_env`` environment only, never in their arguments or the spec.
Ray is imported lazily, so the package works without the ``ray`` extra.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.errors import UsageError
from workbench.extras import MissingExtra, needs_extra
from workbench.spec.io import RESULT_ENV, SPEC_ENV, read_result
from workbench.store import IngestReport, ingest

KEY_VARS = ("NEMO_API_KEY", "OPENAI_API_KEY")
"""Environment variables handed to the tasks: the API keys a shard reads, and nothing else."""
_SHARD_VARS = ("NEL_SHARD_IDX", "NEL_TOTAL_SHARDS", "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT",
               "SLURM_ARRAY_TASK_MIN")
INSTALL_HINT = str(MissingExtra("ray", "--engine ray"))


@dataclass(frozen=True, slots=True)
class RayJob:
    """One sharded run on Ray. ``spec`` is the run specification every shard runs (JSON: absolute paths, no
    secret, no shard variables — each task adds its own); ``flags``: ``--resume``, ``--retry-errors``."""

    spec: str
    flags: tuple[str, ...]
    store: Path
    output_dir: Path
    shards: int
    address: str | None = None
    cwd: Path | None = None


@dataclass(frozen=True, slots=True)
class ShardOutcome:
    idx: int
    exit_code: int
    node: str
    last_line: str
    run_ids: tuple[str, ...] = ()
    log: str | None = None


@dataclass(slots=True)
class RayResult:
    outcomes: list[ShardOutcome]
    merge: IngestReport | None = None
    exports: dict[str, Path] = field(default_factory=dict)
    exported: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Per run: one line per ``output.export`` target it went to (or why it did not)."""

    @property
    def failed(self) -> list[ShardOutcome]:
        return [o for o in self.outcomes if o.exit_code != 0]

    @property
    def run_ids(self) -> list[str]:
        """The runs the shards worked on, in the order they named them."""
        seen: dict[str, None] = {}
        for o in sorted(self.outcomes, key=lambda o: o.idx):
            seen.update(dict.fromkeys(o.run_ids))
        return list(seen)


def import_ray() -> Any:
    with needs_extra("--engine ray"):
        import ray
    return ray


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def run_shard(spec: str, flags: Sequence[str], idx: int, total: int, store: str, log_dir: str,
              cwd: str | None) -> ShardOutcome:
    """Inside a Ray task: run one shard as the local worker would, in a subprocess of this node."""
    node = socket.gethostname()
    store_dir = Path(store).parent
    if not store_dir.is_dir():
        return ShardOutcome(idx, 2, node, f"the store's folder {store_dir} is not on Ray node {node}: "
                                          "the store must live on a filesystem every node shares")
    env = {k: v for k, v in os.environ.items() if k not in _SHARD_VARS}
    env["NEL_SHARD_IDX"], env["NEL_TOTAL_SHARDS"] = str(idx), str(total)
    with tempfile.TemporaryDirectory(prefix="nel-shard-") as scratch:
        env[SPEC_ENV], env[RESULT_ENV] = spec, str(Path(scratch) / "result.json")
        proc = subprocess.run([sys.executable, "-m", "workbench.cli", "eval", "run", "--spec", "env", "--no-progress",
                               *flags], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, check=False,
                              cwd=cwd if cwd and Path(cwd).is_dir() else None)
        run_ids = tuple(str(r) for r in read_result(Path(env[RESULT_ENV])).get("run_ids") or ())
    log: str | None = None
    try:
        path = Path(log_dir) / f"shard-{idx}-of-{total}.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(proc.stdout)
        log = str(path)
    except OSError:  # the log is a convenience; the outcome still says how the shard ended
        pass
    return ShardOutcome(idx, proc.returncode, node, _last_line(proc.stdout), run_ids, log)


def task_env(secrets: Mapping[str, str] | None = None) -> dict[str, str]:
    """The tasks' environment: the driver's API-key variables (plus ``secrets``, e.g. an ``--api-key``)."""
    env = {k: os.environ[k] for k in KEY_VARS if os.environ.get(k)}
    env.update({k: v for k, v in (secrets or {}).items() if v})
    return env


PROBE_TIMEOUT_S = 5.0


def probe(address: str) -> None:
    """Fail fast on a ``HOST:PORT`` (or ``ray://HOST:PORT``) nobody listens on: Ray itself retries for minutes."""
    if address == "auto":
        return  # Ray answers at once when no cluster runs here
    host, sep, port = address.split("://", 1)[-1].rstrip("/").rpartition(":")
    if not sep or not port.isdigit():
        raise UsageError(f"--ray-address {address}: expected auto, HOST:PORT or ray://HOST:PORT")
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=PROBE_TIMEOUT_S).close()
    except OSError as exc:
        raise UsageError(f"cannot reach the Ray cluster at {address}: {exc.strerror or exc} "
                         "(is `ray start --head` running there?)") from None


_TRANSIENT_CLIENT_ERRORS = ("ZombieProcess", "Starting Ray client server failed", "Proxy failed to Connect to backend")


def connect(ray: Any, address: str | None) -> bool:
    """Join ``address`` (``auto``, ``HOST:PORT``, ``ray://…``), or $RAY_ADDRESS as under ``ray job submit``,
    or start a local cluster. Returns whether this call started Ray (and so should stop it)."""
    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
    if not address and not os.environ.get("RAY_ADDRESS"):
        kwargs["include_dashboard"] = False
    target = address or os.environ.get("RAY_ADDRESS")
    if target:
        probe(target)
    for attempt in range(3):
        try:
            ray.init(address=address or None, **kwargs)
            return True
        except Exception as exc:  # ConnectionError, ValueError, RuntimeError: Ray words them well
            # Ray Client's proxy starts a server process per client; on a loaded host that start can fail (the
            # process exits before it serves: "Starting Ray client server failed"), and the proxy's psutil check
            # raises on one that has exited but not been reaped yet (ZombieProcess), or the server never answers
            # its channel check (Proxy failed to Connect). All pass: try again (docs/ray.md says how to avoid them).
            if any(word in str(exc) for word in _TRANSIENT_CLIENT_ERRORS) and attempt < 2:
                time.sleep(1.0 + 2.0 * attempt)
                continue
            where = address or os.environ.get("RAY_ADDRESS") or "a local cluster"
            raise UsageError(f"cannot reach the Ray cluster at {where}: {_last_line(str(exc))}") from None
    raise AssertionError("unreachable")


def run_shards_on_ray(job: RayJob, *, secrets: Mapping[str, str] | None = None,
                      on_outcome: Callable[[ShardOutcome], None] | None = None) -> RayResult:
    """Run ``job.shards`` shard tasks, wait for all, then merge and export if every one completed."""
    ray = import_ray()
    started = connect(ray, job.address)
    try:
        task = ray.remote(num_cpus=1, max_retries=0)(run_shard)
        options: dict[str, Any] = {"runtime_env": {"env_vars": task_env(secrets)}}
        log_dir = str(job.output_dir / "ray")
        cwd = str(job.cwd) if job.cwd else None
        refs = {task.options(name=f"nel-shard-{i}-of-{job.shards}", **options).remote(
                    job.spec, list(job.flags), i, job.shards, str(job.store), log_dir, cwd): i
                for i in range(job.shards)}
        outcomes: list[ShardOutcome] = []
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                try:
                    outcome = ray.get(ref)
                except Exception as exc:  # the task itself died: a lost node, an import error on a worker
                    outcome = ShardOutcome(refs[ref], 1, "?", _last_line(str(exc)))
                outcomes.append(outcome)
                if on_outcome is not None:
                    on_outcome(outcome)
    finally:
        if started:
            ray.shutdown()
    result = RayResult(sorted(outcomes, key=lambda o: o.idx))
    if not result.failed and job.shards > 1:
        result.merge = ingest(job.store, bulk=True)
        from workbench.export.settle import settle
        from workbench.spec.models import RunSpec

        output = RunSpec.model_validate_json(job.spec).output  # its output.export: the merged runs' exports
        for settled in settle(job.store, result.merge.runs, runs=result.run_ids, targets=output.export,
                              export_config=output.export_config):
            if settled.export is not None:
                result.exports[settled.run.run_id] = settled.export
            if settled.exported:
                result.exported[settled.run.run_id] = settled.exported
    return result
