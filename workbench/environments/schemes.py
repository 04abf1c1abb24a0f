"""URI scheme → remote-environment factory: ``gym://`` today, ``lm-eval://`` or ``hf://`` tomorrow.

A benchmark name with ``://`` in it is a URI; its scheme picks a ``Scheme`` (``check`` the URI's grammar
without contacting anything, ``build`` the environment). The environments layer does not import the
packages that implement schemes; they register themselves, found in this order on first use:

1. ``register_scheme("name", build, check)`` — in-process, e.g. from a BYOB file or a test;
2. the ``nel_workbench.schemes`` entry points — how an installed package plugs in
   (``[project.entry-points."nel_workbench.schemes"] name = "package.module:SCHEME"``, a ``Scheme``);
3. ``BUILTIN_SCHEMES`` — the same ``module:attribute`` targets for the schemes this package ships, so
   they work in a checkout whose editable install predates the entry points (no reinstall needed).

Each lookup imports at most the one module that serves the scheme, and only when a URI uses it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from workbench.environments.base import EvalEnvironment
from workbench.errors import UsageError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

ENTRY_POINT_GROUP = "nel_workbench.schemes"

BUILTIN_SCHEMES: dict[str, str] = {
    "gym": "workbench.gym.scheme:GYM_SCHEME",
    "lm-eval": "workbench.lmeval.scheme:LMEVAL_SCHEME",
}
"""Schemes shipped with nel: scheme → ``module:attribute`` (a ``Scheme``), imported on first use."""


UNSUPPORTED_SCHEMES: dict[str, str] = {
    "vlmevalkit": "nel does not integrate VLMEvalKit (it has no release that installs cleanly as a dependency); "
                  "run a visual benchmark as a benchmark.toml whose environment sends image content parts "
                  "(docs/images.md; the built-in shape_count is one)",
    "skills": "nel does not integrate NeMo Skills (it has no release that installs cleanly as a dependency); run "
              "its benchmarks' data through hf:// (a BYOB dataset= or a benchmark's dataset:) or an lm-eval:// task",
}
"""Schemes users ask for that nel knows of but cannot serve here (unless a package registers them): why, and what
to use instead."""


def _no_check(uri: str) -> None:
    return None


@dataclass(frozen=True, slots=True)
class Scheme:
    """How to serve ``scheme://…`` benchmark names."""

    build: Callable[[str], EvalEnvironment]
    """The environment a URI names (may contact the server)."""
    check: Callable[[str], None] = _no_check
    """Raise a one-line ``UsageError`` if the URI is malformed; never contacts anything."""


_SCHEMES: dict[str, Scheme] = {}


def register_scheme(name: str, build: Callable[[str], EvalEnvironment],
                    check: Callable[[str], None] = _no_check) -> Scheme:
    """Serve ``name://…`` benchmark names with ``build`` (and validate them with ``check``)."""
    scheme = Scheme(build=build, check=check)
    _SCHEMES[name] = scheme
    return scheme


def scheme_of(name: str) -> str | None:
    """``"gym"`` for ``"gym://host:1"``; ``None`` for a plain benchmark name."""
    scheme, sep, _ = name.partition("://")
    return scheme if sep else None


def _entry_points() -> dict[str, EntryPoint]:
    from importlib.metadata import entry_points  # only when a URI is used: keeps `nel` startup fast

    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def _load(target: str | EntryPoint) -> Scheme:
    if not isinstance(target, str):
        loaded = target.load()
    else:
        module, _, attribute = target.partition(":")
        loaded = getattr(importlib.import_module(module), attribute)
    if not isinstance(loaded, Scheme):
        raise TypeError(f"{target}: expected a workbench.environments.schemes.Scheme, got {type(loaded).__name__}")
    return loaded


def find_scheme(name: str) -> Scheme | None:
    """The ``Scheme`` serving ``name://`` (registered, then entry points, then built-in), or ``None``."""
    scheme = _SCHEMES.get(name)
    if scheme is None:
        target: str | EntryPoint | None = _entry_points().get(name) or BUILTIN_SCHEMES.get(name)
        if target is None:
            return None
        scheme = _SCHEMES[name] = _load(target)
    return scheme


def known_schemes() -> list[str]:
    """Every scheme that can be served, without importing any of them."""
    return sorted({*_SCHEMES, *_entry_points(), *BUILTIN_SCHEMES})


def unknown_scheme(uri: str) -> UsageError:
    scheme = scheme_of(uri) or uri
    known = " or ".join(f"{s}://" for s in known_schemes())
    return UsageError(f"bad benchmark URL {uri!r}: scheme: {scheme!r} is not {known}")


def check_uri(uri: str) -> None:
    """Validate a benchmark URI: its scheme is served and its grammar is right (nothing is contacted)."""
    name = scheme_of(uri) or ""
    scheme = find_scheme(name)
    if scheme is None and name in UNSUPPORTED_SCHEMES:
        raise UsageError(f"{uri}: {name}:// is not supported: {UNSUPPORTED_SCHEMES[name]}")
    if scheme is None:
        raise unknown_scheme(uri)
    scheme.check(uri)


def build_from_uri(uri: str) -> EvalEnvironment | None:
    """The environment a URI names, or ``None`` when no package serves its scheme."""
    scheme = find_scheme(scheme_of(uri) or "")
    return None if scheme is None else scheme.build(uri)
