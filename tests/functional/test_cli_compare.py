"""`nel compare` and `nel gate` end to end: real runs against mock models of different skill seeds (and one
that fails most requests), compared by run id and by exported results directory, through the CLI."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from nel_helpers import assert_ok, assert_one_line_error, eval_args, nel

from workbench.mock import mock_model
from workbench.store import open_store

pytestmark = pytest.mark.timeout(120)

PROBLEMS, REPEATS = 40, 3
COMPARE_EXIT = {"PASS": 0, "BLOCK": 1, "WARN": 2, "INCONCLUSIVE": 2}


@dataclass(frozen=True)
class Runs:
    root: Path
    store: Path

    def out(self, run_id: str) -> Path:
        """The output directory a run exported into (``out-RUN/runs/RUN/``)."""
        return self.root / f"out-{run_id}"


def _run(url: str, runs_root: Path, store: Path, run_id: str, *extra: str, repeats: int = REPEATS) -> None:
    args = eval_args(url, problems=PROBLEMS, repeats=repeats, store=store, output_dir=runs_root / f"out-{run_id}",
                     extra=["--run-id", run_id, *extra])
    if "--problem-range" in extra:
        i = args.index("--max-problems")
        del args[i:i + 2]
    assert_ok(nel(*args, cwd=runs_root))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    """base / base1: skill seed 1 (3 repeats / 1 repeat, problems 0..39); cand / cand1: skill seed 2 (cand covers
    problems 5..44, so 5 tasks are only in each); bad: skill seed 1 with 70 % of requests failing (HTTP 500)."""
    root = tmp_path_factory.mktemp("compare")
    store = root / "nel.duckdb"
    with mock_model(latency_ms=0, skill_seed=1) as m:
        _run(m.base_url, root, store, "base")
        _run(m.base_url, root, store, "base1", repeats=1)
    with mock_model(latency_ms=0, skill_seed=2) as m:
        _run(m.base_url, root, store, "cand", "--problem-range", f"5:{PROBLEMS + 5}")
        _run(m.base_url, root, store, "cand1", repeats=1)
    with mock_model(latency_ms=0, skill_seed=1, fail_rate=0.7, faults=("500",)) as m:
        # most of its attempts error: kept as a run to compare (--max-error-rate 1), not failed for it
        _run(m.base_url, root, store, "bad", "--max-retries", "0", "--max-error-rate", "1")
    yield Runs(root=root, store=store)


def _compare(runs: Runs, *args: str) -> tuple[int, str, dict]:
    """`nel compare ARGS --output FILE`: (exit code, stdout, regression.json)."""
    out = runs.root / f"regression-{abs(hash(args))}.json"
    proc = nel("compare", *args, "--store", str(runs.store), "--output", str(out), cwd=runs.root)
    assert proc.returncode in (0, 1, 2) and "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, proc.stdout, orjson.loads(out.read_bytes())


class TestCompare:
    """`nel compare BASELINE CANDIDATE`."""

    def test_by_run_id_and_by_results_dir_agree(self, runs):
        _, text_ids, by_id = _compare(runs, "base", "cand")
        _, text_dirs, by_dir = _compare(runs, str(runs.out("base")), str(runs.out("cand")))
        for key in ("score_deltas", "category_deltas", "runtime_deltas", "verdict", "verdict_reasons", "coverage",
                    "flip_report", "tests", "mcnemar"):
            assert by_id[key] == by_dir[key], key
        assert by_id["baseline"]["source"].startswith("store:") and by_dir["baseline"]["source"].endswith("base")
        assert text_ids.split("\n  paired ")[1] == text_dirs.split("\n  paired ")[1]  # the same after the run lines

    def test_tasks_on_one_side_are_reported(self, runs):
        _, text, report = _compare(runs, "base", "cand")
        tasks = open_store(runs.store).tasks("base")
        first_five = tasks.filter(tasks["task_idx"] < 5).sort("task_idx")["task_id"].to_list()
        coverage = report["coverage"]
        assert coverage["n_paired"] == PROBLEMS - 5
        assert coverage["only_baseline"] == first_five
        assert coverage["n_only_candidate"] == 5
        assert "5 only in the baseline, 5 only in the candidate" in text
        assert first_five[0] in text
        assert any("5 tasks only in the baseline and 5 only in the candidate" in r for r in report["verdict_reasons"])

    def test_every_statistic_is_there(self, runs):
        _, text, report = _compare(runs, "base", "cand")
        delta = report["score_deltas"][report["metric"]]
        assert delta["ci_low"] <= delta["delta"] <= delta["ci_high"]
        assert delta["mde"] > 0 and delta["tasks_needed"] > delta["n_tasks"]
        assert delta["p_values"]["mcnemar_exact"] is None  # three repeats: not applicable
        assert all(0 < delta["p_values"][t] <= 1 for t in ("paired_t", "wilcoxon", "sign_flip_permutation",
                                                             "mann_whitney_u"))
        for phrase in ("McNemar exact", "paired t", "Wilcoxon signed-rank", "sign-flip permutation", "Mann-Whitney U",
                       "effect size d_z", "completion_tokens_per_s", "latency_p99_ms", "error_rate", "verdict: "):
            assert phrase in text, phrase

    def test_single_repeat_runs_get_mcnemar(self, runs):
        _, text, report = _compare(runs, "base1", "cand1")
        assert report["test_used"] == "mcnemar"
        assert report["mcnemar"]["p_value"] is not None
        assert set(report["flip_report"]["contingency"]) == {"both_correct", "both_wrong", "baseline_only_correct",
                                                             "candidate_only_correct"}
        assert "McNemar exact          p = " in text

    def test_errored_attempts_count_as_failures_and_are_reported_apart(self, runs):
        code, text, report = _compare(runs, "base", "bad")
        assert code == 0  # without --strict the verdict does not set the exit code
        assert report["verdict"] == "BLOCK"
        assert report["baseline"]["n_errors"] == 0 and report["candidate"]["n_errors"] > 0
        assert report["runtime_deltas"]["error_rate"]["delta"] > 0.3
        assert any("error rate rose" in r for r in report["verdict_reasons"])
        assert "errors 0 -> " in text

    def test_flips_top_ten_unless_show_flips(self, runs):
        _, text, report = _compare(runs, "base", "bad")
        n = report["flip_report"]["summary"]["n_regressions"]
        assert n > 10
        assert f"top 10 of {n}, --show-flips for all" in text
        _, everything, _ = _compare(runs, "base", "bad", "--show-flips")
        regressions = everything.split("regressions (largest drop first)")[1].split("improvements")[0]
        assert regressions.count(" passed  (") == n
        first = report["flip_report"]["regressions"][0]
        assert f"#{first['problem_idx']:<6} {first['task_id']}" in everything

    @pytest.mark.parametrize(("baseline", "candidate", "extra", "verdict"), [
        ("base", "bad", (), "BLOCK"),
        ("base", "base", ("--max-drop", "0.2"), "PASS"),
        ("base", "cand", (), None),  # WARN or INCONCLUSIVE: both exit 2
    ])
    def test_strict_exit_codes(self, runs, baseline, candidate, extra, verdict):
        code, text, report = _compare(runs, baseline, candidate, *extra, "--strict")
        assert verdict is None or report["verdict"] == verdict
        assert code == COMPARE_EXIT[report["verdict"]]
        assert f"verdict: {report['verdict']}" in text

    def test_an_unknown_run_is_one_line_error(self, runs):
        proc = nel("compare", "base", "no-such-run", "--store", str(runs.store), cwd=runs.root)
        assert "no-such-run" in assert_one_line_error(proc, 2)

    def test_max_drop_out_of_range_is_refused(self, runs):
        proc = nel("compare", "base", "cand", "--max-drop", "2", "--store", str(runs.store), cwd=runs.root)
        assert "--max-drop" in assert_one_line_error(proc, 2)


POLICY = """\
name: release
benchmarks:
  gsm8k:
    tier: critical
    max_drop: 0.02
  mmlu:
    tier: advisory
    max_drop: 0.05
