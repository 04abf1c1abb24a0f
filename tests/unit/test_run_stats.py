"""Specification of a run's statistics (``workbench.analysis.run_statistics``) and of the loader behind them
(``workbench.analysis.sources.load_run``): worked examples, edge cases, and store == export."""

from __future__ import annotations

import math
from pathlib import Path
from typing import ClassVar

import orjson
import polars as pl
import pytest
from factories import open_shard, run_from_rewards, run_header, step_row, task_rows
from scipy import stats as scipy_stats

from workbench.analysis.run_stats import NO_VALUE, run_statistics
from workbench.analysis.sources import ATTEMPT_COLUMNS, TASK_COLUMNS, RunData, _fill_unmatched, load_run
from workbench.errors import UsageError
from workbench.export.artifacts import export_run
from workbench.stats import clustered_mean, pass_at_k_per_task, wilson_interval
from workbench.store import ingest

T975 = {2: 4.302652729749464, 3: 3.182446305284263}


# ---- building RunData by hand ----------------------------------------------------------------------
def make_run(tasks: list[dict], n_repeats: int) -> RunData:
    """``tasks``: one dict per task ``t<position>``: ``rewards`` (list), optional ``errors`` (indices of errored
    attempts, whose reward is 0) and metadata (``category``, ``passage``: columns of every run here)."""
    by_id = {f"t{i}": t for i, t in enumerate(tasks)}
    return run_from_rewards(
        {i: t["rewards"] for i, t in by_id.items()}, n_repeats=n_repeats, source="test",
        errors={i: [r in t.get("errors", ()) for r in range(len(t["rewards"]))] for i, t in by_id.items()},
        metadata={c: {i: t.get(c) for i, t in by_id.items()} for c in ("category", "passage")})


def binary(passes: int, n: int, **meta) -> dict:
    return {"rewards": [1.0] * passes + [0.0] * (n - passes), **meta}


# ---- the worked example ------------------------------------------------------------------------------
class TestWorkedExample:
    """Three tasks x 4 repeats: A passes 2, B 4, C 0."""

    stats = run_statistics(make_run([binary(2, 4), binary(4, 4), binary(0, 4)], 4), bootstrap=2000)

    def test_pass_at_k_by_hand(self):
        # pass@1 = mean(2/4, 1, 0) = 0.5; pass@2: A 1 − C(2,2)/C(4,2) = 5/6 → (5/6 + 1 + 0)/3 = 11/18;
        # pass@4: A 1, B 1, C 0 → 2/3.
        p = self.stats.overall.pass_at_k
        assert list(p) == [1, 2, 3, 4]
        assert p[1].value == pytest.approx(0.5)
        assert p[2].value == pytest.approx(11 / 18)
        assert p[4].value == pytest.approx(2 / 3)

    def test_analytic_interval_by_hand(self):
        # Per-task pass rates 0.5, 1, 0: sample sd 0.5, SE 0.5/√3; t(0.975, 2) = 4.3027 → clipped to [0, 1].
        e = self.stats.overall.pass_at_k[1]
        assert e.se == pytest.approx(0.5 / math.sqrt(3))
        assert (e.low, e.high, e.df, e.n_tasks) == (0.0, 1.0, 2, 3)

    def test_bootstrap_interval_lies_within_the_task_values(self):
        e = self.stats.overall.pass_at_k[1]
        assert 0.0 <= e.boot_low <= e.value <= e.boot_high <= 1.0 and e.boot_se > 0

    def test_counts_and_buckets(self):
        o = self.stats.overall
        assert (o.n_tasks, o.n_tasks_attempted, o.n_attempts, o.n_pass, o.n_errors) == (3, 3, 12, 6, 0)
        assert o.buckets == {"always": 1, "sometimes": 1, "never": 1, "missing": 0, "errored": 0}

    def test_variance_split_by_hand(self):
        # As in test_stats_variance: σ²_within = 1/9, σ²_across = 2/9.
        v = self.stats.overall.variance
        assert (v.within, v.across) == (pytest.approx(1 / 9), pytest.approx(2 / 9))

    def test_per_task_table_has_wilson_intervals(self):
        t = self.stats.tasks
        assert t["pass_rate"].to_list() == [0.5, 1.0, 0.0]
        low, high = wilson_interval(2, 4)
        assert (t["wilson_low"][0], t["wilson_high"][0]) == (pytest.approx(low), pytest.approx(high))
        assert t["bucket"].to_list() == ["sometimes", "always", "never"]

    def test_binary_rewards_make_mean_reward_equal_pass_at_1(self):
        assert self.stats.binary
        assert self.stats.overall.mean_reward.value == pytest.approx(self.stats.overall.pass_at_k[1].value)


