"""Several writers into one store at once, and readers polling it: two unsharded runs, a run of two shard workers
(merged at its end), a background run, a `nel sql` loop and a reader loop with range filters. Every writer exits 0
with its artifacts, and no reader ever errs (a live journal once crashed the export of every other run)."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from nel_helpers import NEL, clean_env, eval_args, nel, wait_for

from workbench.mock import MockHandle, mock_model
from workbench.store import open_store

pytestmark = pytest.mark.timeout(240)
ROUNDS = 2  # tests/chaos/chaos_store.py runs five


@pytest.fixture(scope="module")
def paced_mock() -> Iterator[MockHandle]:
    """5 ms an answer: the runs overlap for a few seconds."""
    with mock_model(latency_ms=5) as handle:
        yield handle


def _readers(store: Path, stop: threading.Event, errors: list[str], reads: list[int]) -> list[threading.Thread]:
    def sql_loop() -> None:
        while not stop.is_set():
            if not store.exists() and not store.with_name(store.name + ".segments").exists():
                time.sleep(0.05)
                continue
            proc = subprocess.run([NEL, "sql", "SELECT run_id, count(*) FROM steps WHERE task_idx BETWEEN 3 AND 40 "
                                   "GROUP BY ALL", "--store", str(store), "--format", "json"],
                                  capture_output=True, text=True, timeout=60, env=clean_env())
            if proc.returncode != 0:
                errors.append(f"nel sql: {proc.stderr.strip()}")
            reads.append(1)

    def store_loop() -> None:
        while not stop.is_set():
            if not store.exists() and not store.with_name(store.name + ".segments").exists():
                time.sleep(0.05)
                continue
            try:
                s = open_store(store)
                s.rows("SELECT task_idx, repeat, response FROM steps WHERE task_idx >= 2 AND task_idx <= 30")
                s.rows("SELECT * FROM run_metrics")
            except Exception as exc:
                errors.append(f"open_store: {type(exc).__name__}: {exc}")
            reads.append(1)

    return [threading.Thread(target=f, daemon=True) for f in (sql_loop, store_loop)]


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_four_writers_and_two_readers_share_one_store(paced_mock, tmp_path, round_):
    out = tmp_path / "out"
    store = out / "nel.duckdb"
    url = paced_mock.base_url

    def run(*extra: str, bench: str = "gsm8k") -> subprocess.Popen[str]:
        args = eval_args(url, problems=60, repeats=4, output_dir=out, concurrency=8)
        args[args.index("-b") + 1] = bench
        return subprocess.Popen([NEL, *args, *extra], cwd=tmp_path, env=clean_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    stop, errors, reads = threading.Event(), list[str](), list[int]()
    readers = _readers(store, stop, errors, reads)
    for reader in readers:
        reader.start()
    try:
        writers = {
            "unsharded gsm8k": run(),
            "unsharded unit_conversion_mc": run(bench="unit_conversion_mc"),
            "two shard workers": run("--shards", "2", bench="element_symbols_qa"),
            "background": run("--background", "--run-id", f"bg-{round_}", "--temperature", "0.3"),
        }
        outcomes = {name: (p.wait(120), *p.communicate()) for name, p in writers.items()}
        finished = wait_for(lambda: _launch_status(store, f"bg-{round_}", tmp_path) in ("complete", "failed"), 90)
    finally:
        stop.set()
        for reader in readers:
            reader.join(timeout=90)
    for name, (code, stdout, stderr) in outcomes.items():
        assert code == 0, f"{name} exited {code}\n{stdout}\n{stderr}"
    assert finished and _launch_status(store, f"bg-{round_}", tmp_path) == "complete"
    runs = open_store(store).rows("SELECT run_id, status, n_tasks * n_repeats FROM runs ORDER BY run_id")
    assert len(runs) == 4 and {status for _, status, _ in runs} == {"complete"}, runs
    for run_id, _, expected in runs:
        folder = out / "runs" / run_id
        bundle = orjson.loads((folder / f"eval-{run_id}.json").read_bytes())
        assert bundle["n_steps"] == expected, run_id
        assert sum(1 for _ in (folder / "results.jsonl").open()) == expected, run_id
    assert not errors, errors[:3]
    assert len(reads) > 4, "the readers read while the writers wrote"


def _launch_status(store: Path, run_id: str, cwd: Path) -> str | None:
    proc = nel("eval", "status", run_id, "--store", str(store), "--format", "json", cwd=cwd)
    if proc.returncode != 0:
        return None
    launches = orjson.loads(proc.stdout)["launches"]
    return str(launches[0]["status"]) if launches else None
