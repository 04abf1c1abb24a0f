"""The shard writer: every completed step reaches the disk as it completes.

A step is appended to the shard's journal with one ``write`` as soon as it is
verified, so a ``kill -9`` of the process loses no completed step (the page
cache outlives the process). Every ``roll_every`` steps the journal is closed
and converted, on a background thread, into an immutable Parquet segment
(written under a temporary name, then renamed): readers see either the journal
or the segment, and duplicates from a crash between the two are removed by
the step key.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import duckdb
import orjson

from workbench.secrets import redact_bytes, redact_text, redact_value, secret_needles
from workbench.store.columns import JOURNAL_SENTINEL, journal_read_sql, sql_string
from workbench.store.database import MEMORY_LIMIT, limit_memory
from workbench.store.images import ImageSink
from workbench.store.layout import ShardDir, shard_dir
from workbench.store.live import read_json_object
from workbench.types import RunStatus

_JOURNAL_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` so a reader sees the old file or the new one, never half of one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))
    os.replace(tmp, path)


def roll_connection() -> duckdb.DuckDBPyConnection:
    """An in-memory connection to roll journals with (one thread, the roller's small memory budget)."""
    con = duckdb.connect()
    try:
        limit_memory(con, MEMORY_LIMIT, threads=1)
    except BaseException:
        con.close()
        raise
    return con


def roll_journal(journal: Path, segment: Path, con: duckdb.DuckDBPyConnection | None = None) -> bool:
    """Convert a closed journal into a Parquet segment, then delete the journal; on ``con`` (a
    ``roll_connection``) when given, else on a connection of its own.

    Returns False, leaving the journal as it was, when the conversion fails: a journal is
    a complete record in itself (readers and ingest read journals too), so a failed roll
    costs speed, never a step.
    """
    tmp = segment.with_name(f".{segment.name}.tmp")
    own = con is None
    try:
        if con is None:
            con = roll_connection()
        query = journal_read_sql(sql_string(journal))
        con.execute(f"COPY ({query}) TO {sql_string(tmp)} (FORMAT parquet, COMPRESSION zstd)")
    except (duckdb.Error, OSError):
        tmp.unlink(missing_ok=True)
        return False
    finally:
        if own and con is not None:
            con.close()
    os.replace(tmp, segment)
    journal.unlink()
    return True


class ShardWriter:
    """Appends one shard's steps to its journal and rolls journals into segments."""

    def __init__(self, store: Path, run_id: str, shard_idx: int, *, roll_every: int = 1024) -> None:
        self.dir: ShardDir = shard_dir(store, run_id, shard_idx)
        self.dir.path.mkdir(parents=True, exist_ok=True)
        self.run_id = run_id
        self.shard_idx = shard_idx
        self.roll_every = roll_every
        self.n_written = 0
        self._shard_header: dict[str, Any] = {}
        self._seq = self.dir.next_seq()
        self._fd: int | None = None
        self._tasks_fd: int | None = None
        self._in_journal = 0
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nel-roll")
        self._pending: list[Future[bool]] = []
        # The roller's one connection, used and closed on the pool's one thread only: opening a DuckDB instance
        # costs as much as converting a journal (~20 ms), so the shard's rolls share one.
        self._roll_con: duckdb.DuckDBPyConnection | None = None
        self._roller_stopped = False
        self._images = ImageSink(self.dir.path)
        # Journals left by a crashed process are rolled first, so the directory stays small.
        for leftover in self.dir.journals():
            self._submit_roll(leftover)

    def begin(self, run_header: dict[str, Any], shard_header: dict[str, Any],
              tasks: Iterable[dict[str, Any]] = ()) -> None:
        """Record what the run is and what this shard covers, then the ``tasks`` given (the engine adds each
        task as it seeds it, with ``add_task``: a task is seeded once)."""
        write_json_atomic(self.dir.run_json, run_header)
        previous = read_json_object(self.dir.shard_json) or {}
        if previous.get("retries"):  # its retried steps may still be live: readers must keep preferring them
            shard_header = {**shard_header, "retries": True}
        self._shard_header = {
            **shard_header,
            "status": RunStatus.RUNNING,
            "started_at": time.time(),
            "finished_at": None,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "error": None,
        }
        write_json_atomic(self.dir.shard_json, self._shard_header)
        for task in tasks:
            self.add_task(task)

    def add_task(self, task: dict[str, Any]) -> None:
        """Record one task of the shard (one ``write``, appended: a resumed shard adds to what it had; readers
        take each task once)."""
        if self._tasks_fd is None:
            self._tasks_fd = os.open(self.dir.path / "tasks.jsonl", _JOURNAL_FLAGS, 0o644)
        os.write(self._tasks_fd, orjson.dumps(task) + b"\n")

    def _journal_path(self) -> Path:
        return self.dir.path / f"journal-{self._seq:06d}.jsonl"

    @property
    def journal_path(self) -> Path:
        """The journal the next step goes to (named in an error when it cannot be written)."""
        return self._journal_path()

    def append(self, row: Mapping[str, Any]) -> None:
        """Persist one completed step (one ``write`` call), with no secret in it.

        ``row`` is a ``Step`` (an importer's may lack the engine's own columns, ``turns`` or ``attempt``: they
        read back as NULL).

        Redaction is one test of the serialized bytes against the registered secrets (none registered:
        no test at all); only a row that holds one is redacted, in its bytes (field by field, should a
        secret's quotes or backslashes make that invalid JSON).
        """
        if self._fd is None:
            self._fd = os.open(self._journal_path(), _JOURNAL_FLAGS, 0o644)
        row = self._images.take(row)  # each inline image to images/, once; the row keeps a reference
        blob = orjson.dumps(row)
        needles = secret_needles()
        if needles and any(n in blob for n in needles):
            clean = redact_bytes(blob)
            try:
                orjson.loads(clean)
            except orjson.JSONDecodeError:
                clean = orjson.dumps(redact_value(row))
            blob = clean
        # The sentinel comes last: a line cut short by a crash lacks it and is never read.
        os.write(self._fd, blob[:-1] + JOURNAL_SENTINEL)
        self.n_written += 1
        self._in_journal += 1
        if self._in_journal >= self.roll_every:
            self.roll()

    def roll(self) -> None:
        """Close the current journal and convert it to a segment in the background."""
        if self._fd is None:
            return
        os.close(self._fd)
        self._fd = None
        journal = self._journal_path()
        self._seq += 1
        self._in_journal = 0
        self._submit_roll(journal)

    def _submit_roll(self, journal: Path) -> None:
        segment = journal.with_name(journal.name.replace("journal-", "steps-").replace(".jsonl", ".parquet"))
        self._pending.append(self._pool.submit(self._roll, journal, segment))
        self._collect(wait=False)

    def _roll(self, journal: Path, segment: Path) -> bool:
        """One roll, on the pool's thread, on the roller's connection (a fresh one after a failed roll)."""
        try:
            if self._roll_con is None:
                self._roll_con = roll_connection()
        except duckdb.Error:
            return False  # the journal stays, read as it is
        rolled = roll_journal(journal, segment, self._roll_con)
        if not rolled:
            self._close_roller()
        return rolled

    def _stop_roller(self, wait: bool) -> None:
        """No more rolls: the roller's connection closes after the last one, on its thread."""
        if not self._roller_stopped:
            self._roller_stopped = True
            self._pool.submit(self._close_roller)
        self._pool.shutdown(wait=wait)

    def _close_roller(self) -> None:
        if self._roll_con is not None:
            con, self._roll_con = self._roll_con, None
            con.close()

    def _collect(self, wait: bool) -> None:
        keep = []
        for fut in self._pending:
            if wait or fut.done():
                fut.result()  # False: the journal stays, read as it is (roll_journal)
            else:
                keep.append(fut)
        self._pending = keep

    def _close_tasks(self) -> None:
        if self._tasks_fd is not None:
            os.close(self._tasks_fd)
            self._tasks_fd = None

    def finish(self, status: str, error: str | None = None) -> None:
        """Roll what is left, wait for segments to land, and record the shard's final status (a ``RunStatus``)."""
        self._close_tasks()
        self.roll()
        self._stop_roller(wait=True)
        self._collect(wait=True)
        self._shard_header.update(status=status, finished_at=time.time(), n_steps=self.n_written,
                                  error=None if error is None else redact_text(error))
        write_json_atomic(self.dir.shard_json, self._shard_header)

    def abandon(self) -> None:
        """Close files without rolling (used when the process is going down hard)."""
        self._close_tasks()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._stop_roller(wait=False)
