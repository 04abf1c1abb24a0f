"""Evaluation configs in NeMo Evaluator's YAML schema: load, override, validate."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from workbench.config.loader import Located, apply_overrides, load_config_tree
from workbench.config.schema import Benchmark, EvalConfig, Generation, Service, benchmark_files, build_config
from workbench.errors import UsageError
from workbench.model.config import ModelConfig, infer_protocol


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
    config = build_config(located, known.__contains__)
    for bench in config.benchmarks:  # the model side's own checks, located
        model_config(config, bench, located)
    return config, located


def model_config(config: EvalConfig, bench: Benchmark, located: Located | None = None) -> ModelConfig:
    """The ``ModelConfig`` one benchmark of the suite is evaluated with."""
    service = config.services[bench.service]
    try:
        return ModelConfig(
            url=service.url,
            model_id=service.model,
            protocol=service.protocol or infer_protocol(service.url) or "chat_completions",  # type: ignore[arg-type]
            api_key=service.api_key,
            system_prompt=bench.system_prompt,
            request_timeout=bench.timeout,
            **asdict(service.generation),  # the generation section's names are ModelConfig's
        )
    except UsageError as exc:
        where = located.where(f"services.{bench.service}") if located else f"services.{bench.service}"
        raise UsageError(f"{where}: {exc}") from None


__all__ = ["Benchmark", "EvalConfig", "Generation", "Located", "Service", "load_config", "model_config"]
