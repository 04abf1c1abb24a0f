"""Ingest: move live segments into the DuckDB tables (``nel eval merge``).

Idempotent by construction: every table has a natural key and rows are
inserted with ``INSERT OR IGNORE``, so merging twice, or merging a segment
that a crash left behind after it was already ingested, changes nothing.
Metrics are never stored; the views recompute them from the steps.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from workbench.errors import RunFailed, UsageError
from workbench.store.columns import RUN_COLUMNS, SHARD_COLUMNS, STEP_COLUMNS, journal_read_sql, sql_string
from workbench.store.database import MERGE_MEMORY_LIMIT, connect_rw
from workbench.store.images import insert_images
from workbench.store.live import FINAL_SHARD_STATUSES, LiveShard, LiveState, run_row, scan


@dataclass(slots=True)
class IngestReport:
    runs: dict[str, str] = field(default_factory=dict)  # run_id -> status after ingest
    steps_added: int = 0
    shards_ingested: int = 0
    missing_shards: dict[str, list[int]] = field(default_factory=dict)


def _files_sql(paths: list[Path]) -> str:
    return "[" + ", ".join(sql_string(p) for p in paths) + "]"


_NO_STEPS = "SELECT " + ", ".join(f"CAST(NULL AS {kind}) AS {name}" for name, kind in STEP_COLUMNS.items()) + \
    " WHERE false"
"""Every step column, typed, and no row: joined BY NAME onto segments written by an older nel (before a
column such as ``turns`` existed), it gives them the missing columns as NULL."""


def segments_sql(segments: list[Path]) -> str:
    """The steps of Parquet ``segments`` in the current column layout, whichever nel wrote them."""
    cols = ", ".join(STEP_COLUMNS)
    return (f"SELECT {cols} FROM (SELECT * FROM read_parquet({_files_sql(segments)}, union_by_name = true) "
            f"UNION ALL BY NAME {_NO_STEPS})")


def live_steps_sql(segments: list[Path], journals: list[Path], *, deduplicate: bool = True) -> str | None:
    """One SELECT over segment and journal files, deduplicated on the step key (``deduplicate=False``: as they
    are, for files ``duplicate_steps_sql`` found none in)."""
    parts = []
    cols = ", ".join(STEP_COLUMNS)
    if segments:
        parts.append(segments_sql(segments))
    if journals:
        parts.append(journal_read_sql(_files_sql(journals)))
    if not parts:
        return None
    union = " UNION ALL ".join(parts)
    if not deduplicate:
        return f"SELECT {cols} FROM ({union})"
    return f"SELECT {cols} FROM ({union}) QUALIFY row_number() OVER ({LATEST_ATTEMPT_FIRST}) = 1"


def duplicate_steps_sql(segments: list[Path], journals: list[Path]) -> str | None:
    """Whether the files hold a step key twice (a journal rolled twice around a crash, a retried attempt): one
    boolean, read from the key columns alone, far cheaper than deduplicating whole rows that have no duplicate."""
    steps = live_steps_sql(segments, journals, deduplicate=False)
    if steps is None:
        return None
    return f"SELECT count(*) > count(DISTINCT (run_id, task_idx, repeat)) FROM ({steps})"


LATEST_ATTEMPT_FIRST = "PARTITION BY run_id, task_idx, repeat ORDER BY coalesce(attempt, 0) DESC, started_at"
"""The order that makes one row of a step key: its latest attempt (a ``--retry-errors`` retry supersedes the
errored attempt), and of identical copies (a journal rolled twice around a crash) the first."""

_NOW_UTC = "timezone('UTC', now())"  # naive UTC, as every timestamp of the store
_SAME_KEY = "s.run_id = n.run_id AND s.task_idx = n.task_idx AND s.repeat = n.repeat"


def _insert_new_steps(select: str | None) -> str:
    return f"INSERT INTO steps SELECT * FROM ({select}) AS n WHERE NOT EXISTS (SELECT 1 FROM steps s WHERE {_SAME_KEY})"


def _supersede(con: duckdb.DuckDBPyConnection, select: str) -> None:
    """Move the stored steps that ``select`` holds a later attempt of into ``superseded_steps``."""
    newer = "coalesce(n.attempt, 0) > coalesce(s.attempt, 0)"
    con.execute(f"INSERT INTO superseded_steps BY NAME SELECT s.*, {_NOW_UTC} AS superseded_at FROM steps s "
                f"JOIN ({select}) n ON {_SAME_KEY} WHERE {newer}")
    con.execute(f"DELETE FROM steps s USING ({select}) n WHERE {_SAME_KEY} AND {newer}")


TASK_FILE_COLUMNS = (("run_id", "VARCHAR"), ("task_idx", "INTEGER"), ("task_id", "VARCHAR"), ("benchmark", "VARCHAR"),
                     ("prompt", "VARCHAR"), ("expected_answer", "VARCHAR"), ("metadata", "VARCHAR"))
"""The columns of a shard's ``tasks.jsonl``, in order, as ``live_tasks_sql`` reads them."""


