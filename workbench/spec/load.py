"""A ``RunSpec`` from a YAML config (with ``${ENV}`` and ``-O`` overrides), or from JSON (what workers get).

Every problem is one line naming the file, the line and the dot-path (``suite.yaml:13: benchmarks.0.repeat:
unknown key; expected one of: ...``), or the ``-O`` that set it; exit 2.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from workbench.errors import UsageError
from workbench.spec.errors import first_problem
from workbench.spec.loader import Located, apply_overrides, load_config_tree
from workbench.spec.models import RunSpec, SpecProblem


def validate(tree: dict[str, Any], located: Located | None = None,
             known_benchmark: Callable[[str], bool] | None = None) -> RunSpec:
    """``tree`` as a ``RunSpec``; a problem is a ``UsageError`` at its place (file:line, ``-O``, or dot-path)."""
    context: dict[str, Any] = {"known_benchmark": known_benchmark}
    if located is not None:
        context["written_with_colon"] = lambda path: _written_with_colon(located, path)
    try:
        return RunSpec.model_validate(tree, context=context)
    except ValidationError as exc:
        problem = first_problem(exc)
        path, message = problem.path, problem.message
    except SpecProblem as exc:
        path, message = exc.path, exc.message
    if located is not None:
        raise located.error(path, message) from None
    raise UsageError(f"{path}: {message}" if path else message) from None


def load_spec(path: Path, overrides: Sequence[str] = ()) -> tuple[RunSpec, Located]:
    """Read, override (``-O``) and validate a config; BYOB files it names are loaded first (their benchmarks
    are then known); every error names file, line and dot-path."""
    from workbench.environments import benchmark_names
    from workbench.environments.byob import load_benchmark_file
    from workbench.environments.schemes import find_scheme, scheme_of

    located = load_config_tree(path)
    apply_overrides(located, overrides)
    for where, file in _benchmark_files(located):
        try:
            load_benchmark_file(file)
        except UsageError as exc:
            raise located.error(where, str(exc)) from None
    known = set(benchmark_names())
    tree = dict(located.tree)
    tree["source"] = str(path)
    if isinstance(tree.get("benchmark_files"), list | str):  # relative to the config file, as written
        files = tree["benchmark_files"]
        tree["benchmark_files"] = [str(located.file.parent / f) if isinstance(f, str) else f
                                   for f in ([files] if isinstance(files, str) else files)]
    def named(name: str) -> bool:  # a URI's scheme must be served (gym://, or a package's); the rest at run
        scheme = scheme_of(name)
        return name in known if scheme is None else find_scheme(scheme) is not None

    spec = validate(tree, located, named)
    return spec, located


def _benchmark_files(located: Located) -> list[tuple[str, Path]]:
    raw = located.tree.get("benchmark_files") if isinstance(located.tree, dict) else None
    if raw is None:
        return []
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list) or not all(isinstance(s, str) and s for s in items):
        raise located.error("benchmark_files", "expected a string or a list of strings")
    return [(f"benchmark_files.{i}", located.file.parent / f) for i, f in enumerate(items)]


def _written_with_colon(located: Located, path: str) -> bool:
    """Whether the config file shows ``key: 1:30:00`` unquoted, which YAML 1.1 reads as 5400 (base 60)."""
    line_no = located.lines.get(path)
    if line_no is None or path in located.overridden:
        return False
    try:
        line = located.file.read_text(encoding="utf-8").splitlines()[line_no - 1]
    except (OSError, IndexError):
        return False
    key = re.escape(path.rsplit(".", 1)[-1])
    m = re.search(rf"\b{key}\s*:\s*([^,}}#\s]+)", line)
    return bool(m and ":" in m.group(1))