"""


class TestGate:
    """`nel gate BASELINE_DIR CANDIDATE_DIR --policy FILE`."""

    def _gate(self, runs: Runs, candidate: str, policy: str, *extra: str):
        path = runs.root / f"policy-{abs(hash(policy))}.yaml"
        path.write_text(policy)
        return nel("gate", str(runs.out("base")), str(runs.out(candidate)), "--policy", str(path), *extra,
                   cwd=runs.root), path

    def test_a_breached_critical_benchmark_is_no_go(self, runs):
        proc, _ = self._gate(runs, "bad", POLICY, "--strict", "--verbose")
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "gate: policy release: NO-GO" in proc.stdout
        assert "critical  gsm8k      BREACH" in proc.stdout
        assert "advisory  mmlu       MISSING" in proc.stdout
        assert "p-values: McNemar exact -" in proc.stdout  # --verbose
        proc, _ = self._gate(runs, "bad", POLICY, "--format", "json")
        assert_ok(proc)
        data = orjson.loads(proc.stdout)
        assert data["decision"] == "NO-GO"
        assert [(b["benchmark"], b["status"]) for b in data["benchmarks"]] == [("gsm8k", "BREACH"), ("mmlu", "MISSING")]

    def test_insufficient_evidence_on_a_critical_benchmark_is_inconclusive(self, runs):
        proc, _ = self._gate(runs, "cand", POLICY, "--strict")
        assert "INSUFFICIENT_EVIDENCE" in proc.stdout
        assert proc.returncode == 2 and "decision: INCONCLUSIVE" in proc.stdout

    def test_a_policy_mistake_names_file_line_and_path(self, runs):
        proc, path = self._gate(runs, "cand", POLICY.replace("    max_drop: 0.02", "    max_dorp: 0.02"))
        line = assert_one_line_error(proc, 2)
        assert line.startswith(f"nel: error: {path}:5: benchmarks.gsm8k.max_dorp: unknown key")