def test_a_larger_run_has_the_scipy_t_interval():
    passes = [0, 1, 2, 3, 4, 4, 3, 2, 1, 0, 2, 2]
    stats = run_statistics(make_run([binary(c, 4) for c in passes], 4), bootstrap=0)
    rates = [c / 4 for c in passes]
    low, high = scipy_stats.t.interval(0.95, len(rates) - 1, loc=sum(rates) / 12, scale=scipy_stats.sem(rates))
    e = stats.overall.pass_at_k[1]
    assert (e.low, e.high) == (pytest.approx(low), pytest.approx(high))


# ---- edge cases --------------------------------------------------------------------------------------
class TestEdgeCases:
    def test_errored_attempts_count_as_failures_and_are_reported_apart(self):
        data = make_run([{"rewards": [1, 0, 0], "errors": [1]}, {"rewards": [0, 0, 0], "errors": [0, 1, 2]},
                         binary(3, 3)], 3)
        o = run_statistics(data, bootstrap=0).overall
        assert o.pass_at_k[1].value == pytest.approx((1 / 3 + 0 + 1) / 3)
        assert o.n_errors == 4
        assert o.buckets["errored"] == 1 and o.buckets["sometimes"] == 1 and o.buckets["never"] == 0

    def test_tasks_with_no_attempt_are_missing_not_failures(self):
        data = make_run([binary(1, 2), {"rewards": []}, binary(2, 2)], 2)
        s = run_statistics(data, bootstrap=100)
        assert s.overall.pass_at_k[1].value == pytest.approx(0.75)
        assert s.overall.pass_at_k[1].n_tasks == 2
        assert (s.overall.n_tasks, s.overall.n_tasks_attempted, s.overall.buckets["missing"]) == (3, 2, 1)
        assert s.tasks["bucket"][1] == "missing" and s.tasks["pass_rate"][1] is None

    def test_unequal_repeats_leave_short_tasks_out_of_larger_k(self):
        data = make_run([binary(1, 4), binary(1, 2), binary(0, 4)], 4)
        p = run_statistics(data, bootstrap=200).overall.pass_at_k
        assert (p[1].n_tasks, p[2].n_tasks, p[3].n_tasks, p[4].n_tasks) == (3, 3, 2, 2)
        assert p[3].value == pytest.approx(pass_at_k_per_task([4, 4], [1, 0], 3).mean())

    def test_one_task_gets_the_zero_spread_floor_not_a_point(self):
        # One task says nothing about the spread across tasks: not [0.25, 0.25] with se 0, but the floor
        # 0.25 ∓ w·(distance to 0 or 1), w = z² / (1 + z²), labelled, with the reason.
        e = run_statistics(make_run([binary(1, 4)], 4), bootstrap=100).overall.pass_at_k[1]
        z2 = scipy_stats.norm.ppf(0.975) ** 2
        w = z2 / (1 + z2)
        assert (e.value, e.n_clusters) == (0.25, 1) and math.isnan(e.se)
        assert (e.low, e.high) == pytest.approx((0.25 - w * 0.25, 0.25 + w * 0.75), rel=1e-12)
        assert e.method == "zero-spread floor" and "one task" in e.note
        assert math.isnan(e.boot_low) and "no spread to resample" in e.note

    def test_one_repeat(self):
        s = run_statistics(make_run([binary(1, 1), binary(0, 1), binary(1, 1)], 1), bootstrap=100)
        assert list(s.overall.pass_at_k) == [1]
        assert math.isnan(s.overall.variance.within) and not math.isnan(s.overall.variance.se)

    @pytest.mark.parametrize("passes", [0, 3])
    def test_all_pass_or_all_fail_get_wilsons_interval_with_a_caveat(self, passes):
        # Not [1, 1] or [0, 0]: the Wilson interval of 5/5 (0/5) tasks, as scipy computes it, and a note.
        s = run_statistics(make_run([binary(passes, 3)] * 5, 3), bootstrap=500)
        ref = scipy_stats.binomtest(5 if passes else 0, 5).proportion_ci(0.95, method="wilson")
        for e in s.overall.pass_at_k.values():
            assert e.value == passes / 3 and e.se == 0.0
            assert (e.low, e.high) == pytest.approx((ref.low, ref.high), abs=5e-16)
            assert e.method == "wilson" and "no spread: every task scored" in e.note
            assert math.isnan(e.boot_low) and math.isnan(e.boot_high)  # every resample the same: no interval

    def test_no_attempts_at_all(self):
        s = run_statistics(make_run([{"rewards": []}, {"rewards": []}], 2), bootstrap=100)
        assert s.overall.buckets["missing"] == 2 and math.isnan(s.overall.pass_at_k[1].value)
        orjson.dumps(s.to_dict())  # no NaN reaches the JSON

    def test_non_binary_rewards_have_their_own_mean(self):
        data = make_run([{"rewards": [0.5, 2.0]}, {"rewards": [1.0, 0.0]}, {"rewards": [0.25, 0.25]}], 2)
        s = run_statistics(data, bootstrap=0)
        assert not s.binary
        assert s.overall.mean_reward.value == pytest.approx((1.25 + 0.5 + 0.25) / 3)
        assert s.overall.pass_at_k[1].value == pytest.approx((0.5 + 0.5 + 0) / 3)
        assert s.overall.mean_reward.high > 1.0, "rewards above 1 are not clipped to [0, 1]"


