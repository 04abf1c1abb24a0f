"""Opening the DuckDB file: schema, version checks and lock waits.

DuckDB lets one process write a file, or many read it, at a time. Nothing in
the workbench holds the file open for long (writers append segments; ingest and
readers open it briefly), so a lock conflict is waited out rather than shown.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import hashlib
import os
import time
import uuid
from pathlib import Path

import duckdb

from workbench.errors import RunFailed, UsageError, path_error
from workbench.resources import sql_path
from workbench.store.duckdb_api import STORAGE_COMPATIBILITY
from workbench.store.live import pid_alive

SCHEMA_VERSION = 5
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


_SCHEMA_TABLES = frozenset({"nel_meta", "runs", "run_shards", "tasks", "run_tasks", "steps"})


class IncompleteStore(UsageError):
    """A store file whose creation an older nel did not finish; ``connect_rw`` completes it."""


def check_version(con: duckdb.DuckDBPyConnection, path: Path, schema: str = "main") -> None:
    """Refuse a DuckDB file that is not a store, or one written by a newer schema; an ``IncompleteStore``
    for one whose creation an older nel did not finish (``connect_rw`` completes it, losing nothing)."""
    database = "current_database()" if schema == "main" else f"'{schema}'"
    tables = {r[0] for r in con.execute(
        f"SELECT table_name FROM duckdb_tables() WHERE database_name = {database}").fetchall()}
    if not tables >= _SCHEMA_TABLES:
        prefix = "" if schema == "main" else f"{schema}."
        if tables <= _SCHEMA_TABLES and all(
            con.execute(f"SELECT count(*) FROM {prefix}{t}").fetchone() == (0,) for t in tables - {"nel_meta"}
        ):
            raise IncompleteStore(f"{path}: an incomplete store (its creation was interrupted; it lacks "
                                  f"{', '.join(sorted(_SCHEMA_TABLES - tables))})")
        if "nel_meta" not in tables:
            raise UsageError(f"{path}: a DuckDB database but not a nel store (it has no nel_meta table)")
        raise UsageError(f"{path}: a damaged nel store (it lacks {', '.join(sorted(_SCHEMA_TABLES - tables))})")
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
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise path_error(path.parent, exc, "create the store's directory") from None
    if not path.exists():
        create_store(path)
    con = _connect(path, read_only=False)
    try:
        limit_memory(con, memory_limit, threads=threads)
        with contextlib.suppress(IncompleteStore):  # only the store's own tables, all empty: made below
            check_version(con, path)
        if not _up_to_date(con):
            _apply_schema(con)
    except Exception:
        con.close()
        raise
    return con


def _apply_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Tables, migrations and views in one transaction: all or nothing, and a third faster than one each."""
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(sql_path("schema.sql").read_text())
        _migrate(con)
        views = sql_path("views.sql").read_text()
        con.execute(views)
        con.execute("INSERT OR REPLACE INTO nel_meta VALUES ('views_sha256', ?)", [_sha256(views)])
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def _up_to_date(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the file already has this nel's schema and views: applying them again costs ~50 ms a connection,
    and a merge or a run's end opens several."""
    try:
        meta = dict(con.execute("SELECT key, value FROM nel_meta WHERE key IN "
                                "('schema_version', 'views_sha256')").fetchall())
    except duckdb.Error:
        return False
    return meta.get("schema_version") == str(SCHEMA_VERSION) and meta.get("views_sha256") == _views_sha256()


@functools.cache
def _views_sha256() -> str:
    return _sha256(sql_path("views.sql").read_text())


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


_CREATING = ".creating-"


def create_store(path: Path) -> None:
    """Create the store file at ``path`` all at once: it is built and checkpointed under a temporary name,
    then linked into place. A process killed at any moment leaves either no store or a complete one (and at
    worst a temporary file, removed by the next creation) — never a file that lacks ``nel_meta`` or
    ``steps`` and that no later command would open. Another process creating it meanwhile wins the race."""
    _remove_stale_temporaries(path)
    tmp = path.with_name(f".{path.name}{_CREATING}{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        con = duckdb.connect(str(tmp), config={"storage_compatibility_version": STORAGE_COMPATIBILITY})
        try:
            limit_memory(con)
            _apply_schema(con)
            con.execute("CHECKPOINT")
        finally:
            con.close()
        _fsync(tmp)
        try:
            os.link(tmp, path)  # atomic, and never replaces a store another process has just created
        except FileExistsError:
            pass
        except OSError:  # a filesystem without hard links: rename (the race above is then last-wins)
            if not path.exists():
                os.replace(tmp, path)
        _fsync(path.parent)
    except OSError as exc:
        raise path_error(path, exc, "create the store") from None
    except duckdb.Error as exc:  # DuckDB's own I/O errors (a full disk while it writes the file)
        raise RunFailed(f"{path}: cannot create the store ({_first_line(exc)})") from None
    finally:
        for leftover in (tmp, tmp.with_name(tmp.name + ".wal")):
            leftover.unlink(missing_ok=True)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_stale_temporaries(path: Path) -> None:
    """Temporary files of creations whose process is gone (killed mid-creation)."""
    for tmp in path.parent.glob(f".{glob.escape(path.name)}{_CREATING}*"):
        pid_text = tmp.name.split(_CREATING, 1)[1].split("-", 1)[0]
        if pid_text.isdigit() and not pid_alive(int(pid_text)):
            tmp.unlink(missing_ok=True)


def _migrate(con: duckdb.DuckDBPyConnection) -> None:
    """Bring an older store up to ``SCHEMA_VERSION`` (each step only adds; nothing is rewritten)."""
    row = con.execute("SELECT value FROM nel_meta WHERE key = 'schema_version'").fetchone()
    version = int(row[0]) if row else 1
    if version < 2:
        con.execute("ALTER TABLE steps ADD COLUMN IF NOT EXISTS scores JSON")
    if version < 3:
        con.execute("ALTER TABLE steps ADD COLUMN IF NOT EXISTS turns JSON")
    if version < 4:
        con.execute("ALTER TABLE steps ADD COLUMN IF NOT EXISTS attempt INTEGER")
        # schema.sql made superseded_steps from this store's steps as they were: give it the columns added since
        for name, kind in con.execute(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = current_database() "
            "AND table_name = 'steps' AND column_name NOT IN (SELECT column_name FROM duckdb_columns() "
            "WHERE database_name = current_database() AND table_name = 'superseded_steps') ORDER BY column_index"
        ).fetchall():
            con.execute(f"ALTER TABLE superseded_steps ADD COLUMN {name} {kind}")
    # version 5 only adds the images table, which schema.sql has just created
    if version < SCHEMA_VERSION:
        con.execute("UPDATE nel_meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION)])


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


def store_facts(path: Path) -> tuple[int, int]:
    """An existing store's schema version and number of stored runs, read beside any writer (its lock waited
    out); a file that is not a store, or a newer nel's, raises the reader's one line."""
    con = duckdb.connect()
    try:
        attach_ro(con, path, "db")
        row = con.execute("SELECT value FROM db.nel_meta WHERE key = 'schema_version'").fetchone()
        runs = con.execute("SELECT count(*) FROM db.runs").fetchone()
    finally:
        con.close()
    return (int(row[0]) if row else 0), (int(runs[0]) if runs else 0)


def probe_store(path: Path) -> None:
    """Raise the one line a reader would for a file that is not a store, or is a newer nel's, without building a
    reader's views (a run checks its store this way before its first step: a third of the cost)."""
    con = duckdb.connect()
    try:
        attach_ro(con, path, "db")
    except IncompleteStore:
        pass  # the run's ingest completes it, as any writer does
    finally:
        con.close()


def _sql_str(value: str) -> str:
    return value.replace("'", "''")
