"""``compare_runs`` and ``write_regression``: NeMo Evaluator's regression check, on nel's paired comparison.

A side is what ``nel compare`` takes — a results directory, an ``eval-*.json``, a run id in the store — or a
glob naming one bundle (``"baseline/eval-*.json"``), or the bundle ``run_evaluation`` returned. The comparison
pairs the two runs task by task (``workbench.analysis.compare``) on the baseline's primary metric, and on every
other metric both runs carry; ``write_regression`` writes it as ``nel compare --output`` does.
"""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Any

from workbench.analysis.compare import Comparison, regression_report
from workbench.analysis.compare import compare_runs as paired_comparison
from workbench.analysis.sources import RunData, load_run
from workbench.api.evaluation import default_store
from workbench.errors import UsageError
from workbench.export.artifacts import write_json

Side = str | Path | dict[str, Any]


def compare_runs(baseline: Side, candidate: Side, *, max_drop: float = 0.05, metric: str | None = None,
                 store: str | Path | None = None, seed: int = 0) -> Comparison:
    """Compare ``candidate`` with ``baseline``, paired by task; ``max_drop`` is the largest acceptable fall of
    the metric (the seed's ``threshold``). ``store`` is where run ids are looked up (default: ``$NEL_STORE`` or
    ``nel-results/nel.duckdb``). ``comparison.verdict`` is PASS, WARN, BLOCK or INCONCLUSIVE, with its reasons.

    Raises ``UsageError`` for a side that names no run (or a glob matching none, or several).
    """
    where = Path(store) if store is not None else default_store()
    b = _load(baseline, where, metric)
    c = _load(candidate, where, b.metric)
    others = [(_load(baseline, where, m), _load(candidate, where, m))
              for m in b.metrics if m != b.metric and m in c.metrics]
    try:
        return paired_comparison(b, c, max_drop=max_drop, seed=seed, other_metrics=others)
    except ValueError as exc:
        raise UsageError(f"compare_runs: {exc}") from None


def write_regression(report: Comparison, path: str | Path) -> Path:
    """Write ``report`` as ``regression.json`` (``nel compare --output``'s format) at ``path``, or into it when it
    is a directory; returns the file written."""
    out = Path(path)
    if out.is_dir() or str(path).endswith(("/", "\\")):
        out = out / "regression.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    return write_json(out, regression_report(report))


def _load(side: Side, store: Path, metric: str | None) -> RunData:
    if isinstance(side, dict):  # a bundle: its run, from its own store
        if "run_id" not in side:
            raise UsageError("compare_runs: a dict side must be a bundle (what run_evaluation returned): no run_id")
        return load_run(str(side["run_id"]), store=Path(side.get("store") or store), metric=metric)
    return load_run(str(_resolve(str(side))), store=store, metric=metric)


def _resolve(source: str) -> str | Path:
    """A glob's one match; a directory's one ``eval-*.json`` below it; else ``source`` (a file or a run id)."""
    if glob.has_magic(source):
        found = sorted(glob.glob(source, recursive=True))
        if not found:
            raise UsageError(f"{source}: no file matches")
        if len(found) > 1:
            names = ", ".join(found[:5]) + (", ..." if len(found) > 5 else "")
            raise UsageError(f"{source}: {len(found)} files match ({names}); name one run")
        return Path(found[0])
    path = Path(source)
    if path.is_dir() and not any(path.glob("eval-*.json")):
        below = sorted(path.rglob("eval-*.json"))
        if len(below) > 1:
            raise UsageError(f"{path}: {len(below)} exported runs below it; name one of them")
        if below:
            return below[0]
    return source
