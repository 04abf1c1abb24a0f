"""Opening the DuckDB file: schema, version checks and lock waits.

DuckDB lets one process write a file, or many read it, at a time. Nothing in
the workbench holds the file open for long (writers append segments; ingest and
readers open it briefly), so a lock conflict is waited out rather than shown.
"""

from __future__ import annotations

import time
from pathlib import Path

import duckdb

from workbench.errors import UsageError
from workbench.resources import sql_path

SCHEMA_VERSION = 3
_LOCK_WAIT_S = 60.0
# DuckDB caches up to 80 % of RAM by default; the workbench runs beside the model
# client and the TUI, so each connection gets a small budget and spills past it.
# read_json reserves a 32 MB buffer per thread: a connection that reads live JSON files
# (journals, tasks.jsonl) needs more room than one reading only the database.
MEMORY_LIMIT = "64MB"  # ingest and the journal roller: one thread
MERGE_MEMORY_LIMIT = "512MB"
"""A merge (``nel eval merge``, a background launch's or a cluster's merge job) runs on its own, so it copies
shards in with two threads and room to compress without spilling: 2 x 100,000 steps in ~3.5 s rather than
~7 s at 64 MB. ``NEL_MERGE_MEMORY`` overrides it (e.g. ``256MB`` on a small node)."""
READER_MEMORY_LIMIT = "48MB"
READER_JSON_MEMORY_LIMIT = "256MB"


def limit_memory(con: duckdb.DuckDBPyConnection, limit: str = MEMORY_LIMIT, threads: int | None = None) -> None:
    con.execute(f"SET memory_limit = '{limit}'")
    con.execute("SET preserve_insertion_order = false")
    if threads is not None:
        con.execute(f"SET threads = {threads}")


def _is_lock_error(exc: Exception) -> bool:
    text = str(exc).lower()
    return "lock" in text and ("conflicting" in text or "could not set" in text)


def _connect(path: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
    deadline = time.monotonic() + _LOCK_WAIT_S
    delay = 0.01
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.Error as exc:
            if _is_lock_error(exc) and time.monotonic() < deadline:
                time.sleep(delay)
                delay = min(delay * 2, 0.25)
                continue
            if _is_lock_error(exc):
                raise UsageError(
                    f"{path}: the store stayed locked by another process for {_LOCK_WAIT_S:.0f} s"
                ) from None
            raise UsageError(f"{path}: not a nel store ({_first_line(exc)})") from None


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0][:200]


def check_version(con: duckdb.DuckDBPyConnection, path: Path, schema: str = "main") -> None:
    """Refuse a DuckDB file that is not a store, or one written by a newer schema."""
    found = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'nel_meta' AND database_name = current_database()"
        if schema == "main"
        else f"SELECT count(*) FROM duckdb_tables() WHERE table_name = 'nel_meta' AND database_name = '{schema}'"
    ).fetchone()
    if not found or found[0] == 0:
        raise UsageError(f"{path}: a DuckDB database but not a nel store (it has no nel_meta table)")
    table = "nel_meta" if schema == "main" else f"{schema}.nel_meta"
    row = con.execute(f"SELECT value FROM {table} WHERE key = 'schema_version'").fetchone()
    version = int(row[0]) if row else 0
    if version > SCHEMA_VERSION:
        raise UsageError(
            f"{path}: written by a newer nel (store schema version {version}, this nel reads up to "
            f"{SCHEMA_VERSION}); upgrade nel-workbench"
        )


def connect_rw(path: Path, *, memory_limit: str = MEMORY_LIMIT, threads: int = 1) -> duckdb.DuckDBPyConnection:
    """Open (creating if needed) the store for writing, with schema and views in place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fresh = not path.exists()
    con = _connect(path, read_only=False)
    try:
        limit_memory(con, memory_limit, threads=threads)
        if not fresh:
            check_version(con, path)
        con.execute(sql_path("schema.sql").read_text())
        _migrate(con)
        con.execute(sql_path("views.sql").read_text())
    except Exception:
        con.close()
        raise
    return con


def _migrate(con: duckdb.DuckDBPyConnection) -> None:
    """Bring an older store up to ``SCHEMA_VERSION`` (each step only adds; nothing is rewritten)."""
    row = con.execute("SELECT value FROM nel_meta WHERE key = 'schema_version'").fetchone()
    version = int(row[0]) if row else 1
    if version < 2:
        con.execute("ALTER TABLE steps ADD COLUMN IF NOT EXISTS scores JSON")
    if version < 3:
        con.execute("ALTER TABLE steps ADD COLUMN IF NOT EXISTS turns JSON")
    if version < SCHEMA_VERSION:
        con.execute("UPDATE nel_meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION)])


def connect_ro(path: Path) -> duckdb.DuckDBPyConnection:
    """Open an existing store read-only."""
    con = _connect(path, read_only=True)
    try:
        check_version(con, path)
    except Exception:
        con.close()
        raise
    return con


def attach_ro(con: duckdb.DuckDBPyConnection, path: Path, alias: str) -> None:
    """Attach an existing store read-only under ``alias``, waiting out a writer's lock."""
    deadline = time.monotonic() + _LOCK_WAIT_S
    delay = 0.01
    while True:
        try:
            con.execute(f"ATTACH '{_sql_str(str(path))}' AS {alias} (READ_ONLY)")
            break
        except duckdb.Error as exc:
            if _is_lock_error(exc) and time.monotonic() < deadline:
                time.sleep(delay)
                delay = min(delay * 2, 0.25)
                continue
            raise UsageError(f"{path}: not a nel store ({_first_line(exc)})") from None
    check_version(con, path, schema=alias)


def _sql_str(value: str) -> str:
    return value.replace("'", "''")