# ---- slices, clusters, options -----------------------------------------------------------------------
class TestSlicesAndClusters:
    tasks: ClassVar[list[dict]] = [binary(c, 4, category=cat, passage=p) for c, cat, p in [
        (4, "x", "p1"), (3, "x", "p1"), (0, "y", "p2"), (1, "y", "p2"), (2, "y", "p3"), (4, None, None)]]

    def test_each_slice_is_the_statistics_of_its_tasks(self):
        s = run_statistics(make_run(self.tasks, 4), by=["category"], bootstrap=100)
        assert [(x.column, x.value, x.n_tasks) for x in s.slices] == [
            ("category", NO_VALUE, 1), ("category", "x", 2), ("category", "y", 3)]
        y = s.slices[2]
        assert y.pass_at_k[1].value == pytest.approx((0 + 0.25 + 0.5) / 3)
        assert y.label == "category=y"

    def test_clustered_intervals_use_the_cluster_column_and_unlabelled_tasks_stand_alone(self):
        s = run_statistics(make_run(self.tasks, 4), cluster="passage", bootstrap=300)
        e = s.overall.pass_at_k[1]
        expected = clustered_mean([1, 0.75, 0, 0.25, 0.5, 1], ["p1", "p1", "p2", "p2", "p3", "solo"], bounded=True)
        assert (e.se, e.low, e.high) == (pytest.approx(expected.se), pytest.approx(expected.low),
                                         pytest.approx(expected.high))
        assert e.n_clusters == 4 and e.df == 3

    def test_unknown_columns_name_the_available_ones(self):
        with pytest.raises(UsageError, match=r"no column 'topic'.*columns: category, passage"):
            run_statistics(make_run(self.tasks, 4), by=["topic"])
        with pytest.raises(UsageError, match="no column 'topic'"):
            run_statistics(make_run(self.tasks, 4), cluster="topic")

    def test_negative_bootstrap_is_refused(self):
        with pytest.raises(UsageError, match="--bootstrap"):
            run_statistics(make_run(self.tasks, 4), bootstrap=-1)

    def test_no_bootstrap_leaves_its_numbers_undefined(self):
        s = run_statistics(make_run(self.tasks, 4), bootstrap=0)
        assert math.isnan(s.overall.pass_at_k[1].boot_low)
        assert s.to_dict()["overall"]["pass_at_k"]["1"]["bootstrap"] is None

    def test_the_seed_makes_it_reproducible(self):
        a = run_statistics(make_run(self.tasks, 4), by=["category"], seed=5, bootstrap=500).to_dict()
        assert a == run_statistics(make_run(self.tasks, 4), by=["category"], seed=5, bootstrap=500).to_dict()
        assert a != run_statistics(make_run(self.tasks, 4), by=["category"], seed=6, bootstrap=500).to_dict()

    def test_to_dict_is_json_native(self):
        d = run_statistics(make_run(self.tasks, 4), by=["category"], bootstrap=100).to_dict()
        assert orjson.loads(orjson.dumps(d)) == d
        assert d["overall"]["pass_at_k"]["2"]["bootstrap"]["low"] <= d["overall"]["pass_at_k"]["2"]["value"]
        assert len(d["tasks"]) == 6 and "tasks" not in run_statistics(make_run(self.tasks, 4)).to_dict(
            include_tasks=False)


