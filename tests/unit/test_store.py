"""The store: journals survive a crash, readers see live steps, ingest is idempotent."""

import os
import time

import duckdb
import orjson
import pytest
from factories import open_shard, run_header, step_row, task_rows

from workbench import open_store
from workbench.errors import UsageError
from workbench.resources import sql_path
from workbench.store import ShardWriter, ingest
from workbench.store.columns import STEP_COLUMNS
from workbench.store.database import SCHEMA_VERSION
from workbench.store.layout import segments_root

RUN = "r1"


def header(n_tasks=3, repeats=2, total_shards=1):
    return run_header(RUN, n_tasks=n_tasks, n_repeats=repeats, total_shards=total_shards)


def step(idx, rep, passed=True, shard=0):
    return step_row(RUN, idx, rep, shard_idx=shard, reward=1.0 if passed else 0.0, passed=passed,
                    messages=orjson.dumps([{"role": "user"}]).decode(), latency_ms=1.0, total_tokens=10)


def tasks(n):
    return task_rows(RUN, n)


def writer(store, n_tasks=3, roll_every=4096, shard=0, total=1):
    return open_shard(store, header(n_tasks, total_shards=total), shard=shard, roll_every=roll_every)


def count(store):
    return open_store(store).sql("SELECT count(*) AS n FROM steps")["n"][0]


def test_the_steps_columns_match_the_schema_contract():
    con = duckdb.connect()
    con.execute(sql_path("schema.sql").read_text())
    described = {row[0]: row[1] for row in con.execute("DESCRIBE steps").fetchall()}
    assert list(described) == list(STEP_COLUMNS)


def test_a_step_is_readable_as_soon_as_it_is_appended(tmp_path):
    store = tmp_path / "nel.duckdb"
    w = writer(store)
    w.append(step(0, 0))
    assert count(store) == 1
    runs = open_store(store).runs()
    assert runs["status"][0] == "running"
    w.finish("complete")


def test_journals_roll_into_parquet_segments_without_losing_or_doubling_steps(tmp_path):
    store = tmp_path / "nel.duckdb"
    w = writer(store, roll_every=2)
    for idx in range(3):
        for rep in range(2):
            w.append(step(idx, rep))
    w.finish("complete")
    assert len(w.dir.step_segments()) == 3
    assert not w.dir.journals()
    assert count(store) == 6


@pytest.mark.parametrize("keep", [40, 0.5, -25, -2])
def test_a_line_cut_short_by_a_crash_is_skipped_not_half_read(tmp_path, keep):
    store = tmp_path / "nel.duckdb"
    w = writer(store)
    w.append(step(0, 0))
    w.append(step(0, 1))
    w.abandon()
    journal = w.dir.journals()[0]
    lines = journal.read_bytes().splitlines(keepends=True)
    cut = int(len(lines[1]) * keep) if isinstance(keep, float) else keep
    journal.write_bytes(lines[0] + lines[1][:cut])
    frame = open_store(store).sql("SELECT task_idx, repeat, passed FROM steps")
    assert frame.rows() == [(0, 0, True)]


def test_a_killed_writer_shows_as_interrupted_and_its_journal_is_ingested(tmp_path):
    store = tmp_path / "nel.duckdb"
    w = writer(store)
    w.append(step(0, 0))
    w.abandon()
    shard = orjson.loads(w.dir.shard_json.read_bytes())
    shard["pid"] = 2**22 + 12345  # no such process
    w.dir.shard_json.write_bytes(orjson.dumps(shard))
    assert open_store(store).runs()["status"][0] == "incomplete"
    report = ingest(store)
    assert report.steps_added == 1
    assert count(store) == 1


