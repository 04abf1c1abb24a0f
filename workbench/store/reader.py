"""Reading a store: the database plus whatever live runs are still writing.

``Store.connect()`` gives an in-memory DuckDB connection where ``steps``,
``runs``, ``tasks``, ``run_tasks`` and ``run_shards`` are views over the
database file (attached read-only) and the live segments, and the views of
``store/views.sql`` sit on top. So ``nel sql``, the TUI and notebooks see a run
while it is written, never a half-written step (journal lines cut short are
skipped) and never a lock error (the file is attached only for the query).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from workbench.errors import UsageError
from workbench.resources import sql_path
from workbench.store.columns import RUN_COLUMNS, SHARD_COLUMNS
from workbench.store.database import READER_MEMORY_LIMIT, attach_ro, limit_memory
from workbench.store.ingest import live_steps_sql, live_tasks_sql, vanished_file_error
from workbench.store.layout import resolve_store_path, segments_root
from workbench.store.live import LiveShard, LiveState, run_row, scan


class Store:
    """A read-only handle on a store; every call opens and closes its own connection."""

    def __init__(self, path: str | Path) -> None:
        self.path = resolve_store_path(path)
        if not self.path.exists() and not segments_root(self.path).is_dir():
            raise UsageError(f"{self.path}: no store here (no such file)")
        if self.path.exists() and self.path.is_dir():
            raise UsageError(f"{self.path}: not a nel store (a directory without nel.duckdb)")

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """An in-memory connection with the store's tables and views, live runs included."""
        for attempt in range(8):
            con = duckdb.connect()
            limit_memory(con, READER_MEMORY_LIMIT)
            try:
                self._build(con, scan(self.path))
            except duckdb.Error as exc:
                con.close()
                if vanished_file_error(exc) and attempt < 7:
                    time.sleep(0.02 * (attempt + 1))  # a journal was rolled into a segment meanwhile
                    continue
                raise
            break
        try:
            yield con
        finally:
            con.close()

    def _build(self, con: duckdb.DuckDBPyConnection, live: LiveState) -> None:
        if self.path.exists():
            attach_ro(con, self.path, "db")
        else:
            con.execute("ATTACH ':memory:' AS db")
            con.execute("USE db")
            con.execute(sql_path("schema.sql").read_text())
            con.execute("USE memory")
        if live.empty:
            for table in ("runs", "run_shards", "tasks", "run_tasks", "steps"):
                con.execute(f"CREATE VIEW {table} AS SELECT * FROM db.{table}")
        else:
            self._live_views(con, live)
        con.execute(sql_path("views.sql").read_text())

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
            con.execute("CREATE VIEW steps AS SELECT * FROM db.steps")
        else:
            # A view, not a copy: a running run may be large. If the writer rolls a journal away
            # mid-query, ``Store.sql`` retries on a fresh snapshot.
            con.execute(
                f"CREATE VIEW steps AS SELECT * FROM db.steps UNION ALL SELECT * FROM ({steps}) l "
                "WHERE NOT EXISTS (SELECT 1 FROM db.steps s WHERE s.run_id = l.run_id "
                "AND s.task_idx = l.task_idx AND s.repeat = l.repeat)"
            )

    # ---- convenience readers returning polars frames -------------------------------------
    def sql(self, query: str, params: list[Any] | None = None) -> Any:
        """Run ``query`` and return a polars DataFrame (live runs included)."""
        for attempt in range(8):
            try:
                with self.connect() as con:
                    return con.execute(query, params or []).pl()
            except duckdb.Error as exc:
                if not vanished_file_error(exc) or attempt == 7:
                    raise
                time.sleep(0.02 * (attempt + 1))
        raise AssertionError("unreachable")

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
        with self.connect() as con:
            cur = con.execute("SELECT * FROM runs WHERE run_id = ?", [run_id])
            row = cur.fetchone()
            if row is None:
                raise UsageError(f"{self.path}: no run {run_id!r} in this store")
            return dict(zip([d[0] for d in cur.description], row, strict=True))


def _insert(con: duckdb.DuckDBPyConnection, table: str, columns: tuple[str, ...], rows: list[dict]) -> None:
    if rows:
        con.executemany(
            f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})",
            [[r[c] for c in columns] for r in rows],
        )


def open_store(path: str | Path) -> Store:
    """Open the store at ``path`` (its DuckDB file, or the directory holding ``nel.duckdb``)."""
    return Store(path)