# ---- the loader ------------------------------------------------------------------------------------
RUN = "run-1"
META = [{"idx": 0, "category": "alpha", "n": "clash"}, {"idx": 1, "category": "beta"},
        {"idx": 2, "category": None}, {"idx": 3, "category": "beta"}]


def _step(idx: int, rep: int, passed: bool, failure: str | None = None, scores: dict | None = None) -> dict:
    return step_row(RUN, idx, rep, reward=1.0 if passed else 0.0, passed=passed, failure_category=failure,
                    latency_ms=10.0 + rep, prompt_tokens=5, completion_tokens=3, total_tokens=8,
                    metadata=orjson.dumps(META[idx]).decode(),
                    scoring_details=orjson.dumps({"method": "x", "category": "from-scorer"}).decode(),
                    scores=None if scores is None else orjson.dumps(scores).decode(), response="r", prompt="p")


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return make_store(tmp_path / "nel.duckdb")


def make_store(path: Path, merge: bool = True) -> Path:
    """Four tasks x 2 repeats; task 3 never attempted; one timeout; two metrics (exact primary, and f1).
    Without ``merge`` the run stays live: its steps are in the shard's segments, not the database."""
    header = run_header(RUN, n_tasks=4, config={"primary_metric": "exact", "metrics": ["exact", "f1"]})
    w = open_shard(path, header, tasks=task_rows(RUN, 4, metadata=lambda i: orjson.dumps(META[i]).decode()))
    outcomes = {(0, 0): (True, None), (0, 1): (False, None), (1, 0): (False, "timeout"), (1, 1): (True, None),
                (2, 0): (False, None), (2, 1): (False, "format_error")}
    for (idx, rep), (passed, failure) in outcomes.items():
        scores = {"exact": {"reward": float(passed), "passed": passed},
                  "f1": {"reward": 0.5 if passed else 0.25, "passed": False}}
        w.append(_step(idx, rep, passed, failure, scores))
    w.finish("complete")
    if merge:
        ingest(path)
    return path


