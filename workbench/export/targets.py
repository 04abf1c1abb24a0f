"""Where a stored run can be exported besides nel's own artifacts: inspect_ai, MLflow, Weights & Biases.

One function per target, registered by name; ``nel eval export RUN --to NAME`` and a config's ``output.export``
both come here. Each target needs its extra (``[inspect]``, ``[mlflow]``, ``[wandb]``): a missing one is the usual
one-line ``MissingExtra``, raised before anything is written. Each returns the one line the CLI prints.

MLflow and W&B also receive nel's artifact files (``eval-RUN.json``, ``results.jsonl``, ...): they are written into
the output directory first, unless an export of the run as it stands is already there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from workbench.errors import UsageError
from workbench.export.artifacts import bundle_file_name, export_is_current, export_run
from workbench.extras import needs_extra, require
from workbench.secrets import redact_text
from workbench.spec.models import ExportConfig
from workbench.store import Store, open_store
from workbench.store.queries.export_rows import runtime_row


@dataclass(frozen=True, slots=True)
class Target:
    name: str
    extra: str
    write: Callable[[Store, str, Path, ExportConfig], str]


def _inspect(store: Store, run_id: str, out: Path, _: ExportConfig) -> str:
    from workbench.export.to_inspect import export_inspect

    result = export_inspect(store, run_id, out)
    return f"inspect  {result.path} ({result.n_samples:,} samples; `inspect view --log-dir {out}`)"


def _artifacts(store: Store, run_id: str, out: Path) -> list[Path]:
    """nel's artifact files of the run in ``out`` (written now unless current), for a tracker to keep."""
    run = store.run(run_id)
    if not export_is_current(out, run_id, n_steps=runtime_row(store, run_id)["n"], status=run["status"]):
        export_run(store, run_id, out)
    names = ("results.jsonl", "trajectories.jsonl", "runtime_stats.json", "failure_analysis.json",
             bundle_file_name(run_id), "images")
    return [out / n for n in names if (out / n).exists()]


def _bundle(out: Path, run_id: str) -> dict[str, object]:
    from workbench.store.queries.exported import read_bundle

    return read_bundle(out / bundle_file_name(run_id))


def _mlflow(store: Store, run_id: str, out: Path, config: ExportConfig) -> str:
    from workbench.export.to_mlflow import export_mlflow

    files = _artifacts(store, run_id, out)
    o = config.mlflow
    result = export_mlflow(_bundle(out, run_id), files, out, uri=o.tracking_uri if o else None,
                           experiment=o.experiment_name if o else None, run_name=o.run_name if o else None,
                           tags=dict(o.tags) if o else None)
    how = "updated" if result.reused else "created"
    return (f"mlflow   run {result.mlflow_run_id} {how} in experiment {result.experiment!r} "
            f"at {result.tracking_uri}")


def _wandb(store: Store, run_id: str, out: Path, config: ExportConfig) -> str:
    from workbench.export.to_wandb import export_wandb

    files = _artifacts(store, run_id, out)
    o = config.wandb
    result = export_wandb(store, _bundle(out, run_id), files, out, project=o.project if o else None,
                          entity=o.entity if o else None, name=o.name if o else None,
                          tags=list(o.tags) if o else None)
    if result.offline:
        return (f"wandb    offline run {result.wandb_run_id} in {result.run_dir} ({result.n_tasks:,} tasks); "
                f"upload it with `wandb sync {result.run_dir}`")
    return f"wandb    run {result.wandb_run_id} logged ({result.n_tasks:,} tasks)"


TARGETS: dict[str, Target] = {t.name: t for t in (
    Target("inspect", "inspect", _inspect),
    Target("mlflow", "mlflow", _mlflow),
    Target("wandb", "wandb", _wandb),
)}


def parse_targets(values: Iterable[str]) -> list[str]:
    """``--to`` values (repeatable, each possibly a comma list) as known target names, in order, once each.

    Raises:
        UsageError: naming an unknown target and the known ones.
    """
    names: list[str] = []
    for value in values:
        for name in (v.strip() for v in value.split(",")):
            if not name:
                continue
            if name not in TARGETS:
                raise UsageError(f"--to {name}: unknown export target; known: {', '.join(TARGETS)}")
            if name not in names:
                names.append(name)
    return names


def export_targets(store: str | Path | Store, run_id: str, out_dir: Path, names: Sequence[str],
                   config: ExportConfig | None = None) -> list[str]:
    """Export ``run_id`` to each target of ``names`` (writing into ``out_dir``); the line each printed.

    Raises:
        MissingExtra: a target's extra is not installed (checked for all before any is written).
        UsageError: the run is not in the store, or ``out_dir`` cannot be written.
    """
    for name in names:
        require(TARGETS[name].extra, f"export to {name}")
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"{out_dir}: is a file; an export needs a directory")
    s = store if isinstance(store, Store) else open_store(store, runs=[run_id])
    s.run(run_id)  # an unknown run: the store's own one line, before anything is written
    lines = []
    for name in names:
        with needs_extra(f"export to {name}"):
            lines.append(TARGETS[name].write(s, run_id, out_dir, config or ExportConfig()))
    return lines


def export_after_run(store: Store, run_id: str, out_dir: Path, names: Sequence[str],
                     config: ExportConfig) -> list[str]:
    """A finished run's configured exports (``output.export``): one line per target. A target that fails (an
    MLflow server that is down) is a line saying so and how to retry: the run itself is stored and complete."""
    lines = []
    for name in names:
        try:
            lines += export_targets(store, run_id, out_dir, [name], config)
        except Exception as exc:
            reason = redact_text(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            lines.append(f"{name:<8} failed: {reason} (retry: nel eval export {run_id} --to {name})")
    return lines
