"""Locate the files shipped beside the code: SQL in ``store/``, data in ``benchmarks/``.

In a source checkout (or an editable install) they sit at the repository root;
a built wheel carries them inside the package as ``workbench/_store`` and
``workbench/_benchmarks`` (see ``pyproject.toml``).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


@cache
def resource_dir(name: str) -> Path:
    """Return the directory of shipped resource ``name`` ("store" or "benchmarks")."""
    for candidate in (_PACKAGE / f"_{name}", _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"resource directory {name!r} is missing from this installation")


def sql_path(*parts: str) -> Path:
    """Path of a file under the shipped ``store/`` directory."""
    return resource_dir("store").joinpath(*parts)


def benchmarks_dir() -> Path:
    return resource_dir("benchmarks")
