"""`kill -9` while a store is first created, or while a merge is between its ingest and its export: the store is
either absent or complete and openable, no step is lost, and merging again finishes the work."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import time
from pathlib import Path

import pytest
from factories import open_shard, run_header, step_row
from nel_helpers import assert_ok, clean_env, eval_args, nel

from workbench.store import ingest, open_store

pytestmark = pytest.mark.timeout(240)

N_STEPS = 300
POINTS = int(os.environ.get("NEL_CREATION_KILLS", "30"))  # tests/chaos/chaos_store.py asks for 100


def _ingest_into(store: str, bulk: bool) -> None:
    """What a run does at its end (``bulk=False``) or ``nel eval merge`` does (``bulk=True``): create the store
    and ingest the shard into it."""
    ingest(Path(store), bulk=bulk)


def _finished_shard(store: Path) -> None:
    """A run's shard that has finished writing (rolled segments), not yet ingested: what a run leaves at its end."""
    w = open_shard(store, run_header("r", n_tasks=N_STEPS // 3, n_repeats=3), roll_every=64)
    for i in range(N_STEPS):
        w.append(step_row("r", i // 3, i % 3, reward=1.0, passed=True, response="x" * 200, latency_ms=1.0))
    w.finish("complete")


def _copy(template: Path, folder: Path) -> Path:
    shutil.copytree(template.parent, folder)
    return folder / "nel.duckdb"


def test_a_kill_anywhere_while_a_store_is_created_leaves_no_unusable_store(tmp_path):
    # Processes forked from a server that has imported the workbench (and opened no database): a kill is
    # timed from the start of the creation, not from Python's start-up, and is a real SIGKILL.
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["workbench.store", "duckdb"])
    template = tmp_path / "template" / "nel.duckdb"
    _finished_shard(template)
    spans = []
    for i in range(2):  # an uninterrupted creation and ingest, so the kills spread over all of it
        proc = ctx.Process(target=_ingest_into, args=(str(_copy(template, tmp_path / f"timing{i}")), False))
        started = time.monotonic()
        proc.start()
        proc.join()
        assert proc.exitcode == 0
        spans.append(time.monotonic() - started)
    span = min(spans)
    unusable, lost = [], []
    for k in range(POINTS):
        store = _copy(template, tmp_path / f"k{k}")
        delay = span * 1.2 * k / POINTS
        proc = ctx.Process(target=_ingest_into, args=(str(store), k % 2 == 1))
        started = time.monotonic()
        proc.start()
        time.sleep(max(0.0, started + delay - time.monotonic()))  # the kill point in the ingest's span
        proc.kill()
        proc.join()
        try:
            if store.exists():
                open_store(store).rows("SELECT count(*) FROM runs, steps")  # opens, and has its tables
            ingest(store)  # the next command finishes the work
            n = open_store(store).rows("SELECT count(*), count(DISTINCT (task_idx, repeat)) FROM steps")[0]
            if n != (N_STEPS, N_STEPS):
                lost.append((k, delay, n))
        except Exception as exc:
            unusable.append((k, round(delay * 1000, 1), f"{type(exc).__name__}: {exc}"))
    print(f"{POINTS} kills over {span * 1000:.0f} ms of creation and ingest: {len(unusable)} unusable stores, "
          f"{len(lost)} with steps lost or doubled")
    assert not unusable, unusable[:3]
    assert not lost, lost[:3]


def _sharded(mock, tmp_path: Path, shards: tuple[int, ...], total: int = 2) -> Path:
    store = tmp_path / "nel.duckdb"
    for idx in shards:
        proc = nel(*eval_args(mock.base_url, problems=20, repeats=2, store=store, output_dir=tmp_path),
                   cwd=tmp_path, env=clean_env(NEL_SHARD_IDX=str(idx), NEL_TOTAL_SHARDS=str(total)))
        assert_ok(proc)
    return store


def test_merging_an_incomplete_run_fails_and_names_the_missing_shard_every_time(mock, tmp_path):
    store = _sharded(mock, tmp_path, (0,))
    for attempt in range(3):  # a Kubernetes merge Job retries (backoffLimit); each retry must fail again
        proc = nel("eval", "merge", str(tmp_path), cwd=tmp_path)
        assert proc.returncode == 1, (attempt, proc.stdout, proc.stderr)
        assert "missing shards: 1 (of 2" in proc.stdout, (attempt, proc.stdout)
    assert open_store(store).rows("SELECT status FROM runs") == [("incomplete",)]
    assert not list((tmp_path / "runs").glob("*/eval-*.json")), "an incomplete run is not exported"


def test_a_merge_killed_before_its_export_is_finished_by_the_next_merge(mock, tmp_path):
    store = _sharded(mock, tmp_path, (0, 1))
    assert_ok(nel("eval", "merge", str(tmp_path), cwd=tmp_path))
    (run_id,) = [r[0] for r in open_store(store).rows("SELECT run_id FROM runs")]
    folder = tmp_path / "runs" / run_id
    bundle = folder / f"eval-{run_id}.json"
    assert bundle.exists()
    # What a merge killed after its ingest leaves: the steps in the store, no (or half an) export.
    bundle.unlink()
    (folder / "results.jsonl").unlink()
    again = nel("eval", "merge", str(tmp_path), cwd=tmp_path)
    assert_ok(again)
    assert "0 new steps" in again.stdout and f"export {bundle}" in again.stdout
    assert bundle.exists() and (folder / "results.jsonl").exists()
    settled = nel("eval", "merge", str(tmp_path), cwd=tmp_path)
    assert_ok(settled)
    assert "export" not in settled.stdout, "a complete, exported run is left alone"


def test_merge_run_answers_for_that_run_only(mock, tmp_path):
    _sharded(mock, tmp_path, (0,))  # an old, incomplete sharded run of the same store
    other = nel(*eval_args(mock.base_url, problems=6, repeats=1, store=tmp_path / "nel.duckdb",
                           output_dir=tmp_path, extra=["--run-id", "mine"]),
                cwd=tmp_path, env=clean_env(NEL_SHARD_IDX="0", NEL_TOTAL_SHARDS="1"))
    assert_ok(other)
    scoped = nel("eval", "merge", str(tmp_path), "--run", "mine", cwd=tmp_path)
    assert_ok(scoped)
    assert "run mine: complete" in scoped.stdout and "missing" not in scoped.stdout
    unscoped = nel("eval", "merge", str(tmp_path), cwd=tmp_path)
    assert unscoped.returncode == 1 and "missing shards: 1" in unscoped.stdout
    unknown = nel("eval", "merge", str(tmp_path), "--run", "nope", cwd=tmp_path)
    assert unknown.returncode == 2 and "no run nope" in unknown.stderr
