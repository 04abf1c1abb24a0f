"""From a ``RunSpec`` to what the engine runs with: a benchmark's ``ModelConfig`` and its metrics."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from workbench import secrets
from workbench.errors import UsageError
from workbench.model.config import ModelConfig, infer_protocol
from workbench.spec.loader import Located
from workbench.spec.models import ApiService, Benchmark, RunSpec, ServerService

if TYPE_CHECKING:
    from workbench.engine.metrics import MetricSpec
    from workbench.model.interceptors import InterceptorChain


def _service_model(spec: RunSpec, name: str, system_prompt: str | None, timeout: float,
                   located: Located | None, image_detail: str | None = None) -> ModelConfig:
    service = spec.services[name]
    assert isinstance(service, ApiService | ServerService)
    served = None
    if isinstance(service, ServerService):  # a server nel starts: what it serves, its secrets kept out of sight
        served = service.served()
        for value in service.secrets():
            secrets.register_secret(value)
    try:
        return ModelConfig(
            url=service.url,
            model_id=service.model,
            protocol=service.protocol or infer_protocol(service.url) or "chat_completions",  # type: ignore[arg-type]
            api_key=service.api_key,
            served=served,
            system_prompt=system_prompt,
            request_timeout=timeout,
            max_retries=service.max_retries,
            image_detail=image_detail,
            interceptors=_interceptors(spec, service),
            **dict(service.generation),  # the generation section's names are ModelConfig's
        )
    except UsageError as exc:
        key, sep, message = str(exc).partition(": ")
        if sep and key.startswith("interceptors."):  # name the entry itself: file:line of services.NAME.interceptors.I
            where = f"services.{name}.{key}"
            raise located.error(where, message) if located else UsageError(f"{where}: {message}") from None
        where = located.where(f"services.{name}") if located else f"services.{name}"
        raise UsageError(f"{where}: {exc}") from None


def _interceptors(spec: RunSpec, service: ApiService | ServerService) -> InterceptorChain | None:
    """The service's interceptors, built (a user's class imported); files are opened at the first request."""
    if not service.interceptors:
        return None
    from workbench.model.interceptors import InterceptorContext, build_chain

    base = spec.file.resolve().parent if spec.file else Path.cwd()
    context = InterceptorContext(store_dir=spec.store_path.resolve().parent, base_dir=base)
    return build_chain([(i.name, i.config) for i in service.interceptors], context)


def model_config(spec: RunSpec, bench: Benchmark, located: Located | None = None) -> ModelConfig:
    """The ``ModelConfig`` one benchmark of the suite is evaluated with."""
    return _service_model(spec, bench.service, bench.effective_system_prompt, bench.timeout, located,
                          bench.solver.image_detail)


def metric_specs(spec: RunSpec, bench: Benchmark, located: Located | None = None) -> list[MetricSpec] | None:
    """The metrics of one suite entry (``None``: the benchmark's own scorer alone, as without ``scoring:``)."""
    from workbench.engine.metrics import DEFAULT, MetricSpec
    from workbench.environments.registry import describe_benchmark
    from workbench.scoring.judge import DEFAULT_TEMPLATE

    scoring = bench.scoring
    if scoring is None:
        return None
    specs: list[MetricSpec] = []
    if scoring.include_defaults:
        default = str(describe_benchmark(bench.name).get("scorer") or "default")  # reads no data
        specs.append(MetricSpec(name=default, type=DEFAULT))
    for i, metric in enumerate(scoring.metrics):
        assert metric.name is not None
        if specs and metric.name == specs[0].name and scoring.include_defaults:
            message = (f"{metric.name!r} already names the benchmark's own scorer (include_defaults); "
                       "give this metric another name")
            where = f"{bench.path}.scoring.metrics.{i}.name"
            raise located.error(where, message) if located else UsageError(f"{where}: {message}")
        judge = None
        if metric.service is not None:
            judge = _service_model(spec, metric.service, None, bench.timeout, located)
        specs.append(MetricSpec(name=metric.name, type=metric.type, params=metric.params, judge=judge,
                                template=metric.prompt or DEFAULT_TEMPLATE))
    return specs
