"""Where a notebook finds its store: ``$NEL_STORE``, else the ``nel-demo/nel.duckdb`` that ``make demo`` (``nel
demo``) wrote in the working directory or any directory above it, since JupyterLab starts a notebook's kernel
in the notebook's own directory (``notebooks/``), not where ``make demo`` ran."""

from __future__ import annotations

import os
from pathlib import Path

from workbench.errors import UsageError

DEMO_STORE = Path("nel-demo") / "nel.duckdb"
"""Where ``nel demo`` writes, relative to the directory it runs in."""


def find_store(*, must_exist: bool = True, start: Path | None = None) -> Path:
    """The store a notebook reads: ``$NEL_STORE`` if set, else the nearest ``nel-demo/nel.duckdb`` in ``start``
    (the working directory) or a parent. None found: ``UsageError`` naming what was looked for, or, with
    ``must_exist=False`` (a notebook that makes its own runs), ``$NEL_STORE`` or ``nel-demo/nel.duckdb`` under
    the nearest directory holding a ``pyproject.toml`` (the checkout), else under ``start``."""
    here = (start or Path.cwd()).resolve()
    named = os.environ.get("NEL_STORE")
    if named:
        path = Path(named).expanduser()
        if must_exist and not path.exists():
            raise UsageError(f"NEL_STORE={named}: no store there (run `nel demo`, or point NEL_STORE at a store)")
        return path
    for folder in (here, *here.parents):
        if (folder / DEMO_STORE).exists():
            return folder / DEMO_STORE
    if must_exist:
        raise UsageError(f"no store: {DEMO_STORE} is in neither {here} nor a directory above it, and NEL_STORE "
                         "is not set (run `make demo` or `nel demo`, or set NEL_STORE)")
    checkout = next((folder for folder in (here, *here.parents) if (folder / "pyproject.toml").exists()), here)
    return checkout / DEMO_STORE