def test_ingest_is_idempotent_and_recomputes_metrics_from_steps(tmp_path):
    store = tmp_path / "nel.duckdb"
    w = writer(store)
    for idx in range(3):
        for rep in range(2):
            w.append(step(idx, rep, passed=(idx == 0 or rep == 0)))
    w.finish("complete")
    # Keep a copy of the segments to ingest them a second time, as after a crash mid-merge.
    seg_copies = [(p, p.read_bytes()) for p in w.dir.step_segments()]
    first = ingest(store)
    assert first.steps_added == 6
    assert first.runs == {RUN: "complete"}
    assert not segments_root(store).joinpath(RUN).exists()
    w2 = writer(store)
    for path, data in seg_copies:
        path.write_bytes(data)
    w2.finish("complete")
    assert ingest(store).steps_added == 0
    metrics = open_store(store).runs()
    assert metrics["n_steps"][0] == 6
    assert metrics["pass_at_1"][0] == pytest.approx((1.0 + 0.5 + 0.5) / 3)
    buckets = open_store(store).tasks(RUN)["bucket"].to_list()
    assert buckets == ["always", "sometimes", "sometimes"]


def test_a_task_with_no_step_is_missing(tmp_path):
    store = tmp_path / "nel.duckdb"
    w = writer(store, n_tasks=3)
    w.append(step(0, 0))
    w.finish("interrupted")
    assert open_store(store).tasks(RUN)["bucket"].to_list() == ["always", "missing", "missing"]


def test_shards_of_one_run_must_share_an_identity(tmp_path):
    store = tmp_path / "nel.duckdb"
    writer(store, shard=0, total=2).finish("complete")
    other = ShardWriter(store, RUN, 1)
    bad = header(total_shards=2)
    bad["identity_hash"] = "cd" * 32
    other.begin(bad, {"shard_idx": 1, "total_shards": 2, "problem_start": 0, "problem_end": 3}, tasks(3))
    other.finish("complete")
    with pytest.raises(UsageError, match="different configuration"):
        ingest(store)


def test_a_file_that_is_not_a_store_is_refused_clearly(tmp_path):
    path = tmp_path / "notes.duckdb"
    path.write_text("hello")
    with pytest.raises(UsageError, match="not a nel store"):
        open_store(path).runs()


def test_a_duckdb_file_without_the_schema_is_refused_clearly(tmp_path):
    path = tmp_path / "other.duckdb"
    duckdb.connect(str(path)).execute("CREATE TABLE x (a INT)").close()
    with pytest.raises(UsageError, match="not a nel store"):
        open_store(path).runs()


def test_a_store_from_a_newer_schema_is_refused_clearly(tmp_path):
    store = tmp_path / "nel.duckdb"
    writer(store).finish("complete")
    ingest(store)
    con = duckdb.connect(str(store))
    con.execute("UPDATE nel_meta SET value = '99' WHERE key = 'schema_version'")
    con.close()
    with pytest.raises(UsageError, match="newer nel"):
        open_store(store).runs()


def _downgrade_to_version_1(store):
    """What a store written before steps.scores existed looks like."""
    con = duckdb.connect(str(store))
    con.execute("DROP VIEW IF EXISTS step_scores CASCADE")
    con.execute("DROP VIEW IF EXISTS run_scores")
    con.execute("DROP VIEW IF EXISTS step_tool_calls")
    con.execute("ALTER TABLE steps DROP COLUMN scores")
    con.execute("ALTER TABLE steps DROP COLUMN turns")
    con.execute("ALTER TABLE steps DROP COLUMN attempt")
    con.execute("DROP TABLE superseded_steps")
    con.execute("UPDATE nel_meta SET value = '1' WHERE key = 'schema_version'")
    con.close()


