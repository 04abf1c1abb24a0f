"""Name → environment factory. Built-ins come from ``benchmarks/*/benchmark.toml``, plus the
benchmarks that need code of their own (``BUILTIN_CLASSES``, e.g. humaneval).

``@register("name")`` adds a factory (a class or any zero-argument callable that
returns an ``EvalEnvironment``); ``get_environment`` builds one by name and
``UnknownBenchmark`` lists the known names when asked for another.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from workbench.environments.base import EvalEnvironment
from workbench.environments.schemes import build_from_uri, check_uri, known_schemes, scheme_of
from workbench.errors import UsageError
from workbench.resources import benchmarks_dir

if TYPE_CHECKING:
    from workbench.environments.dataset import BenchmarkDefinition

Factory = Callable[[], EvalEnvironment]
F = TypeVar("F", bound=Factory)

DatasetFactory = Callable[[str], EvalEnvironment]

_REGISTRY: dict[str, Factory] = {}
_WITH_DATASET: dict[str, DatasetFactory] = {}
"""Benchmarks that can run over another dataset (``dataset:`` in a config): name → factory of the source."""
_TOML: dict[str, Path] = {}
"""Registered names served by a ``benchmark.toml`` (described from it, without loading data)."""

BUILTIN_CLASSES: dict[str, str] = {
    "humaneval": "workbench.environments.humaneval:HumanEvalEnvironment",
    "file_tasks": "workbench.environments.file_tasks:FileTasksEnvironment",
}
"""Built-ins defined in Python rather than TOML: name → ``module:class``, imported on first use (keeps ``nel`` fast)."""


class UnknownBenchmark(UsageError):
    def __init__(self, name: str, known: list[str]) -> None:
        schemes = ", ".join(f"{s}://" for s in known_schemes())
        super().__init__(f"unknown benchmark {name!r}; known benchmarks: {', '.join(known)}; or a URL ({schemes}) "
                         "or a BYOB .py file")


def register(name: str, with_dataset: DatasetFactory | None = None) -> Callable[[F], F]:
    """Register an environment factory under ``name`` (and ``with_dataset``, building it over another source)."""

    def decorator(factory: F) -> F:
        if isinstance(factory, type) and issubclass(factory, EvalEnvironment) and factory.name == "unnamed":
            factory.name = name  # a class that names itself only here (NeMo Evaluator's way) runs under that name
        _REGISTRY[name] = factory
        _TOML.pop(name, None)
        _WITH_DATASET.pop(name, None)
        if with_dataset is not None:
            _WITH_DATASET[name] = with_dataset
        get_environment.cache_clear()  # registered again (a notebook cell rerun): the new definition from now on
        return factory

    return decorator


def _builtin_definitions() -> dict[str, Path]:
    return {p.parent.name: p for p in sorted(benchmarks_dir().glob("*/benchmark.toml"))}


def build_definition(definition: BenchmarkDefinition) -> EvalEnvironment:
    """The environment of a ``benchmark.toml``: a ``DatasetEnvironment``, or the subclass its ``environment`` names."""
    from workbench.environments.dataset import DatasetEnvironment, import_target

    cls = DatasetEnvironment
    if definition.environment is not None:
        cls = import_target(definition.environment, f"benchmark {definition.name!r}: environment")
        if not (isinstance(cls, type) and issubclass(cls, DatasetEnvironment)):
            raise UsageError(f"benchmark {definition.name!r}: environment {definition.environment!r} is not a "
                             "DatasetEnvironment subclass")
    return cls(definition)


def _ensure_builtins() -> None:
    from workbench.environments.dataset import BenchmarkDefinition

    def factory(path: Path) -> Factory:
        return lambda: build_definition(BenchmarkDefinition.load(path))

    def with_dataset(path: Path) -> DatasetFactory:
        return lambda source: build_definition(BenchmarkDefinition.load(path).with_dataset(source))

    for name, path in _builtin_definitions().items():
        if name not in _REGISTRY:
            _REGISTRY[name] = factory(path)
            _WITH_DATASET[name] = with_dataset(path)
            _TOML[name] = path
    for name, target in BUILTIN_CLASSES.items():
        if name not in _REGISTRY:
            _REGISTRY[name] = _lazy_class(target)


def _lazy_class(target: str) -> Factory:
    """A factory that imports ``module:class`` only when the benchmark is built."""

    def build() -> EvalEnvironment:
        module, _, cls = target.partition(":")
        env: EvalEnvironment = getattr(importlib.import_module(module), cls)()
        return env

    return build


def benchmark_names() -> list[str]:
    _ensure_builtins()
    return sorted(_REGISTRY)


@cache
def get_environment(name: str, dataset: str | None = None) -> EvalEnvironment:
    """Build (once per process) the environment registered as ``name``, or the remote one a URI (``gym://…``,
    any scheme in ``workbench.environments.schemes``) names; ``dataset`` (an ``hf://`` URI or a local file) runs
    the benchmark's prompt and scorer over another source."""
    if dataset is not None:
        _ensure_builtins()
        if name not in _REGISTRY:
            raise UnknownBenchmark(name, benchmark_names())
        rebuild = _WITH_DATASET.get(name)
        if rebuild is None:
            raise UsageError(f"benchmark {name!r} takes no dataset: (its data is its own); only dataset benchmarks "
                             f"(benchmark.toml, BYOB) do")
        return rebuild(dataset)
    if scheme_of(name) is not None:
        env = build_from_uri(name)
        if env is not None:
            return env
    _ensure_builtins()
    factory = _REGISTRY.get(name)
    if factory is None:
        raise UnknownBenchmark(name, benchmark_names())
    return factory()


def describe_benchmark(name: str) -> dict[str, Any]:
    """``nel list``'s facts about ``name`` without loading a built-in's data (hub ones: from the manifest)."""
    from workbench.environments.dataset import BenchmarkDefinition, describe_definition

    _ensure_builtins()
    path = _TOML.get(name)
    if path is not None:
        return describe_definition(BenchmarkDefinition.load(path))
    info = get_environment(name).describe()
    return {"present": "n/a", **info}


def resolve_benchmark(name: str, files: Sequence[str | Path] = ()) -> str:
    """The registered name a benchmark reference stands for, loading the BYOB ``files`` first: a ``.py`` file
    names the one benchmark it defines; a URI (``gym://…``) is checked now, so a malformed one (or one whose scheme
    nothing serves) fails before anything starts."""
    from workbench.environments.byob import load_benchmark_file

    for path in files:
        load_benchmark_file(path)
    if name.startswith("hf://"):
        raise UsageError(f"{name}: an hf:// URI names a dataset, not a benchmark: give it with a benchmark whose "
                         "prompt and scorer to use (--dataset, or dataset: in a config) or as dataset= in a BYOB file")
    if "://" in name:
        check_uri(name)
        return name
    if not name.endswith(".py"):
        return name
    names = load_benchmark_file(name)
    if len(names) > 1:
        raise UsageError(f"{name} defines {len(names)} benchmarks ({', '.join(names)}); "
                         f"use --benchmark-file {name} -b NAME")
    return names[0]


def builtin_definition(name: str) -> BenchmarkDefinition | None:
    """The ``benchmark.toml`` definition serving ``name`` (``None``: a benchmark defined in Python, or unknown)."""
    from workbench.environments.dataset import BenchmarkDefinition

    _ensure_builtins()
    path = _TOML.get(name)
    return None if path is None else BenchmarkDefinition.load(path)


def environment_class(name: str) -> type[EvalEnvironment] | None:
    """The class of the environment registered as ``name``, without building it (no data is loaded): what a run's
    summary asks for the benchmark's class-level declarations (``EvalEnvironment.benchmark_figures``). ``None``
    when that is not known without building it: a URI (``gym://``), a factory that is not a class (a BYOB
    function), a name not registered in this process (a BYOB file's, after the run), or a class that cannot be
    imported."""
    from workbench.environments.dataset import BenchmarkDefinition, DatasetEnvironment, import_target

    if "://" in name:
        return None
    _ensure_builtins()
    try:
        path = _TOML.get(name)
        if path is not None:
            target = BenchmarkDefinition.load(path).environment
            found: Any = DatasetEnvironment if target is None else import_target(target, f"benchmark {name!r}")
        elif name in BUILTIN_CLASSES:
            module, _, cls = BUILTIN_CLASSES[name].partition(":")
            found = getattr(importlib.import_module(module), cls)
        else:
            found = _REGISTRY.get(name)
    except (UsageError, ImportError, AttributeError):
        return None
    return found if isinstance(found, type) and issubclass(found, EvalEnvironment) else None

