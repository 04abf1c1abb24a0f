"""Live readers: while a run writes (journals rolled into segments, then ingested and removed), readers in
other threads and processes never fail, never see a step twice or half-written, and never see the count
go down."""

from __future__ import annotations

import asyncio
import importlib
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from nel_helpers import NEL, assert_ok, eval_args, nel, nel_popen, wait_for

from workbench.engine import run_evaluation
from workbench.environments import get_environment
from workbench.mock import MockHandle, mock_model
from workbench.model.config import ModelConfig
from workbench.solvers import SimpleSolver
from workbench.store import ShardWriter, ingest, open_store

pytestmark = pytest.mark.timeout(90)

LIVE_QUERY = (
    "SELECT count(*) AS n, count(DISTINCT (run_id, task_idx, repeat)) AS k, count(run_id) AS r FROM steps"
)


@pytest.fixture(scope="module")
def paced_mock() -> Iterator[MockHandle]:
    """A mock taking 10 ms per answer, so the run lasts long enough to be watched."""
    with mock_model(latency_ms=10) as handle:
        yield handle


def test_readers_polling_during_a_run_never_fail_and_never_go_backwards(paced_mock, tmp_path):
    # 1,040 steps: more than one journal's worth, so a journal is rolled into a segment mid-run,
    # and the final roll, ingest and clean-up all happen while the readers poll.
    problems, repeats = 260, 4
    total = problems * repeats
    store = tmp_path / "o" / "nel.duckdb"
    proc = nel_popen(
        *eval_args(
            paced_mock.base_url, problems=problems, repeats=repeats, output_dir=store.parent, concurrency=8
        ),
        cwd=tmp_path,
    )
    seen: list[tuple[int, int, int]] = []
    cli_seen: list[int] = []
    errors: list[str] = []
    stop = threading.Event()

    def poll_cli() -> None:
        while not stop.is_set():
            if not store.exists() and not store.with_name("nel.duckdb.segments").exists():
                time.sleep(0.05)
                continue
            res = subprocess.run(
                [NEL, *("sql", "SELECT count(*) AS n FROM steps", "--store", str(store), "--format", "json")],
                capture_output=True,
                text=True,
                timeout=60,
            )
            if res.returncode != 0:
                errors.append(f"nel sql exit {res.returncode}: {res.stderr.strip()}")
            else:
                cli_seen.append(orjson.loads(res.stdout)[0]["n"])

    cli = threading.Thread(target=poll_cli, daemon=True)
    cli.start()
    try:
        deadline = time.monotonic() + 60
        after_exit = 0
        while after_exit < 10 and time.monotonic() < deadline:
            if proc.poll() is not None:
                after_exit += 1
            if not store.exists() and not store.with_name("nel.duckdb.segments").exists():
                time.sleep(0.01)
                continue
            try:
                row = open_store(store).sql(LIVE_QUERY).row(0)
            except Exception as exc:
                errors.append(f"open_store: {type(exc).__name__}: {exc}")
                continue
            seen.append(row)
    finally:
        stop.set()
        cli.join(timeout=60)
        if proc.poll() is None:
            proc.kill()
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert not errors, errors[:3]
    counts = [n for n, _, _ in seen]
    assert all(n == k == r for n, k, r in seen), "a step was seen twice or with no key"
    assert counts == sorted(counts), f"the count went down: {counts}"
    assert cli_seen == sorted(cli_seen), f"nel sql saw the count go down: {cli_seen}"
    assert any(0 < n < total for n in counts), "the reader saw the run while it was being written"
    assert counts[-1] == total
    sample = counts[:: max(1, len(counts) // 20)]
    print(f"{len(seen)} reads by open_store, {len(cli_seen)} by nel sql; counts seen: {sample}")
    assert cli_seen, "nel sql ran at least once during the run"


@pytest.fixture(scope="module")
def recorded(mock: MockHandle, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    """A finished, not yet ingested run (its shard directory) and the rows the engine wrote."""
    store = tmp_path_factory.mktemp("recorded") / "nel.duckdb"
    rows: list[dict] = []
    solver = SimpleSolver(ModelConfig(url=mock.base_url, model_id="nel-mock", max_retries=0))
    asyncio.run(
        run_evaluation(
            get_environment("gsm8k"),
            solver,
            store=store,
            n_repeats=2,
            max_problems=6,
            max_concurrent=8,
            listeners=[lambda _p, row: rows.append(dict(row))],
            ingest_at_end=False,
        )
    )
    return store, rows


def _live_copy(recorded: tuple[Path, list[dict]], dest: Path, torn: bytes) -> tuple[Path, list[dict]]:
    """A store whose shard is being written: its steps in a journal whose last line is cut short."""
    src, rows = recorded
    (shard_dir,) = src.with_name("nel.duckdb.segments").glob("*/shard-*")
    run_id = rows[0]["run_id"]
    store = dest / "nel.duckdb"
    writer = ShardWriter(store, run_id, 0)
    for name in ("run.json", "shard.json", "tasks.jsonl"):
        shutil.copy(shard_dir / name, writer.dir.path / name)
    complete = rows[:-1]
    for row in complete:
        writer.append(row)
    writer.abandon()
    (journal,) = writer.dir.journals()
    with journal.open("ab") as fh:
        fh.write(torn)
    return store, complete


# Where a crash (or a reader racing the writer) can cut the last journal line.
TORN = {
    "a_quarter_of_the_line": lambda line: line[: len(line) // 4],
    "inside_the_response_text": lambda line: line[: line.index(b'"response"') + 20],
    "all_but_the_closing_brace": lambda line: line[:-2],
    "inside_the_last_field": lambda line: line[:-8],
}


@pytest.mark.parametrize("cut", sorted(TORN))
def test_a_reader_never_sees_a_half_written_step(recorded, tmp_path, cut):
    _, rows = recorded
    store, complete = _live_copy(recorded, tmp_path, TORN[cut](_written_form(rows[-1])))
    steps = open_store(store).steps()
    assert steps.height == len(complete)
    assert steps["run_id"].null_count() == 0 and steps["task_idx"].null_count() == 0
    keys = {(r["task_idx"], r["repeat"]) for r in complete}
    assert set(zip(steps["task_idx"], steps["repeat"], strict=True)) == keys

    proc = nel(
        "sql",
        "SELECT count(*) AS n FROM steps WHERE run_id IS NOT NULL",
        "--store",
        str(store),
        "--format",
        "json",
        cwd=tmp_path,
    )
    assert_ok(proc)
    assert orjson.loads(proc.stdout) == [{"n": len(complete)}]


def _written_form(row: dict) -> bytes:
    """The journal line ``ShardWriter.append`` writes for ``row`` (via a scratch writer)."""
    with tempfile.TemporaryDirectory() as tmp:
        writer = ShardWriter(Path(tmp) / "nel.duckdb", "scratch", 0)
        writer.append(row)
        writer.abandon()
        (journal,) = writer.dir.journals()
        return journal.read_bytes()


def test_a_torn_journal_line_is_left_out_of_a_merge(recorded, tmp_path):
    _, rows = recorded
    line = _written_form(rows[-1])
    store, complete = _live_copy(recorded, tmp_path, line[: len(line) // 2])
    report = ingest(store)
    assert report.steps_added == len(complete)
    assert open_store(store).sql("SELECT count(*) AS n FROM steps WHERE run_id IS NOT NULL")["n"][0] == len(
        complete
    )


def test_a_merge_while_a_reader_polls_never_shows_a_lock_error(recorded, tmp_path):
    src, _ = recorded
    store = tmp_path / "nel.duckdb"
    shutil.copytree(src.with_name("nel.duckdb.segments"), store.with_name("nel.duckdb.segments"))
    errors: list[str] = []
    counts: list[int] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            try:
                counts.append(int(open_store(store).sql("SELECT count(*) AS n FROM steps")["n"][0]))
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")

    reader = threading.Thread(target=poll, daemon=True)
    reader.start()
    try:
        wait_for(lambda: bool(counts or errors), timeout=30)  # the reader has read before the merge...
        proc = nel("eval", "merge", str(tmp_path), cwd=tmp_path)
        reads = len(counts) + len(errors)
        wait_for(lambda: len(counts) + len(errors) > reads, timeout=30)  # ...and reads after it
    finally:
        stop.set()
        reader.join(timeout=30)
    assert_ok(proc)
    assert not errors, errors[:3]
    assert counts and set(counts) == {12}


def test_an_ingest_racing_another_ingest_of_the_same_shards_succeeds(mock, tmp_path, monkeypatch):
    ingest_module = importlib.import_module(
        "workbench.store.ingest"
    )  # the package exports a function by this name
    store = tmp_path / "nel.duckdb"
    solver = SimpleSolver(ModelConfig(url=mock.base_url, model_id="nel-mock", max_retries=0))
    for _ in range(2):  # two runs into one store, both finished, neither ingested yet
        asyncio.run(
            run_evaluation(
                get_environment("gsm8k"),
                solver,
                store=store,
                n_repeats=2,
                max_problems=5,
                max_concurrent=8,
                ingest_at_end=False,
            )
        )
    real_connect = ingest_module.connect_rw

    def connect_after_another_process_merged(path: Path):  # what waiting for the lock looks like
        assert_ok(nel("eval", "merge", str(tmp_path), cwd=tmp_path))
        return real_connect(path)

    monkeypatch.setattr(ingest_module, "connect_rw", connect_after_another_process_merged)
    report = ingest(store)
    assert report.steps_added == 0
    runs = open_store(store).sql("SELECT status, count(*) AS n FROM run_metrics GROUP BY ALL")
    assert runs.rows() == [("complete", 2)]
