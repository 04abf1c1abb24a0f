"""The evaluation config (NeMo Evaluator's schema) as typed objects, validated strictly.

Everything is checked before anything runs: unknown keys, wrong types, values out
of range, a solver pointing at a missing service, an unknown benchmark, and every
option this version does not implement. Each error names the file, the line and
the dot-path of the offending key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.config.agent import TOOL_SOLVER_KEYS, ToolSolver, benchmark_sandbox, named_sandboxes, tool_solver
from workbench.config.cluster import Cluster, parse_cluster
from workbench.config.loader import Located
from workbench.errors import UsageError
from workbench.limits import MAX_CONCURRENT, MAX_REPEATS, Limit
from workbench.sandbox.spec import SandboxSpec
from workbench.scoring import check_params, scorer_names
from workbench.scoring.judge import check_template
from workbench.secrets import register_secret

NOT_YET: dict[str, str] = {}
JUDGE = "judge"
JUDGE_ONLY_KEYS = ("service", "prompt", "allow_self_judge")
SOLVER_TYPES = ("simple", "tool_calling")
SIMPLE_SOLVER_KEYS = ("type", "service", "system_prompt")
PROTOCOLS = ("chat_completions", "completions", "responses")


@dataclass(frozen=True, slots=True)
class Generation:
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    stop: tuple[str, ...] | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None


@dataclass(frozen=True, slots=True)
class Service:
    name: str
    url: str
    model: str
    protocol: str | None = None
    api_key: str | None = field(default=None, repr=False)
    generation: Generation = Generation()
    kind: str = "api"
    """``api``: a model; ``resources``: a NeMo Gym resources server whose tools an agent may call."""


@dataclass(frozen=True, slots=True)
class Metric:
    """One entry of ``scoring.metrics``: a library scorer (with ``params``) or a judge on a service."""

    name: str
    type: str
    path: str
    params: dict[str, Any] = field(default_factory=dict)
    service: str | None = None
    prompt: str | None = None


@dataclass(frozen=True, slots=True)
class Scoring:
    """``include_defaults``: the benchmark's own scorer comes first (and is primary)."""

    include_defaults: bool = True
    metrics: tuple[Metric, ...] = ()


@dataclass(frozen=True, slots=True)
class Benchmark:
    name: str
    service: str
    path: str  # dot-path in the config, for messages
    scoring: Scoring | None = None
    repeats: int | None = None
    max_problems: int | None = None
    max_concurrent: int = 64
    timeout: float = 120.0
    max_error_rate: float = 0.5
    """The run fails when more than this fraction of its attempts reached no verdict (``--max-error-rate``)."""
    system_prompt: str | None = None
    sandbox: SandboxSpec | None = None
    tool_solver: ToolSolver | None = None
    """Set when ``solver.type`` is ``tool_calling``: the engine drives an agent loop."""


@dataclass(frozen=True, slots=True)
class EvalConfig:
    file: Path
    services: dict[str, Service]
    benchmarks: tuple[Benchmark, ...]
    output_dir: Path
    store: Path | None = None
    cluster: Cluster | None = None  # None: the suite runs on this machine


