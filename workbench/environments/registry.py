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
from typing import TypeVar

from workbench.environments.base import EvalEnvironment
from workbench.environments.schemes import build_from_uri, check_uri, scheme_of
from workbench.errors import UsageError
from workbench.resources import benchmarks_dir

Factory = Callable[[], EvalEnvironment]
F = TypeVar("F", bound=Factory)

_REGISTRY: dict[str, Factory] = {}

BUILTIN_CLASSES: dict[str, str] = {
    "humaneval": "workbench.environments.humaneval:HumanEvalEnvironment",
    "file_tasks": "workbench.environments.file_tasks:FileTasksEnvironment",
    "shape_count": "workbench.environments.shape_count:ShapeCountEnvironment",
}
"""Built-ins defined in Python rather than TOML: name → ``module:class``, imported on first use (keeps ``nel`` fast)."""


class UnknownBenchmark(UsageError):
    def __init__(self, name: str, known: list[str]) -> None:
        super().__init__(f"unknown benchmark {name!r}; known benchmarks: {', '.join(known)}")


def register(name: str) -> Callable[[F], F]:
    """Register an environment factory under ``name``."""

    def decorator(factory: F) -> F:
        _REGISTRY[name] = factory
        return factory

    return decorator


def _builtin_definitions() -> dict[str, Path]:
    return {p.parent.name: p for p in sorted(benchmarks_dir().glob("*/benchmark.toml"))}


def _ensure_builtins() -> None:
    from workbench.environments.dataset import DatasetEnvironment

    def factory(path: Path) -> Factory:
        return lambda: DatasetEnvironment.from_definition(path)

    for name, target in BUILTIN_CLASSES.items():  # first: a class may serve a benchmark.toml of its own
        if name not in _REGISTRY:
            _REGISTRY[name] = _lazy_class(target)
    for name, path in _builtin_definitions().items():
        if name not in _REGISTRY:
            _REGISTRY[name] = factory(path)


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
def get_environment(name: str) -> EvalEnvironment:
    """Build (once per process) the environment registered as ``name``, or the remote one a URI (``gym://…``,
    any scheme in ``workbench.environments.schemes``) names."""
    if scheme_of(name) is not None:
        env = build_from_uri(name)
        if env is not None:
            return env
    _ensure_builtins()
    factory = _REGISTRY.get(name)
    if factory is None:
        raise UnknownBenchmark(name, benchmark_names())
    return factory()


def resolve_benchmark(name: str, files: Sequence[str | Path] = ()) -> str:
    """The registered name a benchmark reference stands for, loading the BYOB ``files`` first: a ``.py`` file
    names the one benchmark it defines; a URI (``gym://…``) is checked now, so a malformed one (or one whose scheme
    nothing serves) fails before anything starts."""
    from workbench.environments.byob import load_benchmark_file

    for path in files:
        load_benchmark_file(path)
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
