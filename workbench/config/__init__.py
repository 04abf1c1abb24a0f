"""Evaluation configs in NeMo Evaluator's YAML schema: load, override, validate."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from workbench.config.cluster import Cluster
from workbench.config.loader import Located, apply_overrides, load_config_tree
from workbench.config.schema import Benchmark, EvalConfig, Generation, Service, benchmark_files, build_config
from workbench.engine.metrics import DEFAULT, MetricSpec
from workbench.errors import UsageError
from workbench.model.config import ModelConfig, infer_protocol
from workbench.scoring.judge import DEFAULT_TEMPLATE


def load_config(path: Path, overrides: Sequence[str] = ()) -> tuple[EvalConfig, Located]:
    """Read, override (``-O``) and validate a config; every error names file, line and dot-path."""
    from workbench.environments import benchmark_names
    from workbench.environments.byob import load_benchmark_file

    located = load_config_tree(path)
    apply_overrides(located, overrides)
    for where, file in benchmark_files(located):
        try:
            load_benchmark_file(file)
        except UsageError as exc:
            raise located.error(where, str(exc)) from None
    known = set(benchmark_names())
    config = build_config(located, lambda name: name in known or name.startswith("gym://"))  # remote: checked at run
    for bench in config.benchmarks:  # the model side's own checks, located
        model_config(config, bench, located)
        metric_specs(config, bench, located)
    return config, located


def _service_model(config: EvalConfig, name: str, system_prompt: str | None, timeout: float,
                   located: Located | None) -> ModelConfig:
    service = config.services[name]
    try:
        return ModelConfig(
            url=service.url,
            model_id=service.model,
            protocol=service.protocol or infer_protocol(service.url) or "chat_completions",  # type: ignore[arg-type]
            api_key=service.api_key,
            system_prompt=system_prompt,
            request_timeout=timeout,
            **asdict(service.generation),  # the generation section's names are ModelConfig's
        )
    except UsageError as exc:
        where = located.where(f"services.{name}") if located else f"services.{name}"
        raise UsageError(f"{where}: {exc}") from None


def model_config(config: EvalConfig, bench: Benchmark, located: Located | None = None) -> ModelConfig:
    """The ``ModelConfig`` one benchmark of the suite is evaluated with."""
    return _service_model(config, bench.service, bench.system_prompt, bench.timeout, located)


def metric_specs(config: EvalConfig, bench: Benchmark, located: Located | None = None) -> list[MetricSpec] | None:
    """The metrics of one suite entry (``None``: the benchmark's own scorer alone, as without ``scoring:``)."""
    from workbench.environments import get_environment

    scoring = bench.scoring
    if scoring is None:
        return None
    specs: list[MetricSpec] = []
    if scoring.include_defaults:
        default = str(get_environment(bench.name).describe().get("scorer") or "default")
        specs.append(MetricSpec(name=default, type=DEFAULT))
    for metric in scoring.metrics:
        if specs and metric.name == specs[0].name and scoring.include_defaults:
            message = (f"{metric.name!r} already names the benchmark's own scorer (include_defaults); "
                       "give this metric another name")
            raise located.error(f"{metric.path}.name", message) if located else UsageError(message)
        judge = None
        if metric.service is not None:
            judge = _service_model(config, metric.service, None, bench.timeout, located)
        specs.append(MetricSpec(name=metric.name, type=metric.type, params=metric.params, judge=judge,
                                template=metric.prompt or DEFAULT_TEMPLATE))
    return specs


__all__ = ["Benchmark", "Cluster", "EvalConfig", "Generation", "Located", "Service", "load_config", "metric_specs",
           "model_config"]