class _Checker:
    """Typed reads from the located tree; every failure names file:line: path."""

    def __init__(self, located: Located) -> None:
        self.located = located

    def fail(self, path: str, message: str) -> UsageError:
        return self.located.error(path, message)

    def mapping(self, value: Any, path: str, allowed: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path, f"expected a mapping, got {_kind(value)}")
        for key in value:
            child = f"{path}.{key}" if path else key
            if key in NOT_YET:
                raise self.fail(child, NOT_YET[key])
            if key not in allowed:
                raise self.fail(child, f"unknown key; expected one of: {', '.join(allowed)}")
        return value

    def get(self, table: dict[str, Any], key: str, path: str, check: Callable[[Any, str], Any],
            default: Any = None, required: bool = False) -> Any:
        child = f"{path}.{key}" if path else key
        if key not in table or table[key] is None:
            if required:
                raise self.fail(path or key, f"missing required key {key!r}")
            return default
        return check(table[key], child)

    def string(self, value: Any, path: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(path, f"expected a non-empty string, got {_kind(value)}")
        return value

    def integer(self, minimum: int) -> Callable[[Any, str], int]:
        def check(value: Any, path: str) -> int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise self.fail(path, f"expected a whole number, got {_kind(value)}")
            if value < minimum:
                raise self.fail(path, f"must be at least {minimum}, got {value}")
            return value

        return check

    def limited(self, limit: Limit) -> Callable[[Any, str], int]:
        """A whole number from 1 up to ``limit`` (see ``workbench.limits``)."""
        at_least_one = self.integer(1)

        def check(value: Any, path: str) -> int:
            value = at_least_one(value, path)
            reason = limit.exceeded(value)
            if reason is not None:
                raise self.fail(path, f"{value:,} is {reason}")
            return value

        return check

    def number(self, low: float, high: float, *, open_low: bool = False) -> Callable[[Any, str], float]:
        def check(value: Any, path: str) -> float:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise self.fail(path, f"expected a number, got {_kind(value)}")
            if value > high or value < low or (open_low and value == low):
                bound = f"({low}, {high}]" if open_low else f"[{low}, {high}]"
                raise self.fail(path, f"{value} is outside {bound}")
            return float(value)

        return check

    def choice(self, options: tuple[str, ...]) -> Callable[[Any, str], str]:
        def check(value: Any, path: str) -> str:
            if value not in options:
                raise self.fail(path, f"expected one of {', '.join(options)}, got {value!r}")
            return str(value)

        return check

    def boolean(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(path, f"expected true or false, got {_kind(value)}")
        return value

    def strings(self, value: Any, path: str) -> tuple[str, ...]:
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(s, str) and s for s in items):
            raise self.fail(path, f"expected a string or a list of strings, got {_kind(value)}")
        return tuple(items)


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), f"a {type(value).__name__}"
    )


def _generation(c: _Checker, value: Any, path: str) -> Generation:
    g = c.mapping(value, path, ("temperature", "top_p", "max_tokens", "seed", "stop", "frequency_penalty",
                                "presence_penalty"))
    return Generation(
        temperature=c.get(g, "temperature", path, c.number(0.0, 2.0)),
        top_p=c.get(g, "top_p", path, c.number(0.0, 1.0, open_low=True)),
        max_tokens=c.get(g, "max_tokens", path, c.integer(1)),
        seed=c.get(g, "seed", path, c.integer(-(2**63))),
        stop=c.get(g, "stop", path, c.strings),
        frequency_penalty=c.get(g, "frequency_penalty", path, c.number(-2.0, 2.0)),
        presence_penalty=c.get(g, "presence_penalty", path, c.number(-2.0, 2.0)),
    )


def _service(c: _Checker, name: str, value: Any, path: str) -> Service:
    """``type: api`` (a model endpoint) or ``type: resources`` (a NeMo Gym resources server: tools, no model)."""
    kind = c.get(value if isinstance(value, dict) else {}, "type", path, c.choice(("api", "resources")),
                 default="api")
    if kind == "resources":
        r = c.mapping(value, path, ("type", "url"))
        return Service(name=name, url=c.get(r, "url", path, c.string, required=True), model="", kind="resources")
    s = c.mapping(value, path, ("type", "url", "protocol", "model", "api_key", "generation"))
    protocol = c.get(s, "protocol", path, c.choice(PROTOCOLS))
    if protocol == "responses" and isinstance(s.get("generation"), dict) and s["generation"].get("stop"):
        raise c.fail(f"{path}.generation.stop", "the responses protocol has no stop sequences")
    return Service(
        name=name,
        url=c.get(s, "url", path, c.string, required=True),
        model=c.get(s, "model", path, c.string, required=True),
        protocol=protocol,
        api_key=register_secret(c.get(s, "api_key", path, c.string)),  # as given, or as ${VAR} expanded it
        generation=c.get(s, "generation", path, lambda v, p: _generation(c, v, p), default=Generation()),
    )


