"""The run specification: one typed, validated description of an evaluation (see ``models``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from workbench.spec.load import load_spec, validate
from workbench.spec.loader import Located
from workbench.spec.models import MAIN, Benchmark, Cluster, RunSpec
from workbench.spec.resolve import metric_specs, model_config


def load_config(path: Path, overrides: Sequence[str] = ()) -> tuple[RunSpec, Located]:
    """Read, override (``-O``) and validate a config, with every benchmark's model and metrics checked too
    (each error names file, line and dot-path)."""
    spec, located = load_spec(path, overrides)
    for bench in spec.benchmarks:  # the model side's own checks, located
        model_config(spec, bench, located)
        metric_specs(spec, bench, located)
    return spec, located


__all__ = ["MAIN", "Benchmark", "Cluster", "Located", "RunSpec", "load_config", "load_spec", "metric_specs",
           "model_config", "validate"]
