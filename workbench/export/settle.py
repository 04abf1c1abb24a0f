"""After a merge: answer for each run, and finish the export a killed merge left undone.

A merge can be killed between its ingest and its export, and it can be run again by a retrying Job with
nothing left to ingest. So what a merge reports is read from the store, not from what it ingested this
time: every run it touched, every sharded run of the store (or only ``runs``, when the caller knows which
it answers for), each with its missing or unfinished shards; a run whose every shard finished and whose
export is missing or stale is exported.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from workbench.export.artifacts import export_is_current, export_run
from workbench.spec.models import ExportConfig
from workbench.store.completeness import RunCompleteness, runs_to_settle
from workbench.types import RunStatus

FINISHED_SHARD = frozenset({"complete", "failed"})


@dataclass(frozen=True, slots=True)
class SettledRun:
    """One run after a merge: where it stands, and the bundle written now (None when none was needed)."""

    run: RunCompleteness
    export: Path | None
    touched: bool
    exported: tuple[str, ...] = ()
    """One line per export target the run went to now (``targets`` of ``settle``), or why it did not."""

    @property
    def settled(self) -> bool:
        """Complete and exported: a merge has nothing to add (and says nothing, unless it touched the run)."""
        return self.run.status == RunStatus.COMPLETE and self.export is None and not self.touched

    @property
    def incomplete(self) -> bool:
        """Not complete, and no running shard will make it so: a merge that leaves it exits 1."""
        return self.run.status not in (RunStatus.COMPLETE, RunStatus.RUNNING)


def export_dir(store: Path, run_id: str) -> Path:
    return store.parent / "runs" / run_id


def settle(store: Path, touched: Collection[str], runs: Collection[str] | None = None, *,
           targets: Sequence[str] = (), export_config: ExportConfig | None = None) -> list[SettledRun]:
    """Where each run stands after a merge into ``store`` (see the module docstring). A run exported now also
    goes to each of ``targets`` (``output.export`` of the spec its shards ran: inspect, mlflow, wandb)."""
    out = []
    asked = set(touched) | set(runs or ())
    for run in runs_to_settle(store, asked):
        if runs is not None and run.run_id not in runs:
            continue
        finished = not run.missing_shards and all(st in FINISHED_SHARD for st in run.unfinished_shards.values())
        folder = export_dir(store, run.run_id)
        export: Path | None = None
        exported: tuple[str, ...] = ()
        if finished and not export_is_current(folder, run.run_id, n_steps=run.n_steps, status=run.status):
            export = export_run(store, run.run_id, folder).bundle
            if targets:
                from workbench.export.targets import export_after_run
                from workbench.store import open_store

                exported = tuple(export_after_run(open_store(store, runs=[run.run_id]), run.run_id, folder,
                                                  targets, export_config or ExportConfig()))
        out.append(SettledRun(run, export, run.run_id in asked, exported))
    return out