def _metric(c: _Checker, value: Any, path: str, services: dict[str, Service], solver_service: str) -> Metric:
    m = c.mapping(value, path, ("type", "name", "params", *JUDGE_ONLY_KEYS))
    kind = c.get(m, "type", path, c.choice((*scorer_names(), JUDGE)), required=True)
    name = c.get(m, "name", path, c.string, default=kind)
    params = c.get(m, "params", path, lambda v, p: c.mapping(v, p, tuple(v) if isinstance(v, dict) else ()),
                   default={})
    if kind != JUDGE:
        for key in JUDGE_ONLY_KEYS:
            if key in m:
                raise c.fail(f"{path}.{key}", f"only a judge metric takes {key!r} (this one is type {kind!r})")
        try:
            params = check_params(kind, params, f"{path}.params")
        except UsageError as exc:
            key = str(exc).split(":", 1)[0].rsplit(".", 1)[-1]
            raise c.fail(f"{path}.params.{key}", str(exc).split(": ", 1)[1]) from None
        return Metric(name=name, type=kind, path=path, params=params)
    if params:
        raise c.fail(f"{path}.params.{next(iter(params))}", "a judge metric takes no params; "
                     "it samples with its service's generation settings")
    service = c.get(m, "service", path, c.string, required=True)
    if service not in services:
        raise c.fail(f"{path}.service", f"no service named {service!r}; services: {', '.join(services)}")
    allow_self = c.get(m, "allow_self_judge", path, c.boolean, default=False)
    judge, solver = services[service], services[solver_service]
    if not allow_self and (service == solver_service or (judge.url, judge.model) == (solver.url, solver.model)):
        raise c.fail(f"{path}.service", f"the judge {service!r} is the solver's own model "
                     f"({solver.model}), which would grade itself; use another service or set allow_self_judge: true")
    prompt = c.get(m, "prompt", path, c.string)
    if prompt is not None and (problem := check_template(prompt)):
        raise c.fail(f"{path}.prompt", problem)
    return Metric(name=name, type=kind, path=path, service=service, prompt=prompt)


def _scoring(c: _Checker, value: Any, path: str, services: dict[str, Service], solver_service: str) -> Scoring:
    s = c.mapping(value, path, ("metrics", "include_defaults"))
    include = c.get(s, "include_defaults", path, c.boolean, default=True)
    raw = c.get(s, "metrics", path, lambda v, p: v, default=[])
    if not isinstance(raw, list):
        raise c.fail(f"{path}.metrics", f"expected a list of metrics, got {_kind(raw)}")
    metrics = tuple(_metric(c, v, f"{path}.metrics.{i}", services, solver_service) for i, v in enumerate(raw))
    if not include and not metrics:
        raise c.fail(path, "include_defaults is false and no metrics are listed: nothing would score the answers")
    seen: dict[str, str] = {}
    for metric in metrics:
        if metric.name in seen:
            raise c.fail(f"{metric.path}.name", f"another metric ({seen[metric.name]}) is already named "
                         f"{metric.name!r}; give each metric its own name")
        seen[metric.name] = metric.path
    return Scoring(include_defaults=include, metrics=metrics)


