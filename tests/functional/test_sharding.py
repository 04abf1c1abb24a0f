"""Sharded runs: shards chosen by environment variables write side by side, `nel eval merge` ingests them,
and the merged run equals the same configuration run unsharded (the mock is deterministic per attempt)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import orjson
import polars as pl
import pytest
from nel_helpers import assert_ok, assert_one_line_error, clean_env, eval_args, nel, nel_popen, step_count

from workbench.mock import MockHandle
from workbench.store import open_store

pytestmark = pytest.mark.timeout(90)

PROBLEMS, REPEATS = 30, 3
TOTAL = PROBLEMS * REPEATS
ROWS = ["task_id", "repeat", "reward", "extracted_answer"]


def _run_shards(
    mock: MockHandle,
    cwd: Path,
    stores: Sequence[Path],
    envs: Sequence[dict[str, str]],
    extra: Sequence[str] = (),
) -> list[subprocess.CompletedProcess[str]]:
    """Run one shard per env at the same time, shard i into ``stores[i]``."""
    procs = [
        nel_popen(
            *eval_args(mock.base_url, problems=PROBLEMS, repeats=REPEATS, store=store, extra=extra),
            cwd=cwd,
            env=clean_env(**env),
        )
        for store, env in zip(stores, envs, strict=True)
    ]
    done = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return done


def _nel_env(idx: int, total: int = 2) -> dict[str, str]:
    return {"NEL_SHARD_IDX": str(idx), "NEL_TOTAL_SHARDS": str(total)}


def _rows(store: Path) -> pl.DataFrame:
    return open_store(store).steps().select(ROWS).sort(["task_id", "repeat"])


def _pass_at_1(store: Path) -> float:
    return float(open_store(store).runs()["pass_at_1"][0])


@pytest.fixture(scope="module")
def unsharded(mock: MockHandle, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference: the same configuration run in one process."""
    cwd = tmp_path_factory.mktemp("unsharded")
    store = cwd / "nel.duckdb"
    assert_ok(nel(*eval_args(mock.base_url, problems=PROBLEMS, repeats=REPEATS, store=store), cwd=cwd))
    return store


@pytest.fixture(scope="module")
def sharded(
    mock: MockHandle, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, list[subprocess.CompletedProcess[str]]]:
    """Two shards (NEL_SHARD_IDX 0 and 1 of 2) run at once into one store, not merged yet."""
    cwd = tmp_path_factory.mktemp("sharded")
    store = cwd / "nel.duckdb"
    procs = _run_shards(mock, cwd, [store, store], [_nel_env(0), _nel_env(1)])
    for proc in procs:
        assert_ok(proc)
    return store, procs


