"""Interceptors by name: the built-ins, ones a user registered with ``@interceptor("name")``, and any class named
by a dotted path ``package.module:ClassName`` (BYOB-style: the module is imported when the run is built)."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from workbench.errors import UsageError
from workbench.model.interceptors.base import Interceptor, InterceptorChain, InterceptorContext

T = TypeVar("T")
BUILTIN: dict[str, tuple[str, str]] = {
    "cache": ("workbench.model.interceptors.cache", "CacheInterceptor"),
    "request_log": ("workbench.model.interceptors.request_log", "RequestLog"),
    "turn_counter": ("workbench.model.interceptors.turn_counter", "TurnCounter"),
}
_REGISTERED: dict[str, type[Any]] = {}
_DOTTED = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def interceptor(name: str) -> Callable[[type[T]], type[T]]:
    """Register a class as interceptor ``name`` (usable in a config once its module is imported, e.g. listed in
    ``benchmark_files``); a dotted path ``module:Class`` needs no registration."""

    def register(cls: type[T]) -> type[T]:
        if name in BUILTIN:
            raise ValueError(f"@interceptor({name!r}): a built-in interceptor has that name")
        _REGISTERED[name] = cls
        return cls

    return register


def known_name(name: str) -> str | None:
    """Why ``name`` names no interceptor, or None (a dotted path is taken on trust until the run is built)."""
    if name in BUILTIN or name in _REGISTERED or _DOTTED.match(name):
        return None
    return (f"unknown interceptor {name!r}; built-in: {', '.join(sorted(BUILTIN))}, or your own as "
            "package.module:ClassName")


def interceptor_class(name: str) -> type[Any]:
    """The class ``name`` names; ``UsageError`` when it cannot be imported or is not an interceptor."""
    if name in BUILTIN:
        module, attr = BUILTIN[name]
        cls: Any = getattr(importlib.import_module(module), attr)
        return cls  # type: ignore[no-any-return]
    if name in _REGISTERED:
        return _REGISTERED[name]
    if (why := known_name(name)) is not None:
        raise UsageError(why)
    module_name, _, attr = name.partition(":")
    try:
        found: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"cannot import {module_name!r} ({exc}); is it on PYTHONPATH?") from None
    for part in attr.split("."):
        found = getattr(found, part, None)
        if found is None:
            raise UsageError(f"{module_name!r} has no {attr!r}")
    if not isinstance(found, type) or not all(callable(getattr(found, m, None)) for m in ("before", "after", "close")):
        raise UsageError(f"{name} is not an interceptor class (it needs before, after and close methods; "
                         "see docs/interceptors.md)")
    return found


def build(name: str, config: Mapping[str, Any], context: InterceptorContext) -> Interceptor:
    """One interceptor, its config checked (``UsageError("config.KEY: why")``)."""
    cls = interceptor_class(name)
    try:
        made: Interceptor = cls(dict(config), context)
    except ValueError as exc:
        raise UsageError(f"config.{exc}" if not str(exc).startswith("config") else str(exc)) from None
    return made


def check_config(name: str, config: Mapping[str, Any]) -> str | None:
    """Why a built-in interceptor's ``config`` is wrong ("KEY: why"), or None; others are checked when built."""
    if name not in BUILTIN:
        return None
    try:
        build(name, config, InterceptorContext(Path("."), Path(".")))
    except UsageError as exc:
        return str(exc).removeprefix("config.")
    return None


def build_chain(settings: Sequence[tuple[str, Mapping[str, Any]]], context: InterceptorContext) -> InterceptorChain:
    """A service's interceptors in order; errors name the entry (``interceptors.1.config.max_turns: ...``)."""
    made: list[Interceptor] = []
    identity: list[dict[str, Any]] = []
    for i, (name, config) in enumerate(settings):
        try:
            item = build(name, config, context)
        except UsageError as exc:
            raise UsageError(f"interceptors.{i}.{exc}" if str(exc).startswith("config.")
                             else f"interceptors.{i}.name: {exc}") from None
        made.append(item)
        if getattr(item, "affects_answers", True):
            identity.append({"name": name, "config": dict(config)})
    return InterceptorChain(made, identity)
