"""Reading a store: the database plus whatever live runs are still writing.

``Store.connect()`` gives an in-memory DuckDB connection where ``steps``,
``runs``, ``tasks``, ``run_tasks`` and ``run_shards`` are views over the
database file (attached read-only) and the live segments, and the views of
``store/views.sql`` sit on top. So ``nel sql``, the TUI and notebooks see a run
while it is written, never a half-written step (journal lines cut short are
skipped) and never a lock error (the file is attached only for the query).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import duckdb

from workbench.errors import UsageError
from workbench.resources import sql_path

if TYPE_CHECKING:  # numpy is imported by the reads that need it: a run's start does not wait for it
    import numpy as np

from workbench.store.columns import RUN_COLUMNS, SHARD_COLUMNS, STEP_COLUMNS
from workbench.store.database import (
    READER_JSON_MEMORY_LIMIT,
    READER_MEMORY_LIMIT,
    IncompleteStore,
    attach_ro,
    connect_rw,
    limit_memory,
)
from workbench.store.duckdb_api import polars_frame, release
from workbench.store.ingest import (
    TASK_FILE_COLUMNS,
    duplicate_steps_sql,
    live_steps_sql,
    live_tasks_sql,
    vanished_file_error,
)
from workbench.store.layout import resolve_store_path, segments_root
from workbench.store.live import LiveShard, LiveState, run_row, scan

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RunOutcomes:
    """Aggregates of one run's steps, the inputs of ``workbench.analysis.summarize``."""

    attempts: np.ndarray
    passes: np.ndarray
    errors: np.ndarray
    """Per task, aligned with ``attempts``: attempts that reached no verdict (``is_error_category``)."""
    latency_ms: np.ndarray
    failures: dict[str, int]
    tokens: dict[str, int]


# DuckDB 1.5 (seen on 1.5.6) fails with "INTERNAL Error: Failed to cast expression to type - expression type
# mismatch" in its TopN-window optimiser (TopNWindowElimination::ExtractOptimizerParameters, via
# NotNullExpressionAnalyzer) when a range filter on a window's partition column meets a
# ``row_number() ... = 1`` filter over ``read_json`` with an explicit column map. The live ``steps`` view is
# exactly that shape (journals are deduplicated on the step key), so ``WHERE task_idx BETWEEN ...`` over a
# store with any live run crashed the export and user queries alike. Minimal repro, reported upstream-style:
#
#     import duckdb
#     open("/tmp/j.jsonl", "w").write('{"k": 1, "v": 1.0}\n')
#     duckdb.sql("SELECT * FROM (SELECT * FROM read_json('/tmp/j.jsonl', columns = {'k': 'INTEGER', "
#                "'v': 'DOUBLE'}) QUALIFY row_number() OVER (PARTITION BY k ORDER BY v) = 1) "
#                "WHERE k BETWEEN 0 AND 5")            # INTERNAL Error (also with k >= 0 AND k <= 5)
#
# The same query over read_parquet, over a table, with one bound only, with two ORDER BY keys (as the live view
# now has: latest attempt first, then the earliest copy), or with the optimiser disabled works. Reader connections
# turn that one optimiser off all the same, so no query of that shape (``nel sql``, a notebook) can hit it: it only
# rewrites row_number() filters into a top-N, which our views do not need for speed (tests/perf/bench_export.py).
# DuckDB 2.0 runs the repro correctly; a DuckDB that no longer knows the optimiser's name rejects the setting
# (a parser error), and its connections simply keep every optimiser.
_READER_SETTINGS = "SET disabled_optimizers = 'top_n_window_elimination'"


