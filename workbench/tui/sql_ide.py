"""``nel sql --ide``: harlequin, the Textual SQL IDE, on a nel store: read-only, live runs included.

Why harlequin rather than a bigger SQL screen of our own: it already has what triage over SQL needs (run the
statement under the cursor or the selection, a schema browser, completion, history, results export to CSV,
Parquet and JSON, a readable error panel) on the same Textual version the TUI pins; what it lacks is nel's
store, and this adapter is all it takes to give it that.

Every query runs on a fresh ``Store.connect()`` connection, materialised and closed before ``execute``
returns. So each query sees the store as it is at that moment (a run still being written included, no
half-written step), and the IDE never holds the database file open between queries: a long session never
keeps a run's writer from merging its steps (DuckDB lets no writer in while a reader holds the file).
The price is that nothing lives from one statement to the next (``CREATE TEMP TABLE``, ``SET``): use a
``WITH`` clause. Writes are refused by the read-only store.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
from harlequin import Harlequin
from harlequin.adapter import HarlequinAdapter, HarlequinConnection, HarlequinCursor
from harlequin.autocomplete.completion import HarlequinCompletion
from harlequin.catalog import Catalog, CatalogItem
from harlequin.exception import HarlequinQueryError
from harlequin_duckdb.adapter import DuckDbConnection

from workbench.store.queries.sql import one_line
from workbench.store.reader import Store

MAX_ROWS = 100_000
"""Rows a query fetches at most (harlequin's own viewer limit): what is fetched is held until the next query."""

_RELATIONS_SQL = """
SELECT table_name, table_type FROM information_schema.tables
WHERE table_catalog = current_database() AND table_schema = 'main' ORDER BY table_name
"""
_COLUMNS_SQL = """
SELECT table_name, column_name, data_type FROM information_schema.columns
WHERE table_catalog = current_database() AND table_schema = 'main' ORDER BY table_name, ordinal_position
"""


class StoreCursor(HarlequinCursor):
    """A query's result, already fetched (its connection is closed): ``set_limit`` slices it."""

    def __init__(self, table: pa.Table, columns: list[tuple[str, str]]) -> None:
        self._table = table
        self._columns = columns

    def columns(self) -> list[tuple[str, str]]:
        return self._columns

    def set_limit(self, limit: int) -> StoreCursor:
        return StoreCursor(self._table.slice(0, limit), self._columns)

    def fetchall(self) -> pa.Table | None:
        return self._table if self._table.num_rows else None


class StoreConnection(HarlequinConnection):
    """A nel store as harlequin sees it: the store's tables and views, one fresh connection per query."""

    def __init__(self, store: Store, init_message: str = "") -> None:
        self.store = store
        self.init_message = init_message
        self._running: set[duckdb.DuckDBPyConnection] = set()
        self._lock = threading.Lock()
        self._plain: DuckDbConnection | None = None  # completions and parsing: no store needed

    def execute(self, query: str) -> StoreCursor | None:
        try:
            with self.store.connect() as con:
                with self._lock:
                    self._running.add(con)
                try:
                    relation = con.sql(query)
                    if relation is None or getattr(relation, "_return_type", "query_result") != "query_result":
                        return None  # a statement with no rows of its own (duckdb 2 returns its status)
                    columns = list(zip(relation.columns, map(_short_type, relation.dtypes), strict=True))
                    return StoreCursor(relation.limit(MAX_ROWS).to_arrow_table(), columns)
                finally:
                    with self._lock:
                        self._running.discard(con)
        except duckdb.InterruptException:
            return None
        except duckdb.Error as exc:
            raise HarlequinQueryError(msg=one_line(exc), title="The store refused the query:") from exc

    def cancel(self) -> None:
        with self._lock:
            running = list(self._running)
        for con in running:
            con.interrupt()

    def get_catalog(self) -> Catalog:
        """Every table and view a query can name (runs, steps, tasks, the views of ``store/views.sql``), with
        their columns: read at once, so browsing the catalog never opens the store."""
        with self.store.connect() as con:
            relations = con.execute(_RELATIONS_SQL).fetchall()
            columns: dict[str, list[CatalogItem]] = {}
            for table, column, data_type in con.execute(_COLUMNS_SQL).fetchall():
                columns.setdefault(table, []).append(CatalogItem(
                    qualified_identifier=f"{_quoted(table)}.{_quoted(column)}", query_name=_quoted(column),
                    label=column, type_label=_short_type(data_type), type_name=data_type))
        return Catalog(items=[
            CatalogItem(qualified_identifier=_quoted(name), query_name=_quoted(name), label=name,
                        type_label="v" if kind == "VIEW" else "t", children=columns.get(name, []),
                        type_name=kind)
            for name, kind in relations])

    def get_completions(self) -> list[HarlequinCompletion]:
        return self._plain_connection().get_completions()

    def validate_sql(self, text: str) -> str:
        return self._plain_connection().validate_sql(text)

    def _plain_connection(self) -> DuckDbConnection:
        if self._plain is None:
            self._plain = DuckDbConnection(duckdb.connect())
        return self._plain

    def close(self) -> None:
        if self._plain is not None:
            self._plain.conn.close()


class StoreAdapter(HarlequinAdapter):
    """harlequin's adapter for a nel store (``conn_str``: the store's path)."""

    ADAPTER_OPTIONS = None
    COPY_FORMATS = None
    IMPLEMENTS_CANCEL = True
    IMPLEMENTS_VALIDATE_SQL = True
    ADAPTER_DETAILS = "nel's store: the DuckDB file and its live runs, read-only (nel sql --ide)."

    def __init__(self, conn_str: Sequence[str], **_: Any) -> None:
        self.conn_str = tuple(conn_str)
        self.store = Store(self.conn_str[0])

    @property
    def connection_id(self) -> str | None:
        return self.store.path.resolve().as_posix()

    def connect(self) -> StoreConnection:
        return StoreConnection(self.store, init_message=(
            f"nel store {self.store.path}: read-only; each query sees the runs as they are when it starts, "
            "live ones included"))


def ide_app(store_path: str | Path, *, record_history: bool = True) -> Harlequin:
    """harlequin on the store at ``store_path`` (not started: ``.run()`` it, or drive it with Pilot)."""
    adapter = StoreAdapter((str(store_path),))
    return Harlequin(adapter=adapter, adapter_name="nel", connection_hash=adapter.connection_id,
                     record_history=record_history, viewer_max_rows=MAX_ROWS, no_download_tzdata=True)


def _short_type(data_type: Any) -> str:
    return DuckDbConnection._short_column_type(data_type)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