class TestShardedRun:
    """Each shard evaluates its slice and leaves it, live, for the merge."""

    def test_each_shard_reports_its_slice_and_how_to_merge(self, sharded):
        _, procs = sharded
        assert "shard 1/2" in procs[0].stderr and "problems 0..14" in procs[0].stderr
        assert "shard 2/2" in procs[1].stderr and "problems 15..29" in procs[1].stderr
        for proc in procs:
            assert "nel eval merge" in proc.stdout
            assert f"steps    {TOTAL // 2}/{TOTAL // 2}" in proc.stdout

    def test_before_the_merge_readers_see_both_shards_live(self, sharded):
        store, _ = sharded
        assert not store.exists(), "shards do not write the database file themselves"
        s = open_store(store)
        assert step_count(store) == TOTAL
        shards = s.sql(
            "SELECT shard_idx, problem_start, problem_end, status FROM run_shards ORDER BY shard_idx"
        )
        assert shards.rows() == [(0, 0, 15, "complete"), (1, 15, 30, "complete")]
        assert s.sql("SELECT status FROM runs")["status"].to_list() == ["complete"]

    def test_merge_then_equals_the_unsharded_run(self, sharded, unsharded, tmp_path):
        store, _ = sharded
        proc = nel("eval", "merge", str(store.parent), cwd=tmp_path)
        assert_ok(proc)
        assert f"{TOTAL} new steps from 2 finished shards" in proc.stdout
        assert "complete" in proc.stdout and "95% CI" in proc.stdout
        assert store.exists()
        assert not list(store.with_name("nel.duckdb.segments").rglob("*.*")), "merged segments are removed"

        steps = open_store(store).steps()
        assert steps.height == TOTAL and steps.select("task_idx", "repeat").unique().height == TOTAL
        assert steps.group_by("shard_idx").len().sort("shard_idx")["len"].to_list() == [TOTAL // 2] * 2
        assert _rows(store).equals(_rows(unsharded))
        assert _pass_at_1(store) == pytest.approx(_pass_at_1(unsharded), abs=1e-12)
        run = open_store(store).sql("SELECT status, total_shards, n_tasks FROM runs").row(0)
        assert run == ("complete", 2, PROBLEMS)

        again = nel("eval", "merge", str(store.parent), cwd=tmp_path)
        assert_ok(again)
        assert "0 new steps" in again.stdout
        assert step_count(store) == TOTAL


def test_slurm_array_variables_split_the_run_the_same_way(mock, sharded, tmp_path):
    store = tmp_path / "nel.duckdb"
    envs = [{"SLURM_ARRAY_TASK_ID": str(i), "SLURM_ARRAY_TASK_COUNT": "2"} for i in (0, 1)]
    for proc in _run_shards(mock, tmp_path, [store, store], envs):
        assert_ok(proc)
    query = "SELECT run_id, shard_idx, min(task_idx) AS lo, max(task_idx) AS hi, count(*) AS n FROM steps "
    query += "GROUP BY ALL"
    slurm = open_store(store).sql(query).sort("shard_idx")
    nel_split = open_store(sharded[0]).sql(query).sort("shard_idx")
    assert slurm.equals(nel_split), "same shards, same slices, same shared run id"


def test_merge_with_a_missing_shard_names_it_and_a_late_shard_completes_the_run(mock, unsharded, tmp_path):
    store = tmp_path / "nel.duckdb"
    (only_second,) = _run_shards(mock, tmp_path, [store], [_nel_env(1)])
    assert_ok(only_second)
    proc = nel("eval", "merge", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "missing shards: 0" in proc.stdout
    assert "Traceback" not in proc.stderr
    assert open_store(store).sql("SELECT status FROM runs")["status"].to_list() == ["incomplete"]

    (late,) = _run_shards(mock, tmp_path, [store], [_nel_env(0)])
    assert_ok(late)
    assert_ok(nel("eval", "merge", str(tmp_path), cwd=tmp_path))
    assert open_store(store).sql("SELECT status FROM runs")["status"].to_list() == ["complete"]
    assert _rows(store).equals(_rows(unsharded))


def test_shards_written_to_separate_stores_merge_into_the_first(mock, unsharded, tmp_path):
    stores = [tmp_path / "s0" / "nel.duckdb", tmp_path / "s1" / "nel.duckdb"]
    for proc in _run_shards(mock, tmp_path, stores, [_nel_env(0), _nel_env(1)]):
        assert_ok(proc)
    proc = nel("eval", "merge", str(stores[0].parent), str(stores[1].parent), cwd=tmp_path)
    assert_ok(proc)
    assert _rows(stores[0]).equals(_rows(unsharded))
    assert not list(stores[1].with_name("nel.duckdb.segments").rglob("*.*")), (
        "the source's segments are consumed"
    )


def test_an_invalid_shard_index_exits_2(mock, tmp_path):
    proc = nel(
        *eval_args(mock.base_url, problems=4, repeats=1, store=tmp_path / "s"),
        cwd=tmp_path,
        env=clean_env(NEL_SHARD_IDX="2", NEL_TOTAL_SHARDS="2"),
    )
    assert "shard index 2" in assert_one_line_error(proc, 2)


def test_the_merge_exports_a_completed_run_to_the_targets_it_is_given(mock, tmp_path):
    """`--to` on the command line, and `output.export` of the spec the shards ran (what a sharded launch's own
    merge passes): the completed run goes to inspect once, next to its artifacts."""
    store = tmp_path / "nel.duckdb"
    for proc in _run_shards(mock, tmp_path, [store, store], [_nel_env(0), _nel_env(1)]):
        assert_ok(proc)
    spec = tmp_path / "spec.json"
    spec.write_text(orjson.dumps({"services": {"m": {"url": mock.base_url, "model": "nel-mock"}},
                                  "benchmarks": [{"name": "gsm8k"}], "output": {"export": ["inspect"]}}).decode())
    proc = nel("eval", "merge", str(tmp_path), "--spec", str(spec), "--to", "inspect", cwd=tmp_path, timeout=120)
    assert_ok(proc)
    (run_id,) = open_store(store).sql("SELECT run_id FROM runs")["run_id"].to_list()
    (log,) = (tmp_path / "runs" / run_id).glob("*.eval")
    assert proc.stdout.count("inspect  ") == 1 and str(log) in proc.stdout
    from inspect_ai.log import read_eval_log

    assert read_eval_log(str(log), header_only=True).eval.config.epochs == REPEATS
    again = nel("eval", "merge", str(tmp_path), "--to", "inspect", cwd=tmp_path)
    assert_ok(again)
    assert "inspect  " not in again.stdout  # settled already: nothing exported twice


def test_a_merge_with_an_unknown_target_writes_nothing(tmp_path):
    proc = nel("eval", "merge", str(tmp_path), "--to", "neptune", cwd=tmp_path)
    assert "--to neptune: unknown export target; known: inspect, mlflow, wandb" in assert_one_line_error(proc, 2)
