"""`nel eval stats` end to end: real runs against the mock model, read from the store and from their export;
a sharded run merged with `nel eval merge` has exactly the statistics of the same run unsharded."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from nel_helpers import assert_ok, assert_one_line_error, clean_env, eval_args, nel, nel_popen

from workbench.mock import MockHandle, mock_model
from workbench.store import open_store

pytestmark = pytest.mark.timeout(120)

PROBLEMS, REPEATS = 24, 3
BENCH = "unit_conversion_mc"  # has a category per problem


def _args(url: str, store: Path, extra: list[str] | None = None) -> list[str]:
    args = eval_args(url, problems=PROBLEMS, repeats=REPEATS, store=store, output_dir=store.parent,
                     extra=extra or [])
    args[args.index("gsm8k")] = BENCH
    return args


def _run_id(store: Path) -> str:
    return str(open_store(store).runs()["run_id"][0])


def _stats(cwd: Path, source: str, *args: str) -> dict[str, Any]:
    proc = nel("eval", "stats", source, "--format", "json", *args, cwd=cwd)
    assert_ok(proc)
    return orjson.loads(proc.stdout)


def _same_run(a: dict[str, Any], b: dict[str, Any]) -> None:
    """Equal statistics, to the last bit, apart from where they were read from."""
    strip = {"run_id": None, "source": None}
    assert a | strip == b | strip


@pytest.fixture(scope="module")
def unsharded(mock: MockHandle, tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("unsharded") / "nel.duckdb"
    assert_ok(nel(*_args(mock.base_url, store), cwd=store.parent))
    return store


@pytest.fixture(scope="module")
def merged(mock: MockHandle, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same configuration in two shards run at once, then `nel eval merge`."""
    store = tmp_path_factory.mktemp("sharded") / "nel.duckdb"
    procs = [nel_popen(*_args(mock.base_url, store), cwd=store.parent,
                       env=clean_env(NEL_SHARD_IDX=str(i), NEL_TOTAL_SHARDS="2")) for i in (0, 1)]
    for proc in procs:
        out, err = proc.communicate(timeout=90)
        assert_ok(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    assert_ok(nel("eval", "merge", str(store.parent), cwd=store.parent))
    return store


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A run where a fifth of the requests fail with a 500 and nothing is retried."""
    store = tmp_path_factory.mktemp("faulty") / "nel.duckdb"
    with mock_model(latency_ms=0, fail_rate=0.2, faults="500") as handle:
        assert_ok(nel(*_args(handle.base_url, store, ["--max-retries", "0"]), cwd=store.parent))
    yield store


class TestText:
    """The default output: aligned tables with both intervals."""

    def test_shows_pass_at_k_with_analytic_and_bootstrap_intervals(self, unsharded):
        proc = nel("eval", "stats", _run_id(unsharded), "--store", str(unsharded), cwd=unsharded.parent)
        assert_ok(proc)
        header = next(line for line in proc.stdout.splitlines() if line.startswith("slice") and "metric" in line)
        assert "95% CI analytic" in header and "95% CI bootstrap" in header
        for k in range(1, REPEATS + 1):
            assert f"pass@{k}" in proc.stdout
        assert "10,000 task resamples, seed 0" in proc.stdout
        assert "twice the repeats" in proc.stdout and "twice the tasks" in proc.stdout

    def test_slices_and_clusters(self, unsharded):
        proc = nel("eval", "stats", _run_id(unsharded), "--store", str(unsharded), "--by", "category",
                   "--cluster", "category", "--bootstrap", "500", cwd=unsharded.parent)
        assert_ok(proc)
        assert "category=length" in proc.stdout
        assert "clustered by category" in proc.stdout and "500 category cluster resamples" in proc.stdout


class TestJson:
    def test_json_has_every_k_both_intervals_and_the_task_table(self, unsharded):
        d = _stats(unsharded.parent, _run_id(unsharded), "--store", str(unsharded), "--bootstrap", "1000")
        assert sorted(d["overall"]["pass_at_k"]) == ["1", "2", "3"]
        p1 = d["overall"]["pass_at_k"]["1"]
        assert p1["low"] <= p1["value"] <= p1["high"] and p1["bootstrap"]["low"] <= p1["value"]
        assert p1["value"] == pytest.approx(float(open_store(unsharded).runs()["pass_at_1"][0]), abs=1e-12)
        assert len(d["tasks"]) == PROBLEMS and {t["bucket"] for t in d["tasks"]} <= {
            "always", "sometimes", "never", "missing", "errored"}
        assert d["bootstrap"] == {"n_resamples": 1000, "seed": 0}

    def test_the_store_and_the_exported_directory_give_the_same_statistics(self, unsharded):
        run_id = _run_id(unsharded)
        export = unsharded.parent / "runs" / run_id
        assert export.is_dir(), "`nel eval run` exports the run at its end"
        args = ("--by", "category", "--bootstrap", "2000", "--seed", "3")
        from_store = _stats(unsharded.parent, run_id, "--store", str(unsharded), *args)
        from_dir = _stats(unsharded.parent, str(export), *args)
        _same_run(from_store, from_dir)
        assert from_dir["source"] == str(export)

    def test_a_merged_sharded_run_has_the_statistics_of_the_unsharded_run(self, unsharded, merged):
        args = ("--by", "category", "--cluster", "category", "--bootstrap", "3000", "--seed", "7")
        a = _stats(unsharded.parent, _run_id(unsharded), "--store", str(unsharded), *args)
        b = _stats(merged.parent, _run_id(merged), "--store", str(merged), *args)
        _same_run(a, b)


class TestErrors:
    def test_errored_attempts_are_failures_and_are_counted(self, faulty):
        d = _stats(faulty.parent, _run_id(faulty), "--store", str(faulty), "--bootstrap", "0")
        n_errors = open_store(faulty).sql("SELECT count(*) AS n FROM steps WHERE is_error_category(failure_category)")
        assert d["overall"]["n_errors"] == int(n_errors["n"][0]) > 0
        assert d["overall"]["n_pass"] + d["overall"]["n_errors"] <= PROBLEMS * REPEATS
        assert sum(t["n_error"] for t in d["tasks"]) == d["overall"]["n_errors"]

    def test_unknown_run(self, unsharded):
        proc = nel("eval", "stats", "no-such-run", "--store", str(unsharded), cwd=unsharded.parent)
        assert "no run 'no-such-run'" in assert_one_line_error(proc, 2)

    def test_unknown_metric_lists_the_runs_metrics(self, unsharded):
        proc = nel("eval", "stats", _run_id(unsharded), "--store", str(unsharded), "--metric", "bleu",
                   cwd=unsharded.parent)
        assert "its metrics: multiple_choice" in assert_one_line_error(proc, 2)

    def test_unknown_slice_or_cluster_column_lists_the_columns(self, unsharded):
        for flag in ("--by", "--cluster"):
            proc = nel("eval", "stats", _run_id(unsharded), "--store", str(unsharded), flag, "topic",
                       cwd=unsharded.parent)
            assert "columns: category, idx" in assert_one_line_error(proc, 2)

    def test_negative_bootstrap(self, unsharded):
        proc = nel("eval", "stats", _run_id(unsharded), "--store", str(unsharded), "--bootstrap", "-5",
                   cwd=unsharded.parent)
        assert "--bootstrap" in assert_one_line_error(proc, 2)
