"""The cache's DuckDB file, shared by every run (and by concurrent runs) that names it.

DuckDB lets one process hold a file open for writing. So no process keeps it open: a run reads the entries of its
scope (model, endpoint, protocol) in one query when its first request arrives, answers hits from memory, and
appends what it learnt in batches, each a short connection (waiting, with backoff, while another run holds the
file). ``INSERT OR IGNORE`` on the key makes two runs learning the same answer harmless. What a run learnt after its
last batch is lost if it is killed: a cache, not a record (the steps are in the store either way).
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import duckdb

from workbench.errors import UsageError

log = logging.getLogger(__name__)
LOCK_WAIT_S = 60.0
FLUSH_EVERY = 2_000
"""Entries learnt before a batch is written (the rest at the end of the run)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS cache_entries (
    key VARCHAR PRIMARY KEY,
    scope VARCHAR NOT NULL,
    response VARCHAR NOT NULL,
    created_at DOUBLE NOT NULL
)"""


def _is_lock_error(exc: Exception) -> bool:
    text = str(exc).lower()
    return "lock" in text and ("conflicting" in text or "could not set" in text)


def _connect(path: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
    deadline = time.monotonic() + LOCK_WAIT_S
    delay = 0.005
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.Error as exc:
            if not _is_lock_error(exc):
                raise UsageError(f"{path}: not a nel cache ({str(exc).strip().splitlines()[0][:200]})") from None
            if time.monotonic() >= deadline:
                raise UsageError(f"{path}: the cache stayed locked by another process for {LOCK_WAIT_S:.0f} s") \
                    from None
            time.sleep(delay)
            delay = min(delay * 2, 0.1)


class CacheFile:
    """One cache file in this process: the scopes read so far, and the entries waiting to be written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: dict[str, str] = {}
        self._scopes: dict[str, int] = {}  # scope read -> its entries in the file then
        self._pending: list[tuple[str, str, str, float]] = []
        self._lock = threading.Lock()

    def load(self, scope: str) -> int:
        """Read every entry of ``scope`` (once per process): later lookups are dictionary reads. How many the
        file held."""
        with self._lock:
            if scope in self._scopes:
                return self._scopes[scope]
            if not self.path.exists():
                self._scopes[scope] = 0
                return 0
            con = _connect(self.path, read_only=True)
            try:
                if not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'cache_entries'"
                                   ).fetchone() == (1,):
                    raise UsageError(f"{self.path}: a DuckDB file but not a nel cache (no cache_entries table)")
                rows: list[tuple[str, str]] = con.execute(
                    "SELECT key, response FROM cache_entries WHERE scope = ?", [scope]).fetchall()
            finally:
                con.close()
            self._entries.update(rows)
            self._scopes[scope] = len(rows)
            return len(rows)

    def get(self, key: str) -> str | None:
        return self._entries.get(key)

    def put(self, scope: str, key: str, response: str) -> bool:
        """Remember an answer; True when a batch is due (``flush``)."""
        if key in self._entries:
            return False
        self._entries[key] = response
        self._pending.append((key, scope, response, time.time()))
        return len(self._pending) >= FLUSH_EVERY

    def take(self) -> list[tuple[str, str, str, float]]:
        """The waiting entries, handed over for ``write`` (on the event loop's thread, where ``put`` runs: the list
        is never touched by two threads)."""
        batch, self._pending = self._pending, []
        return batch

    def flush(self) -> int:
        """Write every waiting entry now; how many."""
        return self.write(self.take())

    def write(self, batch: list[tuple[str, str, str, float]]) -> int:
        """Append ``batch`` to the file (from a worker thread, or at the end; one writer at a time)."""
        if not batch:
            return 0
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            con = _connect(self.path, read_only=False)
            try:
                con.execute(_SCHEMA)
                # One Arrow table, one statement: executemany costs milliseconds a row. (Imported here: a run the
                # cache answers in full writes nothing and need not load pyarrow.)
                import pyarrow as pa

                columns = list(zip(*batch, strict=True))
                con.register("batch", pa.table({"key": columns[0], "scope": columns[1], "response": columns[2],
                                                 "created_at": columns[3]}))
                con.execute("INSERT OR IGNORE INTO cache_entries SELECT key, scope, response, created_at FROM batch")
            finally:
                con.close()
            return len(batch)


_FILES: dict[Path, CacheFile] = {}


def cache_file(path: Path) -> CacheFile:
    """This process's one ``CacheFile`` for ``path`` (a solver's and a judge's cache on one file share it)."""
    key = path.resolve()
    if key not in _FILES:
        _FILES[key] = CacheFile(key)
    return _FILES[key]
