"""What differs between the DuckDB 1.x and 2.x Python APIs, in one place.

DuckDB 2.0 streams results: ``con.execute()`` starts a query and its rows arrive as they are fetched, and a
result not fetched to the end owns its connection (``con.sql()`` and ``con.register()`` refuse to run beside
it; ``con.execute()`` replaces it, as every query did in 1.x). Its ``execute()`` results lost the polars and
Arrow exports (``.pl()``), which live on relations (``con.sql(query).pl()``). Everything else the workbench
uses (``fetchone``, ``fetchall``, ``fetchmany``, ``fetchnumpy``, ``description``, the ``duckdb.Error``
hierarchy, ``executemany``, the settings) behaves alike in both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import duckdb

if TYPE_CHECKING:
    import polars as pl

_EXECUTE_HAS_PL = hasattr(duckdb.DuckDBPyConnection, "pl")
"""DuckDB 1.x: ``con.execute(query).pl()`` (kept there: for a statement such as ``SET`` or ``INSERT``,
``con.sql()`` in 1.x returns no relation at all)."""

STORAGE_COMPATIBILITY = "v0.10.2"
"""The storage format of a store file nel creates: DuckDB 1.x's default, which every DuckDB from 0.10.2 on
reads. DuckDB 2.0 writes its own format by default (storage version 69), which no 1.x reads: a store made by
a nel on DuckDB 2 would then be closed to a nel (or a ``duckdb`` CLI, a notebook) on 1.x. A file keeps the
format it was created with, whichever DuckDB writes to it later."""


def polars_frame(con: duckdb.DuckDBPyConnection, query: str, params: Any = None) -> pl.DataFrame:
    """Run ``query`` (with ``params``: a list, or a dict of named parameters) on ``con`` and return its
    result as a polars DataFrame, on DuckDB 1.x and 2.x alike."""
    if _EXECUTE_HAS_PL:
        result: Any = con.execute(query, params or [])
        return result.pl()
    release(con)
    return con.sql(query, params=params or None).pl()


def release(con: duckdb.DuckDBPyConnection) -> None:
    """Drop ``con``'s unfinished result, if it has one, so that any call may use the connection next.

    DuckDB 2 keeps a result open until a fetch finds no more rows (a ``fetchone`` of a one-row result leaves
    it open); 1.x dropped it at the next query, as this does. A no-op on 1.x."""
    abort = getattr(con, "abort", None)
    if abort is not None:
        abort()