def live_tasks_sql(files: list[Path]) -> str:
    columns = ", ".join(f"'{name}': '{kind}'" for name, kind in TASK_FILE_COLUMNS)
    return (
        f"SELECT * FROM read_json({_files_sql(files)}, format = 'newline_delimited', columns = "
        f"{{{columns}}}, ignore_errors = true) "
        "WHERE task_id IS NOT NULL"  # a line a full disk cut short is not a task
    )


def _insert_rows(con: duckdb.DuckDBPyConnection, table: str, columns: tuple[str, ...], rows: list[dict]) -> None:
    if not rows:
        return
    placeholders = ", ".join("?" for _ in columns)
    con.executemany(
        f"INSERT OR REPLACE INTO {table} ({', '.join(columns)}) VALUES ({placeholders})",
        [[row[c] for c in columns] for row in rows],
    )


IMPORT_MEMORY_LIMIT = "128MB"
"""The budget of an importer's ingest (``nel import``), which copies one shard of a few thousand steps at a time
while the importer itself holds ~130 MB: under it a 100,000-document lm-eval import peaks at ~245 MB of RSS where
the merge's 512 MB let it reach ~385 MB, at the same speed (tests/perf/bench_import_lmeval.py; 96 MB: ~220 MB; the
lean 64 MB cannot checkpoint the tasks of a 100,000-task run)."""


def ingest(store: Path, sources: list[Path] | None = None, *, bulk: bool = False,
           memory_limit: str | None = None, before_removing: Callable[[], object] | None = None) -> IngestReport:
    """Ingest the live segments of ``store`` (and of other ``sources`` stores) into ``store``.

    The segments are listed only once the write lock is held, and finished shards are
    deleted before it is released, so two ingests racing on the same shards never read
    files the other removed. A running shard may roll a journal into a segment while
    it is read; that attempt is rolled back and made again on a fresh listing.

    ``bulk``: a merge that runs on its own copies shards with two threads and
    ``MERGE_MEMORY_LIMIT``; the engine's end-of-run ingest, beside a finished run, stays lean.
    ``memory_limit`` replaces a bulk ingest's budget (an importer's: ``IMPORT_MEMORY_LIMIT``), for every
    connection it opens, the final one too. ``before_removing`` is called once the rows are committed, before the
    finished shards' files go (still under the lock): a reader of those files (``store.background``) holds them
    until it has read them.
    """
    if memory_limit is not None and not bulk:
        raise ValueError("ingest: memory_limit is the budget of a bulk ingest (bulk=True)")
    budget: dict[str, Any] = {"memory_limit": memory_limit or merge_memory(), "threads": 2} if bulk else {}
    done, added, con = _ingest_segments_in_batches(store, sources, budget)
    con = con or connect_rw(store, **budget)  # a bulk merge keeps its budget to the end (the tasks table too)
    try:
        for attempt in range(_VANISHED_RETRIES):
            try:
                report = _ingest_locked(con, store, sources, done, before_removing)
                report.steps_added += added
                return report
            except duckdb.Error as exc:
                if not vanished_file_error(exc) or attempt == _VANISHED_RETRIES - 1:
                    raise RunFailed(f"{store}: merge failed: {str(exc).splitlines()[0]}") from None
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")
    finally:
        con.close()


def merge_memory() -> str:
    """The merge's DuckDB memory budget: ``$NEL_MERGE_MEMORY`` (checked) or ``MERGE_MEMORY_LIMIT``."""
    value = os.environ.get("NEL_MERGE_MEMORY", "").strip()
    if not value:
        return MERGE_MEMORY_LIMIT
    if not re.fullmatch(r"\d+(\.\d+)?\s*(KB|MB|GB|KiB|MiB|GiB)", value, flags=re.IGNORECASE):
        raise UsageError(f"NEL_MERGE_MEMORY: expected a size such as 512MB or 2GB, got {value!r}")
    return value


_VANISHED_RETRIES = 5
# DuckDB's working memory while writing grows with the table and is returned only when the
# connection closes, so each shard's segments are inserted on a fresh connection.


def _snapshot(store: Path, sources: list[Path] | None) -> LiveState:
    states = [scan(store)] + [scan(src) for src in (sources or []) if src != store]
    return LiveState([s for st in states for s in st.shards])


