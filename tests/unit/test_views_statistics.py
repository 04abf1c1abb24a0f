"""The SQL views' statistics agree with workbench.stats (one number, one interval)."""

import duckdb
import numpy as np
import pytest
from scipy import stats as scipy_stats

from workbench.resources import sql_path
from workbench.stats import bounded_mean, wilson_interval


@pytest.fixture(scope="module")
def con():
    c = duckdb.connect()
    c.execute(sql_path("schema.sql").read_text())
    c.execute(sql_path("views.sql").read_text())
    return c


@pytest.mark.parametrize("df", [1, 2, 3, 5, 7, 8, 9, 12, 19, 30, 99, 199, 1318, 100_000])
def test_the_t_quantile_macro_matches_scipy(con, df):
    got = con.execute("SELECT t_quantile_975(?)", [df]).fetchone()[0]
    assert got == pytest.approx(scipy_stats.t.ppf(0.975, df), rel=2e-5)


def _load(con, passes):
    """One run, task i attempted len(passes[i]) times with the given outcomes."""
    con.execute("DELETE FROM runs; DELETE FROM run_tasks; DELETE FROM steps")
    con.execute("INSERT INTO runs (run_id, benchmark, identity_hash, identity, n_tasks, n_repeats, problem_start, "
                "problem_end, total_shards, status, created_at) VALUES ('r', 'b', 'h', '{}', ?, 4, 0, ?, 1, "
                "'complete', now())", [len(passes), len(passes)])
    for i, outcomes in enumerate(passes):
        con.execute("INSERT INTO run_tasks VALUES ('r', ?, ?)", [i, f"t{i}"])
        for rep, ok in enumerate(outcomes):
            con.execute("INSERT INTO steps (run_id, task_idx, repeat, task_id, shard_idx, started_at, reward, passed) "
                        "VALUES ('r', ?, ?, ?, 0, now(), ?, ?)", [i, rep, f"t{i}", float(ok), ok])


def test_run_metrics_pass_at_1_and_interval_equal_the_python_estimate(con):
    rng = np.random.default_rng(7)
    passes = [[bool(x) for x in rng.random(4) < p] for p in rng.random(25)]
    _load(con, passes)
    row = con.execute("SELECT pass_at_1, pass_at_1_low, pass_at_1_high, pass_at_1_method FROM run_metrics").fetchone()
    est = bounded_mean(np.array([np.mean(p) for p in passes]))
    assert row[:3] == pytest.approx((est.value, est.low, est.high), abs=1e-5) and row[3] == est.method


@pytest.mark.parametrize("passes", [
    [[True, False, True, True]],  # one task: the zero-spread floor, not the point (was [0.75, 0.75])
    [[True] * 4] * 6,  # all pass: Wilson's 6/6, not [1, 1]
    [[False, False]] * 3 + [[True, True]] * 2,  # every task 0 or 1: Wilson's 2/5
    [[True, False]] * 7,  # no spread, not at an end: the floor around 0.5
    [[True, False], [True, True], [True, True], [True, True]],  # few tasks moved: widened to the floor
])
def test_degenerate_runs_get_the_python_interval_and_method(con, passes):
    _load(con, passes)
    row = con.execute("SELECT pass_at_1, pass_at_1_low, pass_at_1_high, pass_at_1_method FROM run_metrics").fetchone()
    est = bounded_mean(np.array([np.mean(p) for p in passes]))
    assert row[:3] == pytest.approx((est.value, est.low, est.high), abs=1e-5) and row[3] == est.method
    assert est.low < est.high


def test_task_stats_wilson_bounds_equal_the_python_ones(con):
    _load(con, [[True, True, True, False], [False] * 4, [True] * 4])
    rows = con.execute("SELECT n_pass, n, wilson_low, wilson_high FROM task_stats ORDER BY task_idx").fetchall()
    for n_pass, n, low, high in rows:
        assert (low, high) == pytest.approx(wilson_interval(n_pass, n), abs=1e-9)
