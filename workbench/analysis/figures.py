"""A run's figures as its benchmark's authors report them (SimpleQA's F1, IFEval's instruction-level accuracy):
the benchmark declares them (``EvalEnvironment.figures_source`` and ``benchmark_figures``), this folds them over
the run's steps' scoring details, streamed from the store (``workbench.store.queries.step_details``)."""

from __future__ import annotations

from workbench.environments.registry import environment_class
from workbench.store import Store
from workbench.store.queries.step_details import fold_step_details
from workbench.types import BenchmarkFigures


def run_figures(store: Store, run_id: str, benchmark: str) -> BenchmarkFigures | None:
    """The figures of run ``run_id`` of ``benchmark`` (its registered name), ``None`` when the benchmark declares
    none (or its class is not known here without building it: ``environment_class``) or no step has what they
    are computed from. Reads the steps only for a benchmark that declares figures."""
    cls = environment_class(benchmark)
    if cls is None or cls.figures_source is None:
        return None
    return fold_step_details(store, run_id, cls.benchmark_figures)
