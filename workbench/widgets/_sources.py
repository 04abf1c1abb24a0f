"""What a widget accepts as a run, and where the run's attempt texts are read from."""

from __future__ import annotations

from pathlib import Path

from workbench.analysis.diagnosis.evidence import EvidenceSource, evidence_for
from workbench.analysis.sources import RunData, load_run
from workbench.errors import UsageError

RunSource = str | Path | RunData
"""A run id (looked up in the store), an exported results directory, or a run already loaded."""

_STORE_PREFIX = "store:"


def load(source: RunSource, store: Path | None, metric: str | None) -> RunData:
    if isinstance(source, RunData):
        return source
    return load_run(str(source), store=store, metric=metric)


def evidence_of(source: RunSource, run: RunData, store: Path | None) -> EvidenceSource | None:
    """The attempt texts of ``run``: from where it was named, or, for a loaded run, from where it was read
    (``RunData.source``: ``store:PATH#RUN`` or an export directory). None when there is nowhere to read them
    (a run built in memory): the widgets then show counts without texts."""
    metric = None if run.metrics and run.metric == run.metrics[0] else run.metric
    where, in_store = (str(source), store) if not isinstance(source, RunData) else _origin(run)
    if where is None:
        return None
    try:
        return evidence_for(where, in_store, metric=metric)
    except UsageError:
        return None


def _origin(run: RunData) -> tuple[str | None, Path | None]:
    if run.source.startswith(_STORE_PREFIX):
        path, _, run_id = run.source[len(_STORE_PREFIX):].rpartition("#")
        return (run_id or run.run_id), Path(path)
    if Path(run.source).is_dir():
        return run.source, None
    return None, None