def _insert_steps_from(con: duckdb.DuckDBPyConnection, select: str | None) -> int:
    """Insert the steps of ``select`` whose key is not stored yet; a retried attempt first moves the attempt
    it supersedes into ``superseded_steps``, all in one transaction."""
    if select is None:
        return 0
    retried = con.execute(f"SELECT coalesce(max(attempt), 0) > 0 FROM ({select})").fetchone()
    if not (retried and retried[0]):
        row = con.execute(_insert_new_steps(select)).fetchone()
        return int(row[0]) if row else 0
    con.execute("BEGIN TRANSACTION")
    try:
        _supersede(con, select)
        row = con.execute(_insert_new_steps(select)).fetchone()
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return int(row[0]) if row else 0


def _ingest_segments_in_batches(store: Path, sources: list[Path] | None, budget: dict[str, Any]
                                ) -> tuple[set[Path], int, duckdb.DuckDBPyConnection | None]:
    """Insert the steps of every Parquet segment present now; return those done, the rows added and, for the
    ingest of a single shard, the connection it used, still open (opening the file again would cost as much as
    the copy itself; its budget is the final connection's).

    A shard none of whose steps are in the store yet (the common case: a merge after the shards
    finished) is copied in whole, in one transaction, with no anti-join against the growing steps
    table: that join, once per segment, made merging quadratic (2 x 100,000 steps took 18 s). Its
    own duplicates (a journal rolled twice around a crash) are removed on the key columns alone
    before the commit. A shard with steps in already (an earlier merge of a running shard) goes
    segment by segment, skipping the steps present."""
    done: set[Path] = set()
    added = 0
    shards = [shard for shard in _snapshot(store, sources).shards if shard.segments]
    keep = len(shards) == 1  # its budget is the final connection's too (a bulk one keeps the merge's)
    for shard in shards:
        con = connect_rw(store, **budget)
        try:
            if _shard_has_steps(con, shard):
                added += _insert_segments_skipping_present(con, store, shard.segments, done)
            else:
                added += _copy_fresh_shard(con, store, shard, done)
        except BaseException:
            con.close()
            raise
        if keep:
            return done, added, con
        con.close()
    return done, added, None


_SEGMENTS_PER_STATEMENT = 64


def _shard_has_steps(con: duckdb.DuckDBPyConnection, shard: LiveShard) -> bool:
    row = con.execute(
        "SELECT count(*) FROM (SELECT 1 FROM steps WHERE run_id = ? AND task_idx >= ? AND task_idx < ? LIMIT 1)",
        [shard.run["run_id"], shard.shard["problem_start"], shard.shard["problem_end"]],
    ).fetchone()
    return bool(row and row[0])


def _copy_fresh_shard(con: duckdb.DuckDBPyConnection, store: Path, shard: LiveShard, done: set[Path]) -> int:
    key = [shard.run["run_id"], shard.shard["problem_start"], shard.shard["problem_end"]]
    con.execute("BEGIN TRANSACTION")
    try:
        for start in range(0, len(shard.segments), _SEGMENTS_PER_STATEMENT):
            batch = shard.segments[start : start + _SEGMENTS_PER_STATEMENT]
            con.execute(f"INSERT INTO steps {segments_sql(batch)}")
        _keep_latest_attempts(con, key)
        row = con.execute(
            "SELECT count(*) FROM steps WHERE run_id = ? AND task_idx >= ? AND task_idx < ?", key
        ).fetchone()
        con.execute("COMMIT")
    except duckdb.Error as exc:
        con.execute("ROLLBACK")
        if vanished_file_error(exc):  # another ingest took these segments: their rows are in
            return 0
        raise RunFailed(f"{store}: merge failed: {str(exc).splitlines()[0]}") from None
    done.update(shard.segments)
    return int(row[0]) if row else 0


def _keep_latest_attempts(con: duckdb.DuckDBPyConnection, key: list[Any]) -> None:
    """One row per step key in a shard copied in whole: copies of one attempt (a journal rolled twice around a
    crash) go; an attempt a retry superseded moves to ``superseded_steps`` (once, however many copies)."""
    ranked = (
        "SELECT rowid AS rid, row_number() OVER (PARTITION BY task_idx, repeat ORDER BY coalesce(attempt, 0) DESC, "
        "started_at) AS n, row_number() OVER (PARTITION BY task_idx, repeat, coalesce(attempt, 0) ORDER BY "
        "started_at) AS copy, coalesce(attempt, 0) < max(coalesce(attempt, 0)) OVER (PARTITION BY task_idx, "
        "repeat) AS superseded FROM steps WHERE run_id = ? AND task_idx >= ? AND task_idx < ?"
    )
    retried = con.execute(
        "SELECT coalesce(max(attempt), 0) > 0 FROM steps WHERE run_id = ? AND task_idx >= ? AND task_idx < ?", key
    ).fetchone()
    if retried and retried[0]:
        con.execute(
            f"INSERT INTO superseded_steps BY NAME SELECT *, {_NOW_UTC} AS superseded_at FROM steps WHERE rowid "
            f"IN (SELECT rid FROM ({ranked}) WHERE superseded AND copy = 1)", key,
        )
    con.execute(f"DELETE FROM steps WHERE rowid IN (SELECT rid FROM ({ranked}) WHERE n > 1)", key)


