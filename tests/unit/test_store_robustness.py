"""The store under the conditions that broke it: reads over live journals with range filters (a DuckDB
optimiser bug), a finished run exported while another run is live, a store whose creation was cut short,
and attempts that a retry supersedes."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import duckdb
import orjson
import pytest
from factories import open_shard, run_header, step_row

from workbench.errors import UsageError
from workbench.export.artifacts import export_run
from workbench.store import ShardWriter, ingest, open_store
from workbench.store.database import connect_rw, create_store


def header(run_id: str, n_tasks: int = 4, total_shards: int = 1) -> dict:
    return run_header(run_id, n_tasks=n_tasks, total_shards=total_shards)


def step(run_id: str, idx: int, rep: int, *, category: str | None = None, attempt: int | None = None,
         started_at: float | None = None) -> dict:
    return step_row(run_id, idx, rep, started_at=started_at or time.time(), reward=0.0 if category else 1.0,
                    passed=category is None, failure_category=category, error="HTTP 500" if category else None,
                    latency_ms=1.0, attempt=attempt)


def open_writer(store, run_id: str, n_tasks: int = 4, roll_every: int = 4096) -> ShardWriter:
    return open_shard(store, header(run_id, n_tasks), roll_every=roll_every)


class TestReadsOverLiveJournals:
    """DuckDB 1.5's TopN-window optimiser crashed on a range filter over the live view's journals."""

    def test_a_range_filter_over_a_live_journal_reads(self, tmp_path):
        store = tmp_path / "nel.duckdb"
        w = open_writer(store, "live")
        for idx in range(4):
            w.append(step("live", idx, 0))
        s = open_store(store)
        assert s.rows("SELECT count(*) FROM steps WHERE task_idx BETWEEN 1 AND 2") == [(2,)]
        assert s.rows("SELECT count(*) FROM steps WHERE task_idx >= 1 AND task_idx <= 3") == [(3,)]
        w.finish("complete")

    def test_reader_connections_survive_duckdbs_minimal_repro(self, tmp_path):
        journal = tmp_path / "j.jsonl"
        journal.write_text('{"k": 1, "v": 1.0}\n')
        shape = (f"SELECT * FROM (SELECT * FROM read_json('{journal}', columns = {{'k': 'INTEGER', 'v': 'DOUBLE'}}) "
                 "QUALIFY row_number() OVER (PARTITION BY k ORDER BY v) = 1) WHERE k BETWEEN 0 AND 5")
        store = tmp_path / "nel.duckdb"
        create_store(store)
        with open_store(store).connect() as con:
            con.execute("SET memory_limit = '256MB'")  # read_json's buffer: a store with no live run reads none
            assert con.execute(shape).fetchall() == [(1, 1.0)]

    def test_a_finished_run_exports_while_another_run_is_live(self, tmp_path):
        store = tmp_path / "nel.duckdb"
        done = open_writer(store, "done")
        for idx in range(4):
            done.append(step("done", idx, 0))
        done.finish("complete")
        ingest(store)
        live = open_writer(store, "live")
        live.append(step("live", 0, 0))  # a journal of another run, which its writer may roll away at any moment
        result = export_run(store, "done", tmp_path / "out")
        assert result.n_results == 4
        assert orjson.loads(result.bundle.read_bytes())["n_steps"] == 4
        live.finish("complete")

    def test_a_scoped_store_reads_no_other_runs_live_files(self, tmp_path):
        store = tmp_path / "nel.duckdb"
        w = open_writer(store, "mine")
        w.append(step("mine", 0, 0))
        other = open_writer(store, "other")
        other.append(step("other", 0, 0))
        other.journal_path.write_bytes(b"\x00not json")  # unreadable: a scoped reader never opens it
        assert open_store(store, runs=["mine"]).rows("SELECT run_id, count(*) FROM steps GROUP BY ALL") == [
            ("mine", 1)]
        w.finish("complete")


    def test_several_reads_on_one_snapshot_start_again_when_a_live_file_is_rolled_away(self, tmp_path):
        store = tmp_path / "nel.duckdb"
        w = open_writer(store, "r")
        w.append(step("r", 0, 0))
        snapshots: list[int] = []

        def reads(s):  # the first snapshot sees the journal, which its writer rolls away before the second read
            n = s.rows("SELECT count(*) FROM steps")[0][0]
            snapshots.append(n)
            if len(snapshots) == 1:
                w.journal_path.unlink()
            return n, s.rows("SELECT count(*) FROM steps WHERE run_id = 'r'")[0][0]

        assert open_store(store).on_snapshot(reads) == (0, 0)
        assert snapshots == [1, 0]
        w.finish("complete")


class TestStoreCreation:
    """A store is either absent, or complete and openable: never a file no later command opens."""

    def test_creation_leaves_a_complete_store_and_no_temporary_file(self, tmp_path):
        store = tmp_path / "nel.duckdb"
        create_store(store)
        assert sorted(os.listdir(tmp_path)) == ["nel.duckdb"]
        assert open_store(store).rows("SELECT count(*) FROM steps") == [(0,)]

    def test_a_creation_that_loses_the_race_keeps_the_winners_store(self, tmp_path):
        store = tmp_path / "nel.duckdb"
        w = open_writer(store, "r")
        w.append(step("r", 0, 0))
        w.finish("complete")
        ingest(store)
        create_store(store)  # another process saw no file a moment ago, and created one too
        assert open_store(store).rows("SELECT count(*) FROM steps") == [(1,)]

    def test_a_killed_creations_temporary_file_is_removed_by_the_next(self, tmp_path):
        store = tmp_path / "nel.duckdb"
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        stale = tmp_path / f".nel.duckdb.creating-{dead.pid}-abcd1234"
        stale.write_bytes(b"half a database")
        create_store(store)
        assert not stale.exists()

    @pytest.mark.parametrize("made", ["no table", "nel_meta only"])
    def test_a_store_an_older_nel_left_half_created_opens_and_is_completed(self, tmp_path, made):
        store = tmp_path / "nel.duckdb"
        con = duckdb.connect(str(store))
        if made == "nel_meta only":
            con.execute("CREATE TABLE nel_meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL)")
            con.execute("INSERT INTO nel_meta VALUES ('schema_version', '3')")
        con.close()
        assert open_store(store).rows("SELECT count(*) FROM steps") == [(0,)], "a reader completes it"
        connect_rw(store).close()

    def test_a_duckdb_file_of_someone_elses_is_never_taken_over(self, tmp_path):
        other = tmp_path / "theirs.duckdb"
        con = duckdb.connect(str(other))
        con.execute("CREATE TABLE results (x INTEGER)")
        con.execute("INSERT INTO results VALUES (1)")
        con.close()
        with pytest.raises(UsageError, match="not a nel store"):
            open_store(other).rows("SELECT 1")
        with pytest.raises(UsageError, match="not a nel store"):
            connect_rw(other)

    def test_an_unwritable_store_directory_is_one_clear_error(self, tmp_path):
        blocker = tmp_path / "file"
        blocker.write_text("x")
        with pytest.raises(UsageError, match="cannot create the store's directory"):
            connect_rw(blocker / "sub" / "nel.duckdb")


class TestRetriedAttempts:
    """``--retry-errors``: the latest attempt of a step is the step; the earlier one is kept aside."""

    def test_a_retry_supersedes_the_stored_attempt_live_and_once_ingested(self, tmp_path):
        store = tmp_path / "nel.duckdb"
        w = open_writer(store, "r")
        w.append(step("r", 0, 0, category="server_error"))
        w.append(step("r", 1, 0))
        w.finish("complete")
        ingest(store)
        retry = open_shard(store, header("r"), tasks=[], retries=True)
        retry.append(step("r", 0, 0, attempt=1))
        live = open_store(store).rows("SELECT task_idx, failure_category, attempt FROM steps ORDER BY task_idx")
        assert live == [(0, None, 1), (1, None, None)], "readers see the retry at once"
        retry.finish("complete")
        ingest(store)
        s = open_store(store)
        assert s.rows("SELECT task_idx, failure_category, attempt FROM steps ORDER BY task_idx") == [
            (0, None, 1), (1, None, None)]
        assert s.rows("SELECT task_idx, failure_category, superseded_at IS NOT NULL FROM superseded_steps") == [
            (0, "server_error", True)]
        ingest(store)
        assert s.rows("SELECT count(*) FROM superseded_steps") == [(1,)], "ingesting again changes nothing"

    def test_a_shard_copied_in_whole_keeps_the_latest_attempt_and_the_earlier_once(self, tmp_path):
        store = tmp_path / "nel.duckdb"
        w = open_writer(store, "r", roll_every=1)
        first = step("r", 0, 0, category="timeout", started_at=1000.0)
        w.append(first)
        w.append(first)  # a journal rolled twice around a crash: the same attempt twice
        w.append(step("r", 0, 0, attempt=1, started_at=2000.0))
        w.append(step("r", 1, 0))
        w.finish("complete")
        ingest(store)  # the fast path: none of the shard's steps were in the store
        s = open_store(store)
        assert s.rows("SELECT task_idx, failure_category, attempt FROM steps ORDER BY task_idx") == [
            (0, None, 1), (1, None, None)]
        assert s.rows("SELECT task_idx, failure_category FROM superseded_steps") == [(0, "timeout")]


class TestLazyPlanning:
    def test_a_trillion_repeats_are_planned_lazily(self):
        from itertools import islice

        from workbench.engine.plan import RunPlan
        from workbench.engine.run import _work
        from workbench.engine.sharding import Shard
        from workbench.environments import get_environment

        env = get_environment("gsm8k")
        plan = RunPlan(run_id="r", identity={}, identity_hash="x", problem_start=0, problem_end=2, shard_start=0,
                       shard_end=2, n_repeats=10**12, shard=Shard(), created_at=0.0, done=frozenset({(0, 0)}))
        started = time.perf_counter()
        first = [(idx, rep) for idx, rep, _, _ in islice(_work(env, plan), 3)]
        assert first == [(0, 1), (0, 2), (0, 3)]
        assert time.perf_counter() - started < 1.0, "no list of a trillion repeats is built"
