"""``write_all``: a run's artifacts on disk, as ``nel eval run`` writes them (``workbench.export.artifacts``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.api.evaluation import default_store
from workbench.errors import UsageError
from workbench.export.artifacts import export_run


def write_all(bundle: dict[str, Any] | str, output_dir: str | Path, *, store: str | Path | None = None) -> list[Path]:
    """Write ``eval-{run_id}.json``, ``results.jsonl``, ``trajectories.jsonl``, ``runtime_stats.json`` and
    ``failure_analysis.json`` for the run of ``bundle`` (what ``run_evaluation`` returned, or a run id) into
    ``output_dir``; returns the paths written. The run is read from its store (the bundle says which; else
    ``store``, else the default one), so every step is written, not only what the bundle summarises."""
    if isinstance(bundle, str):
        run_id, where = bundle, store
    else:
        if "run_id" not in bundle:
            raise UsageError("write_all: the bundle has no run_id; pass what run_evaluation returned, or a run id")
        run_id, where = str(bundle["run_id"]), store if store is not None else bundle.get("store")
    return list(export_run(Path(where) if where is not None else default_store(), run_id, output_dir).paths)