def _benchmark(c: _Checker, value: Any, path: str, services: dict[str, Service],
               known: Callable[[str], bool], sandboxes: dict[str, SandboxSpec]) -> Benchmark:
    b = c.mapping(value, path, ("name", "solver", "scoring", "max_problems", "repeats", "max_concurrent", "timeout",
                                "system_prompt", "sandbox", "max_error_rate"))
    name = c.get(b, "name", path, c.string, required=True)
    if not known(name):
        raise c.fail(f"{path}.name", f"unknown benchmark {name!r} (see `nel list`)")
    raw_solver = b.get("solver") or {}
    kind = c.get(raw_solver, "type", f"{path}.solver", c.choice(SOLVER_TYPES), default="simple") \
        if isinstance(raw_solver, dict) else "simple"
    solver_keys = TOOL_SOLVER_KEYS if kind == "tool_calling" else SIMPLE_SOLVER_KEYS
    solver = c.get(b, "solver", path, lambda v, p: c.mapping(v, p, solver_keys), default={})
    sandbox = c.get(b, "sandbox", path, lambda v, p: benchmark_sandbox(c, v, p, sandboxes))
    service = c.get(solver, "service", f"{path}.solver", c.string)
    if service is None:
        if len(services) != 1:
            raise c.fail(f"{path}.solver", "name the service to evaluate (solver.service): "
                                           f"the config defines {len(services)}")
        service = next(iter(services))
    elif service not in services:
        raise c.fail(f"{path}.solver.service", f"no service named {service!r}; services: {', '.join(services)}")
    if services[service].kind != "api":
        raise c.fail(f"{path}.solver.service", f"{service!r} is a resources server, not a model; name a model "
                                               "service (type: api)")
    system_prompt = c.get(b, "system_prompt", path, c.string)
    solver_prompt = c.get(solver, "system_prompt", f"{path}.solver", c.string)
    if system_prompt is not None and solver_prompt is not None:
        raise c.fail(f"{path}.solver.system_prompt", f"also set at {path}.system_prompt; keep one")
    return Benchmark(
        name=name,
        service=service,
        path=path,
        scoring=c.get(b, "scoring", path, lambda v, p: _scoring(c, v, p, services, service)),
        repeats=c.get(b, "repeats", path, c.limited(MAX_REPEATS)),
        max_problems=c.get(b, "max_problems", path, c.integer(1)),
        max_concurrent=c.get(b, "max_concurrent", path, c.limited(MAX_CONCURRENT), default=64),
        timeout=c.get(b, "timeout", path, c.number(0.0, 86400.0, open_low=True), default=120.0),
        max_error_rate=c.get(b, "max_error_rate", path, c.number(0.0, 1.0), default=0.5),
        system_prompt=system_prompt if system_prompt is not None else solver_prompt,
        sandbox=sandbox,
        tool_solver=tool_solver(c, solver, f"{path}.solver", services, sandbox is not None, name)
        if kind == "tool_calling" else None,
    )


def benchmark_files(located: Located) -> list[tuple[str, Path]]:
    """``benchmark_files:`` entries (dot-path, path relative to the config file), checked for type."""
    c = _Checker(located)
    raw = located.tree.get("benchmark_files") if isinstance(located.tree, dict) else None
    if raw is None:
        return []
    files = c.strings(raw, "benchmark_files")
    return [(f"benchmark_files.{i}", located.file.parent / f) for i, f in enumerate(files)]


def build_config(located: Located, known_benchmark: Callable[[str], bool]) -> EvalConfig:
    """Validate the located tree into an ``EvalConfig``."""
    c = _Checker(located)
    top = c.mapping(located.tree, "", ("services", "benchmarks", "output", "benchmark_files", "cluster",
                                       "sandboxes"))
    raw_services = c.get(top, "services", "", lambda v, p: c.mapping(v, p, tuple(v) if isinstance(v, dict) else ()),
                         required=True)
    if not raw_services:
        raise c.fail("services", "define at least one service")
    services = {name: _service(c, name, value, f"services.{name}") for name, value in raw_services.items()}
    raw_benchmarks = c.get(top, "benchmarks", "", lambda v, p: v, required=True)
    if not isinstance(raw_benchmarks, list) or not raw_benchmarks:
        raise c.fail("benchmarks", "expected a non-empty list of benchmarks")
    sandboxes = named_sandboxes(c, top)
    benchmarks = tuple(
        _benchmark(c, value, f"benchmarks.{i}", services, known_benchmark, sandboxes)
        for i, value in enumerate(raw_benchmarks)
    )
    output = c.get(top, "output", "", lambda v, p: c.mapping(v, p, ("dir", "store")), default={})
    out_dir = c.get(output, "dir", "output", c.string, default="nel-results")
    store = c.get(output, "store", "output", c.string)
    # Relative paths are relative to where `nel` runs, as for the command-line flags.
    return EvalConfig(
        file=located.file,
        services=services,
        benchmarks=benchmarks,
        output_dir=Path(out_dir),
        store=None if store is None else Path(store),
        cluster=c.get(top, "cluster", "", lambda v, p: parse_cluster(c, v, p)),
    )