class Store:
    """A read-only handle on a store; every call opens and closes its own connection.

    ``runs`` scopes the live part of the store to those runs: a reader of one finished run (an export)
    then never touches another run's journals, which a live writer may roll away at any moment.

    ``files_only`` (with ``runs``) reads those runs' shard files alone, never the database file, and holds their
    steps in memory from the moment a connection is made: what a run's own summary and export read while an ingest
    in this process writes the file (``store.background``). Only for runs whose every step is in their files."""

    def __init__(self, path: str | Path, *, runs: Iterable[str] | None = None, files_only: bool = False) -> None:
        self._local = threading.local()  # a pinned connection is its thread's: a DuckDB connection serves one call
        self._runs = None if runs is None else frozenset(runs)
        if files_only and self._runs is None:
            raise ValueError("Store: files_only reads the files of the runs named by runs=")
        self._files_only = files_only
        self.path = resolve_store_path(path)
        if not self.path.exists() and not segments_root(self.path).is_dir():
            raise UsageError(f"{self.path}: no store here (no such file)")
        if self.path.exists() and self.path.is_dir():
            raise UsageError(f"{self.path}: not a nel store (a directory without nel.duckdb)")

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    def scoped(self, runs: Iterable[str]) -> Store:
        """This store with its live part limited to ``runs`` (the database part is read whole)."""
        return Store(self.path, runs=runs)

    @staticmethod
    def _fresh_connection(memory_limit: str, threads: int | None = None) -> duckdb.DuckDBPyConnection:
        con = duckdb.connect()
        with suppress(duckdb.ParserException):
            con.execute(_READER_SETTINGS)
        limit_memory(con, memory_limit, threads)
        return con

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """An in-memory connection with the store's tables and views, live runs included."""
        for attempt in range(8):
            live = scan(self.path, self._runs)
            con = self._fresh_connection(READER_MEMORY_LIMIT if live.empty else READER_JSON_MEMORY_LIMIT,
                                         threads=1 if self._files_only else None)
            try:
                self._base(con)
                self._views(con, live)
            except duckdb.Error as exc:
                con.close()
                if vanished_file_error(exc) and attempt < 7:
                    time.sleep(0.02 * (attempt + 1))  # a journal was rolled into a segment meanwhile
                    continue
                raise
            break
        release(con)  # DuckDB 2: a set-up query left unfinished would keep ``con.sql`` and ``register`` from it
        try:
            yield con
        finally:
            con.close()

    def _base(self, con: duckdb.DuckDBPyConnection) -> None:
        """The database part: the file attached read-only as ``db`` (for files only, or no file yet, an empty one in
        memory) and the views that give its tables the current layout."""
        if self.path.exists() and not self._files_only:
            try:
                attach_ro(con, self.path, "db")
            except IncompleteStore:  # left by an older nel killed while creating it: complete it, once
                con.execute("DETACH db")
                connect_rw(self.path).close()
                attach_ro(con, self.path, "db")
        else:
            con.execute("ATTACH ':memory:' AS db")
            con.execute("USE db")
            con.execute(sql_path("schema.sql").read_text())
            con.execute("USE memory")
        self._db_steps(con)
        self._superseded(con)
        self._images(con)

    @staticmethod
    def _file_tables(con: duckdb.DuckDBPyConnection) -> None:
        """Files only: the empty tables the runs' files are read into, and every view over them."""
        con.execute("CREATE TEMP TABLE live_steps AS SELECT * FROM db_steps LIMIT 0")
        con.execute("CREATE TEMP TABLE live_shards AS SELECT * FROM db.run_shards LIMIT 0")
        con.execute("CREATE TEMP TABLE live_runs AS SELECT * FROM db.runs LIMIT 0")
        con.execute("CREATE TEMP TABLE live_tasks (" + ", ".join(f"{name} {kind}" for name, kind in TASK_FILE_COLUMNS)
                    + ")")
        con.execute("CREATE VIEW runs AS SELECT * FROM live_runs")
        con.execute("CREATE VIEW run_shards AS SELECT * FROM live_shards")
        con.execute(  # the names and types of db.tasks (none there: the database part is empty)
            "CREATE VIEW tasks AS SELECT * FROM db.tasks UNION ALL SELECT task_id, any_value(benchmark), "
            "any_value(prompt), any_value(expected_answer), CAST(any_value(metadata) AS JSON) FROM live_tasks "
            "GROUP BY task_id"
        )
        con.execute("CREATE VIEW run_tasks AS SELECT * FROM db.run_tasks UNION ALL "
                    "SELECT DISTINCT run_id, task_idx, task_id FROM live_tasks")
        con.execute("CREATE VIEW steps AS SELECT * FROM live_steps")
        con.execute(sql_path("views.sql").read_text())

    @staticmethod
    def _read_files(con: duckdb.DuckDBPyConnection, live: LiveState) -> None:
        """Files only: read the runs' files into the tables ``_file_tables`` made (a snapshot: the files may go
        once the connection is made). Rows are deduplicated on the step key only when the files hold one twice."""
        _insert(con, "live_shards", SHARD_COLUMNS, [s.shard_row() for s in live.shards])
        by_run: dict[str, list[LiveShard]] = {}
        for shard in live.shards:
            by_run.setdefault(shard.run["run_id"], []).append(shard)
        _insert(con, "live_runs", RUN_COLUMNS,
                [run_row(header, by_run[run_id], {}) for run_id, header in live.run_headers().items()])
        if task_files := live.task_files():
            con.execute(f"INSERT INTO live_tasks {live_tasks_sql(task_files)}")
        duplicates = duplicate_steps_sql(*live.step_files())
        if duplicates is None:
            return
        twice = con.execute(duplicates).fetchone()
        steps = live_steps_sql(*live.step_files(), deduplicate=not (twice and not twice[0]))
        con.execute(f"INSERT INTO live_steps {steps}")

    def _views(self, con: duckdb.DuckDBPyConnection, live: LiveState) -> None:
        """The store's tables as a reader sees them (the database's, with the live runs' files over them), and the
        views every query builds on."""
        if self._files_only:
            self._file_tables(con)
            self._read_files(con, live)
            return
        if live.empty:
            for table in ("runs", "run_shards", "tasks", "run_tasks"):
                con.execute(f"CREATE VIEW {table} AS SELECT * FROM db.{table}")
            con.execute("CREATE VIEW steps AS SELECT * FROM db_steps")
        else:
            self._live_views(con, live)
        con.execute(sql_path("views.sql").read_text())

    @staticmethod
    def _superseded(con: duckdb.DuckDBPyConnection) -> None:
        """``superseded_steps``: attempts a ``--retry-errors`` retry replaced (none in a store older than that)."""
        have = con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = 'db' "
                           "AND table_name = 'superseded_steps'").fetchone()
        if have and have[0]:
            con.execute("CREATE VIEW superseded_steps AS SELECT * FROM db.superseded_steps")
        else:
            con.execute("CREATE VIEW superseded_steps AS SELECT *, CAST(NULL AS TIMESTAMP) AS superseded_at "
                        "FROM db_steps WHERE false")

    @staticmethod
    def _images(con: duckdb.DuckDBPyConnection) -> None:
        """``images``: each image prompts carried, by hash (none in a store older than schema version 5)."""
        have = con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = 'db' "
                           "AND table_name = 'images'").fetchone()
        con.execute("CREATE VIEW images AS SELECT * FROM db.images" if have and have[0] else
                    "CREATE VIEW images AS SELECT CAST(NULL AS VARCHAR) AS sha256, CAST(NULL AS VARCHAR) AS mime, "
                    "CAST(NULL AS BIGINT) AS n_bytes, CAST(NULL AS INTEGER) AS width, CAST(NULL AS INTEGER) AS height, "
                    "CAST(NULL AS BLOB) AS data WHERE false")

    @staticmethod
    def _db_steps(con: duckdb.DuckDBPyConnection) -> None:
        """``db_steps``: the file's steps in the current column layout (an older file, read-only here,
        lacks the columns later schema versions added; they read as NULL)."""
        have = {r[0] for r in con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE database_name = 'db' AND table_name = 'steps'"
        ).fetchall()}
        select = ", ".join(name if name in have else f"CAST(NULL AS {kind}) AS {name}"
                           for name, kind in STEP_COLUMNS.items())
        con.execute(f"CREATE TEMP VIEW db_steps AS SELECT {select} FROM db.steps")

    def _live_views(self, con: duckdb.DuckDBPyConnection, live: LiveState) -> None:
        by_run: dict[str, list[LiveShard]] = {}
        for shard in live.shards:
            by_run.setdefault(shard.run["run_id"], []).append(shard)
        con.execute("CREATE TEMP TABLE live_shards AS SELECT * FROM db.run_shards LIMIT 0")
        con.execute("CREATE TEMP TABLE live_runs AS SELECT * FROM db.runs LIMIT 0")
        shard_rows = [s.shard_row() for s in live.shards]
        _insert(con, "live_shards", SHARD_COLUMNS, shard_rows)
        run_rows = []
        for run_id, header in live.run_headers().items():
            known = dict(
                con.execute("SELECT shard_idx, status FROM db.run_shards WHERE run_id = ?", [run_id]).fetchall()
            )
            run_rows.append(run_row(header, by_run[run_id], known))
        _insert(con, "live_runs", RUN_COLUMNS, run_rows)
        con.execute(
            "CREATE VIEW runs AS SELECT * FROM db.runs WHERE run_id NOT IN (SELECT run_id FROM live_runs) "
            "UNION ALL SELECT * FROM live_runs"
        )
        con.execute(
            "CREATE VIEW run_shards AS SELECT * FROM db.run_shards s WHERE NOT EXISTS (SELECT 1 FROM live_shards l "
            "WHERE l.run_id = s.run_id AND l.shard_idx = s.shard_idx) UNION ALL SELECT * FROM live_shards"
        )
        task_files = live.task_files()
        if task_files:
            tasks = live_tasks_sql(task_files)
            con.execute(f"CREATE TEMP TABLE live_tasks AS {tasks}")
            con.execute(
                "CREATE VIEW tasks AS SELECT * FROM db.tasks UNION ALL "
                "SELECT task_id, any_value(benchmark), any_value(prompt), any_value(expected_answer), "
                "CAST(any_value(metadata) AS JSON) FROM live_tasks "
                "WHERE task_id NOT IN (SELECT task_id FROM db.tasks) GROUP BY task_id"
            )
            con.execute(
                "CREATE VIEW run_tasks AS SELECT * FROM db.run_tasks UNION ALL "
                "SELECT DISTINCT run_id, task_idx, task_id FROM live_tasks l WHERE NOT EXISTS "
                "(SELECT 1 FROM db.run_tasks r WHERE r.run_id = l.run_id AND r.task_idx = l.task_idx)"
            )
        else:
            con.execute("CREATE VIEW tasks AS SELECT * FROM db.tasks")
            con.execute("CREATE VIEW run_tasks AS SELECT * FROM db.run_tasks")
        steps = live_steps_sql(*live.step_files())
        if steps is None:
            con.execute("CREATE VIEW steps AS SELECT * FROM db_steps")
        else:
            # A view, not a copy: a running run may be large. If the writer rolls a journal away
            # mid-query, ``Store.sql`` retries on a fresh snapshot.
            stored = "db_steps"
            if any(shard.shard.get("retries") for shard in live.shards):
                # a live retry supersedes the stored attempt it repeats (ingest will move that one aside)
                stored = (f"(SELECT * FROM db_steps s WHERE NOT EXISTS (SELECT 1 FROM ({steps}) l WHERE "
                          "s.run_id = l.run_id AND s.task_idx = l.task_idx AND s.repeat = l.repeat "
                          "AND coalesce(l.attempt, 0) > coalesce(s.attempt, 0)))")
            con.execute(
                f"CREATE VIEW steps AS SELECT * FROM {stored} UNION ALL SELECT * FROM ({steps}) l "
                "WHERE NOT EXISTS (SELECT 1 FROM db_steps s WHERE s.run_id = l.run_id "
                "AND s.task_idx = l.task_idx AND s.repeat = l.repeat "
                "AND coalesce(s.attempt, 0) >= coalesce(l.attempt, 0))"
            )

    # ---- convenience readers returning polars frames -------------------------------------
    @property
    def _pinned(self) -> duckdb.DuckDBPyConnection | None:
        """This thread's pinned connection (another thread's calls open their own: the TUI reads from several)."""
        con: duckdb.DuckDBPyConnection | None = getattr(self._local, "con", None)
        return con

    @_pinned.setter
    def _pinned(self, con: duckdb.DuckDBPyConnection | None) -> None:
        self._local.con = con

    @contextmanager
    def pinned(self) -> Iterator[Store]:
        """This store with every call inside the block on one connection: one snapshot for several
        queries (a consistent view, and one set-up instead of one per call). For finished runs: a live
        journal rolled away mid-block is an error here rather than a retry. Inside a pinned block, the same
        connection again."""
        if self._pinned is not None:
            yield self
            return
        with self.connect() as con:
            self._pinned = con
            try:
                yield self
            finally:
                self._pinned = None

    def on_snapshot(self, work: Callable[[Store], T]) -> T:
        """``work(store)`` with every call of it on one connection (as ``pinned``), again on a fresh snapshot if
        a live file vanished meanwhile: several reads that must agree, while other runs (or other shards of this
        one) keep writing. Inside ``pinned``, on the pinned connection, once."""
        if self._pinned is not None:
            return work(self)
        for attempt in range(8):
            try:
                with self.pinned() as pinned:
                    return work(pinned)
            except duckdb.Error as exc:
                if not vanished_file_error(exc) or attempt == 7:
                    raise
                time.sleep(0.02 * (attempt + 1))
        raise AssertionError("unreachable")

    def query(self, query: str, params: list[Any] | None, fetch: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        """Run ``query`` and ``fetch`` its result, on a fresh snapshot if a live file vanished."""
        return self.on_connection(lambda con: fetch(con.execute(query, params or [])))

    def on_connection(self, work: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        """Call ``work`` with a connection on the store (several queries on one snapshot), again on a fresh
        snapshot if a live file vanished meanwhile; inside ``pinned``, on the pinned connection."""
        if self._pinned is not None:
            release(self._pinned)
            return work(self._pinned)
        return self.on_snapshot(lambda pinned: pinned.on_connection(work))

    def sql(self, query: str, params: list[Any] | None = None) -> Any:
        """Run ``query`` and return a polars DataFrame (live runs included)."""
        return self.on_connection(lambda con: polars_frame(con, query, params))

    def rows(self, query: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        """Run ``query`` and return plain tuples (no polars or pyarrow involved)."""
        return self.query(query, params, lambda cur: cur.fetchall())

    def dicts(self, query: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
        """Run ``query`` and return one dict per row (no polars or pyarrow involved)."""
        return self.query(query, params, lambda cur: [dict(zip([d[0] for d in cur.description], row, strict=True))
                                                      for row in cur.fetchall()])

    def cache_marks(self, run_id: str) -> tuple[int, int] | None:
        """Steps a ``cache`` interceptor answered (hits) and sent on (misses), from the marks each step keeps in
        its ``scoring_details``: the counts of a sharded run, whose shards each had their own cache (None: no step
        went through a cache)."""
        rows = self.rows(
            "SELECT count(*) FILTER (WHERE mark = 'hit'), count(*) FILTER (WHERE mark = 'miss') FROM "
            "(SELECT json_extract_string(scoring_details, '$.cache') AS mark FROM steps WHERE run_id = ?)", [run_id])
        hits, misses = (int(v or 0) for v in rows[0]) if rows else (0, 0)
        return (hits, misses) if hits or misses else None

    def run_outcomes(self, run_id: str, shard_idx: int | None = None) -> RunOutcomes:
        """What a run's summary is computed from, aggregated in SQL: per-task attempt and pass
        counts (in task order), every step's latency, failure counts and token totals."""
        import numpy as np

        where = "run_id = ?" + ("" if shard_idx is None else " AND shard_idx = ?")
        params: list[Any] = [run_id] if shard_idx is None else [run_id, shard_idx]
        query = f"""
            WITH s AS (SELECT * FROM steps WHERE {where})
            SELECT 'task' AS kind, task_idx::VARCHAR AS k, count(*)::DOUBLE AS a, count(*) FILTER (WHERE passed) AS b
                FROM s GROUP BY task_idx
            UNION ALL SELECT 'errors', task_idx::VARCHAR, count(*), 0 FROM s
                WHERE is_error_category(failure_category) GROUP BY task_idx
            UNION ALL SELECT 'failure', failure_category, count(*), 0 FROM s
                WHERE failure_category IS NOT NULL GROUP BY failure_category
            UNION ALL SELECT 'tokens', 'x', sum(prompt_tokens), sum(completion_tokens) FROM s
            UNION ALL SELECT 'tokens_total', 'x', sum(total_tokens), 0 FROM s
        """
        rows = self.rows(query, params)
        latency = self.query(
            f"SELECT latency_ms FROM steps WHERE {where} AND latency_ms IS NOT NULL", params,
            lambda cur: cur.fetchnumpy()["latency_ms"],
        )
        # by task index: the float sums behind each mean then add up in the same order every time
        tasks = sorted(((int(k), a, b) for kind, k, a, b in rows if kind == "task"))
        tasks_ab = [(a, b) for _, a, b in tasks]
        errors = {int(k): int(a) for kind, k, a, _ in rows if kind == "errors"}
        totals = {kind: (a, b) for kind, _, a, b in rows if kind.startswith("tokens")}
        prompt, completion = totals.get("tokens", (None, None))
        return RunOutcomes(
            attempts=np.array([a for a, _ in tasks_ab], dtype=np.int64),
            passes=np.array([b for _, b in tasks_ab], dtype=np.int64),
            errors=np.array([errors.get(idx, 0) for idx, _, _ in tasks], dtype=np.int64),
            latency_ms=np.asarray(latency, dtype=np.float64),
            failures={str(k): int(a) for kind, k, a, _ in rows if kind == "failure"},
            tokens={
                "prompt_tokens": int(prompt or 0),
                "completion_tokens": int(completion or 0),
                "total_tokens": int(totals.get("tokens_total", (0, 0))[0] or 0),
            },
        )

    def runs(self) -> Any:
        """Every run with its metrics (the ``run_metrics`` view), newest first."""
        return self.sql("SELECT * FROM run_metrics ORDER BY created_at DESC")

    def tasks(self, run_id: str) -> Any:
        """Per-task statistics of one run (the ``task_stats`` view)."""
        return self.sql("SELECT * FROM task_stats WHERE run_id = ? ORDER BY task_idx", [run_id])

    def steps(self, run_id: str | None = None) -> Any:
        """Every step, or one run's steps, ordered by task and repeat."""
        if run_id is None:
            return self.sql("SELECT * FROM steps ORDER BY run_id, task_idx, repeat")
        return self.sql("SELECT * FROM steps WHERE run_id = ? ORDER BY task_idx, repeat", [run_id])

    def run(self, run_id: str) -> dict[str, Any]:
        """The ``runs`` row of ``run_id``; a clear error when it is not in the store."""
        def read(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
            cur = con.execute("SELECT * FROM runs WHERE run_id = ?", [run_id])
            row = cur.fetchone()
            if row is None:
                raise UsageError(f"{self.path}: no run {run_id!r} in this store")
            return dict(zip([d[0] for d in cur.description], row, strict=True))

        return self.on_connection(read)  # inside ``pinned``, on its connection: no second set-up


def _insert(con: duckdb.DuckDBPyConnection, table: str, columns: tuple[str, ...], rows: list[dict]) -> None:
    if rows:
        con.executemany(
            f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})",
            [[r[c] for c in columns] for r in rows],
        )


def open_store(path: str | Path, *, runs: Iterable[str] | None = None) -> Store:
    """Open the store at ``path`` (its DuckDB file, or the directory holding ``nel.duckdb``); ``runs`` limits
    its live part to those runs (see ``Store``)."""
    return Store(path, runs=runs)