class TestLoadRun:
    def test_attempts_follow_the_contract(self, store):
        data = load_run(RUN, store=store)
        a = data.attempts
        assert a.columns == [*ATTEMPT_COLUMNS, "category", "idx", "meta_n"]
        assert a.schema["task_idx"] == pl.Int64 and a.schema["error"] == pl.Boolean
        assert a["task_idx"].to_list() == [0, 0, 1, 1, 2, 2] and a["repeat"].to_list() == [0, 1] * 3
        assert a["error"].to_list() == [False, False, True, False, False, False]
        assert a["meta_n"][0] == "clash", "a metadata key named like a fixed column is renamed"
        assert (data.metric, data.metrics, data.n_repeats) == ("exact", ("exact", "f1"), 2)
        assert data.source == f"store:{store}#{RUN}" and data.metadata_columns == ("category", "idx", "meta_n")

    def test_tasks_include_the_one_never_attempted(self, store):
        t = load_run(RUN, store=store).tasks
        assert t.columns == [*TASK_COLUMNS, "category", "idx", "meta_n"]
        assert t["n"].to_list() == [2, 2, 2, 0] and t["n_pass"].to_list() == [1, 1, 0, 0]
        assert t["n_error"].to_list() == [0, 1, 0, 0]
        assert t["task_id"][3] == "t3" and t["category"][3] == "beta"

    def test_a_missing_category_falls_back_on_the_scorers(self, store):
        t = load_run(RUN, store=store).tasks
        assert t["category"].to_list() == ["alpha", "beta", "from-scorer", "beta"]

    def test_another_metric_fills_reward_from_the_scores(self, store):
        data = load_run(RUN, store=store, metric="f1")
        assert data.metric == "f1"
        assert data.attempts["reward"].to_list() == [0.5, 0.25, 0.25, 0.5, 0.25, 0.25]
        assert not data.attempts["passed"].any()

    def test_a_folder_named_like_the_run_without_an_export_does_not_hide_it(self, store, tmp_path, monkeypatch):
        monkeypatch.chdir(tmp_path)
        (tmp_path / RUN).mkdir()  # e.g. the run's output folder, not exported
        assert load_run(RUN, store=store).source == f"store:{store}#{RUN}"
        with pytest.raises(UsageError, match="no eval-"):
            load_run(RUN)  # without a store, the folder is what was meant

    def test_unknown_run_and_metric_are_usage_errors(self, store):
        with pytest.raises(UsageError, match="no run 'nope'"):
            load_run("nope", store=store)
        with pytest.raises(UsageError, match="no metric 'bleu'; its metrics: exact, f1"):
            load_run(RUN, store=store, metric="bleu")
        with pytest.raises(UsageError, match="no store"):
            load_run("nope")

    def test_an_exported_directory_loads_the_same_frames(self, store, tmp_path):
        out = tmp_path / "export"
        export_run(store, RUN, out)
        for metric in (None, "f1"):
            from_store, from_dir = load_run(RUN, store=store, metric=metric), load_run(str(out), metric=metric)
            assert from_dir.attempts.equals(from_store.attempts)
            assert from_dir.tasks.drop("task_id", "category", "idx", "meta_n").equals(
                from_store.tasks.drop("task_id", "category", "idx", "meta_n"))
            assert from_dir.tasks["n"][3] == 0, "the run's problem range gives the missing task"
            stats = [run_statistics(d, bootstrap=300).to_dict(include_tasks=False) for d in (from_store, from_dir)]
            assert stats[0] | {"source": ""} == stats[1] | {"source": ""}
        bundle = next(out.glob("eval-*.json"))
        assert load_run(str(bundle)).source == str(out)

    def test_a_live_run_loads_as_it_will_once_merged(self, store, tmp_path):
        live = load_run(RUN, store=make_store(tmp_path / "live" / "nel.duckdb", merge=False))
        merged = load_run(RUN, store=store)
        assert live.attempts.equals(merged.attempts) and live.tasks.equals(merged.tasks)

    def test_a_step_appended_between_the_two_scans_takes_its_tasks_metadata(self):
        attempts = pl.DataFrame({"task_idx": [0, 1], "category": ["a", None], "nel_hit": [True, None]})
        listed = pl.DataFrame({"task_idx": [0, 1], "category": ["a", "b"]})
        assert _fill_unmatched(attempts, listed, ["category"])["category"].to_list() == ["a", "b"]

    def test_a_directory_needs_exactly_one_bundle(self, tmp_path):
        with pytest.raises(UsageError, match="no eval-"):
            load_run(str(tmp_path))
        for name in ("eval-a.json", "eval-b.json"):
            (tmp_path / name).write_text("{}")
        with pytest.raises(UsageError, match="2 eval-"):
            load_run(str(tmp_path))