def _insert_segments_skipping_present(
    con: duckdb.DuckDBPyConnection, store: Path, segments: list[Path], done: set[Path]
) -> int:
    added = 0
    for path in segments:
        try:
            added += _insert_steps_from(con, live_steps_sql([path], []))
        except duckdb.Error as exc:
            if not vanished_file_error(exc):  # another ingest removed it: its rows are in
                raise RunFailed(f"{store}: merge failed: {str(exc).splitlines()[0]}") from None
        done.add(path)
    return added


def vanished_file_error(exc: Exception) -> bool:
    """True when a query failed because a live file was rolled or removed under it."""
    text = str(exc).lower()
    return any(v in text for v in ("no such file", "no files found", "cannot open file", "could not open"))


def _ingest_locked(
    con: duckdb.DuckDBPyConnection, store: Path, sources: list[Path] | None, done: set[Path],
    before_removing: Callable[[], object] | None = None,
) -> IngestReport:
    state = _snapshot(store, sources)
    report = IngestReport()
    segments, journals = state.step_files()
    headers = state.run_headers()
    by_run: dict[str, list[LiveShard]] = defaultdict(list)
    for shard in state.shards:
        by_run[shard.run["run_id"]].append(shard)
    # Steps first, one segment (or journal) per statement and per transaction: memory stays
    # bounded by a segment, not by the run (uncommitted rows are held in memory). A crash
    # part-way leaves the segments in place, and the next ingest skips what is in already.
    for path in segments:
        if path not in done:
            report.steps_added += _insert_steps_from(con, live_steps_sql([path], []))
    for path in journals:
        report.steps_added += _insert_steps_from(con, live_steps_sql([], [path]))
    con.execute("BEGIN TRANSACTION")
    try:
        _insert_rows(con, "run_shards", SHARD_COLUMNS, [s.shard_row() for s in state.shards])
        insert_images(con, [s.dir.path for s in state.shards])  # before the shards' files go, below
        task_files = state.task_files()
        if task_files:
            tasks = live_tasks_sql(task_files)
            con.execute(
                "INSERT OR IGNORE INTO tasks SELECT task_id, any_value(benchmark), any_value(prompt), "
                f"any_value(expected_answer), any_value(metadata) FROM ({tasks}) GROUP BY task_id"
            )
            con.execute(
                "INSERT OR IGNORE INTO run_tasks SELECT DISTINCT run_id, task_idx, task_id "
                f"FROM ({tasks})"
            )
        # the runs ingested now only: counting every run's steps made each run's end as slow as the store is big
        ingested = sorted({s.run["run_id"] for s in state.shards})
        con.execute(
            "UPDATE run_shards SET n_steps = c.n FROM (SELECT run_id, shard_idx, count(*) AS n FROM steps "
            "WHERE list_contains(?, run_id) GROUP BY ALL) c "
            "WHERE run_shards.run_id = c.run_id AND run_shards.shard_idx = c.shard_idx", [ingested]
        )
        rows = []
        for run_id, header in headers.items():
            known = dict(
                con.execute("SELECT shard_idx, status FROM run_shards WHERE run_id = ?", [run_id]).fetchall()
            )
            row = run_row(header, by_run[run_id], known)
            rows.append(row)
            report.runs[run_id] = row["status"]
            missing = sorted(set(range(int(header["total_shards"]))) - set(known))
            if missing:
                report.missing_shards[run_id] = missing
        _insert_rows(con, "runs", RUN_COLUMNS, rows)
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
    if before_removing is not None:
        before_removing()
    for shard in state.shards:
        # Only a shard that will write no more is removed, and while the lock is held; a
        # running one keeps its files (its rows are in, and ingesting them again is a no-op).
        if shard.status in FINAL_SHARD_STATUSES:
            shutil.rmtree(shard.dir.path, ignore_errors=True)
            report.shards_ingested += 1
            run_dir = shard.dir.path.parent
            if run_dir.is_dir() and not any(run_dir.iterdir()):
                run_dir.rmdir()
    return report