def test_a_version_1_store_reads_as_is_and_is_migrated_when_next_written(tmp_path):
    store = tmp_path / "nel.duckdb"
    w = writer(store)
    for idx in range(3):
        w.append(step(idx, 0))
    w.finish("complete")
    ingest(store)
    _downgrade_to_version_1(store)
    reader = open_store(store)
    assert reader.rows("SELECT count(*), count(scores) FROM steps") == [(3, 0)]  # read-only: no migration
    assert reader.rows("SELECT DISTINCT metric FROM step_scores") == [("reward",)]
    ingest(store)  # opening for writing migrates
    con = duckdb.connect(str(store), read_only=True)
    assert con.execute("SELECT value FROM nel_meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    columns = [r[0] for r in con.execute("DESCRIBE steps").fetchall()]
    assert {"scores", "turns", "attempt"} <= set(columns)
    superseded = [r[0] for r in con.execute("DESCRIBE superseded_steps").fetchall()]
    assert set(superseded) == {*columns, "superseded_at"}, "superseded_steps keeps every column of steps"
    con.close()


def test_per_metric_scores_read_back_one_row_per_step_and_metric(tmp_path):
    store = tmp_path / "nel.duckdb"
    w = writer(store)
    for idx in range(3):
        row = step(idx, 0, passed=idx > 0)
        row["scores"] = orjson.dumps({"exact": {"reward": row["reward"], "passed": row["passed"]},
                                      "f1": {"reward": 0.5, "passed": False, "extracted_answer": "x"}}).decode()
        w.append(row)
    w.finish("complete")
    reader = open_store(store)
    live = reader.rows("SELECT metric, count(*), sum(reward) FROM step_scores GROUP BY metric ORDER BY metric")
    ingest(store)
    stored = open_store(store).rows("SELECT metric, count(*), sum(reward) FROM step_scores GROUP BY metric ORDER BY 1")
    assert live == stored == [("exact", 3, 2.0), ("f1", 3, 1.5)]
    means = open_store(store).rows("SELECT metric, mean_reward FROM run_scores ORDER BY metric")
    assert means == [("exact", pytest.approx(2 / 3)), ("f1", 0.5)]


def test_a_missing_store_is_a_clear_error(tmp_path):
    with pytest.raises(UsageError, match="no store here"):
        open_store(tmp_path / "nope.duckdb")


def test_readers_wait_out_a_writers_lock_instead_of_failing(tmp_path):
    store = tmp_path / "nel.duckdb"
    writer(store).finish("complete")
    ingest(store)
    locked, lock_held = os.pipe()
    pid = os.fork()
    if pid == 0:  # a child holds the write lock briefly, as ingest does
        con = duckdb.connect(str(store))
        os.write(lock_held, b"x")
        time.sleep(0.5)
        con.close()
        os._exit(0)
    os.close(lock_held)
    os.read(locked, 1)  # the child holds the lock now (or has died: then the read returns at once)
    os.close(locked)
    assert open_store(store).runs().height == 1
    os.waitpid(pid, 0)


def test_ingest_across_many_segment_batches_adds_each_step_once(tmp_path):
    store = tmp_path / "nel.duckdb"
    w = writer(store, n_tasks=20, roll_every=2)
    for idx in range(20):
        for rep in range(2):
            w.append(step(idx, rep))
    w.finish("complete")
    assert len(w.dir.step_segments()) == 20  # more than one connection's batch
    assert ingest(store).steps_added == 40
    assert count(store) == 40
    assert ingest(store).steps_added == 0


def test_a_step_in_two_segments_of_a_shard_is_merged_once_keeping_the_first_attempt(tmp_path):
    """A journal rolled twice around a crash leaves one step in two segments: a fresh shard is
    copied in whole, then its duplicates go, on the key alone, before the commit."""
    store = tmp_path / "nel.duckdb"
    w = writer(store, roll_every=2)
    w.append(step(0, 0))
    w.append(step(0, 1))
    w.append(step(1, 0))
    w.append(step(1, 1))
    w.finish("complete")
    segments = w.dir.step_segments()
    assert len(segments) == 2
    con = duckdb.connect()
    con.execute("CREATE TABLE again AS SELECT * FROM read_parquet(?)", [str(segments[1])])
    con.execute("INSERT INTO again SELECT * REPLACE (started_at + INTERVAL 1 MINUTE AS started_at, 0.0 AS reward, "
                "false AS passed) FROM read_parquet(?) WHERE task_idx = 0 AND repeat = 0", [str(segments[0])])
    duplicate = segments[1].with_name("steps-999999.parquet")
    con.execute(f"COPY again TO '{duplicate}' (FORMAT parquet)")
    assert ingest(store).steps_added == 4
    rows = open_store(store).sql("SELECT task_idx, repeat, passed FROM steps ORDER BY ALL").rows()
    assert rows == [(0, 0, True), (0, 1, True), (1, 0, True), (1, 1, True)]


def test_a_shard_merged_while_running_is_completed_by_a_later_merge(tmp_path):
    store = tmp_path / "nel.duckdb"
    w = writer(store, n_tasks=4, roll_every=2)
    for idx in range(2):
        for rep in range(2):
            w.append(step(idx, rep))
    deadline = time.monotonic() + 10
    while len(w.dir.step_segments()) < 2 and time.monotonic() < deadline:  # the rolls run in the background
        time.sleep(0.01)
    assert ingest(store).steps_added == 4  # the shard is running: its files stay
    for idx in range(2, 4):
        for rep in range(2):
            w.append(step(idx, rep))
    w.finish("complete")
    report = ingest(store)
    assert report.steps_added == 4 and report.runs == {RUN: "complete"}
    assert count(store) == 8


def test_a_failed_roll_keeps_the_journal_and_loses_no_step(tmp_path, monkeypatch):
    import importlib

    writer_module = importlib.import_module("workbench.store.writer")
    monkeypatch.setattr(writer_module, "journal_read_sql", lambda files: "SELECT * FROM no_such_table")
    store = tmp_path / "nel.duckdb"
    w = writer(store, roll_every=2)
    for rep in range(2):
        w.append(step(0, rep))
    w.finish("complete")
    assert len(w.dir.journals()) == 1 and not w.dir.step_segments()
    monkeypatch.undo()
    assert count(store) == 2
    assert ingest(store).steps_added == 2


def test_a_pinned_store_answers_several_queries_from_one_snapshot(tmp_path, monkeypatch):
    store = tmp_path / "nel.duckdb"
    w = writer(store)
    w.append(step(0, 0))
    w.finish("complete")
    reader = open_store(store)
    opened = []
    connect = type(reader).connect

    def counting(self):
        opened.append(1)
        return connect(self)

    monkeypatch.setattr(type(reader), "connect", counting)
    with reader.pinned() as pinned:
        assert pinned.rows("SELECT count(*) FROM steps") == [(1,)]
        assert pinned.rows("SELECT count(*) FROM runs") == [(1,)]
    assert len(opened) == 1
    reader.rows("SELECT 1")
    assert len(opened) == 2  # outside the block, each call has its own connection again


def test_a_pinned_connection_serves_only_the_thread_that_pinned_it(tmp_path):
    """The TUI reads one Store from several worker threads: a thread's pinned block must not hand its connection
    to another thread's call (DuckDB 2 refuses a second call on a busy connection; 1.x made it wait)."""
    import threading

    store = tmp_path / "nel.duckdb"
    w = writer(store)
    w.append(step(0, 0))
    w.finish("complete")
    reader = open_store(store)
    seen: dict[str, object] = {}
    pinned_now, done = threading.Event(), threading.Event()

    def pin() -> None:
        with reader.pinned() as pinned:
            seen["a"] = pinned.on_connection(lambda con: con)
            pinned_now.set()
            done.wait(30)

    other = threading.Thread(target=pin)
    other.start()
    assert pinned_now.wait(30)
    seen["b"] = reader.on_connection(lambda con: con)  # while the other thread holds its block open
    assert reader.rows("SELECT count(*) FROM steps") == [(1,)]
    done.set()
    other.join(30)
    assert seen["a"] is not seen["b"]


def test_an_agents_tool_calls_read_back_one_row_each_in_order(tmp_path):
    store = tmp_path / "nel.duckdb"
    w = writer(store)
    turns = [
        {"turn": 1, "model": {"latency_ms": 3.0}, "text": "look", "tool_calls": [
            {"id": "c1", "name": "bash", "arguments": '{"command": "ls"}', "output": "a.txt", "truncated": False,
             "exit_code": 0, "error": None, "latency_ms": 12.5, "turn": 1}]},
        {"turn": 2, "model": {"latency_ms": 2.0}, "text": "edit", "tool_calls": [
            {"id": "c2", "name": "bash", "arguments": '{"command": "cat b"}', "output": "No such file",
             "truncated": False, "exit_code": 1, "error": None, "latency_ms": 4.0, "turn": 2},
            {"id": "c3", "name": "file_write", "arguments": "{}", "output": "error", "truncated": False,
             "exit_code": None, "error": "timeout", "latency_ms": 60000.0, "turn": 2}]},
        {"turn": 3, "model": {"latency_ms": 1.0}, "text": "done", "tool_calls": []},
    ]
    w.append(dict(step(0, 0), turns=orjson.dumps(turns).decode()))
    w.append(step(1, 0))  # a single model call: no turns, no rows
    w.finish("complete")
    for _ in range(2):  # live segments, then the ingested table
        rows = open_store(store).rows(
            "SELECT task_idx, turn, name, exit_code, error FROM step_tool_calls ORDER BY task_idx, turn, call_id")
        assert rows == [(0, 1, "bash", 0, None), (0, 2, "bash", 1, None), (0, 2, "file_write", None, "timeout")]
        ingest(store)


def test_segments_written_before_a_column_existed_merge_with_it_empty(tmp_path):
    """A shard written by an older nel (no ``turns`` column) still reads live and merges."""
    store = tmp_path / "nel.duckdb"
    w = writer(store, roll_every=2)
    for idx in range(2):
        for rep in range(2):
            w.append(step(idx, rep))
    w.finish("complete")
    for segment in w.dir.step_segments():
        con = duckdb.connect()
        con.execute(f"COPY (SELECT * EXCLUDE (turns) FROM read_parquet('{segment}')) TO '{segment}.old' "
                    "(FORMAT parquet)")
        con.close()
        os.replace(f"{segment}.old", segment)
    assert open_store(store).rows("SELECT count(*), count(turns) FROM steps") == [(4, 0)]
    assert ingest(store, bulk=True).steps_added == 4
    assert open_store(store).rows("SELECT count(*), count(turns) FROM steps") == [(4, 0)]


def test_a_merge_memory_budget_that_is_not_a_size_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("NEL_MERGE_MEMORY", "lots")
    with pytest.raises(UsageError, match="NEL_MERGE_MEMORY"):
        ingest(tmp_path / "nel.duckdb", bulk=True)


def test_an_importers_ingest_keeps_its_own_memory_budget_on_every_connection(tmp_path, monkeypatch):
    """``nel import`` ingests shard by shard under IMPORT_MEMORY_LIMIT, the final connection (tasks, runs) too: the
    merge's 512 MB let a 100,000-document import reach ~390 MB of RSS."""
    import sys

    module = sys.modules["workbench.store.ingest"]
    budgets: list[tuple[str, int]] = []
    real = module.connect_rw

    def spy(path, **budget):  # type: ignore[no-untyped-def]
        con = real(path, **budget)
        budgets.append((con.execute("SELECT current_setting('memory_limit')").fetchone()[0], budget["threads"]))
        return con

    monkeypatch.setattr(module, "connect_rw", spy)
    store = tmp_path / "nel.duckdb"
    for shard in range(2):
        w = writer(store, n_tasks=6, roll_every=2, shard=shard, total=2)
        for idx in range(3 * shard, 3 * shard + 3):
            w.append(step(idx, 0, shard=shard))
        w.finish("complete")
    assert ingest(store, bulk=True, memory_limit=module.IMPORT_MEMORY_LIMIT).steps_added == 6
    assert len(budgets) == 3 and all(b == budgets[0] for b in budgets), "each shard's copy and the final connection"
    assert budgets[0] == ("122.0 MiB", 2), "128 MB (DuckDB shows MiB), two threads"
    with pytest.raises(ValueError, match="bulk"):
        ingest(store, memory_limit="128MB")
