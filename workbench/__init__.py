"""nel workbench: evaluate LLMs and agents, keep every step in DuckDB.

The package root stays import-light (``nel --help`` must be fast); heavy
modules load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from workbench.store.reader import Store


def open_store(path: Any) -> Store:
    """Open a store (a ``nel.duckdb`` file or the directory holding one) for reading."""
    from workbench.store.reader import open_store as _open

    return _open(path)


__all__ = ["__version__", "open_store"]
