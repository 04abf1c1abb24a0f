"""``score_shift``: two runs paired on task identity, the per-task contributions to Δpass@1 (which add up to
it exactly), slices, bucket transitions, attempt flips and drivers, worked out by hand."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest
from test_diagnosis_profile import P, T, W, make_run

from workbench.analysis.diagnosis.profile import run_profile
from workbench.analysis.diagnosis.shift import attempt_flips, score_shift
from workbench.analysis.diagnosis.types import AttemptEvidence, AttemptFlips, SliceShift
from workbench.analysis.sources import RunData
from workbench.errors import UsageError

META = ("category",)
# A: 4 repeats; B: 2 repeats, and every problem index moved by 10 (pairing is on task_id, not position).
A_TASKS = [
    {"id": "t0", "outcomes": [P, P, P, P], "category": "x"},
    {"id": "t1", "outcomes": [P, P, W, W], "category": "x"},
    {"id": "t2", "outcomes": [W, W, W, W], "category": "y"},
    {"id": "t3", "outcomes": [P, P, P, W], "category": "y"},
    {"id": "t4", "outcomes": [P, W], "category": "y"},  # attempted in A only
]
B_TASKS = [
    {"id": "t0", "idx": 10, "outcomes": [P, W], "category": "x"},
    {"id": "t1", "idx": 11, "outcomes": [P, P], "category": "x"},
    {"id": "t2", "idx": 12, "outcomes": [W, W], "category": "y"},
    {"id": "t3", "idx": 13, "outcomes": [W, T], "category": "y"},
    {"id": "t5", "idx": 15, "outcomes": [P, P], "category": "y"},  # attempted in B only
]


def shift_of(a: RunData, b: RunData, **kwargs):
    return score_shift(a, b, run_profile(a), run_profile(b), **kwargs)


@pytest.fixture(scope="module")
def runs() -> tuple[RunData, RunData]:
    return make_run(A_TASKS, 4, run_id="A", meta=META), make_run(B_TASKS, 2, run_id="B", meta=META)


@pytest.fixture(scope="module")
def shift(runs):
    return shift_of(*runs, top=1)


class TestContributions:
    """Each paired task contributes (p_B − p_A) / N."""

    def test_worked_example(self, shift):
        # p_A = 1, 1/2, 0, 3/4; p_B = 1/2, 1, 0, 0; N = 4
        assert shift.n_paired == 4
        assert (shift.pass_at_1_a, shift.pass_at_1_b) == (pytest.approx(0.5625), pytest.approx(0.375))
        assert shift.delta == pytest.approx(-0.1875)
        by_id = {t.task_id: t.contribution for t in shift.tasks}
        assert by_id == {"t0": -0.125, "t1": 0.125, "t2": 0.0, "t3": -0.1875}

    def test_contributions_add_up_to_delta(self, shift):
        assert math.fsum(t.contribution for t in shift.tasks) == pytest.approx(shift.delta, abs=1e-12)

    def test_unequal_repeats_use_each_sides_own_attempts(self, shift):
        t0 = next(t for t in shift.tasks if t.task_id == "t0")
        assert (t0.passes_a, t0.attempts_a, t0.passes_b, t0.attempts_b) == (4, 4, 1, 2)
        assert (t0.p_a, t0.p_b, t0.task_idx_a, t0.task_idx_b) == (1.0, 0.5, 0, 10)

    def test_tasks_attempted_on_one_side_are_listed_not_paired(self, shift):
        assert (shift.only_a, shift.only_b) == ((4,), (15,))
        assert {t.task_id for t in shift.tasks} == {"t0", "t1", "t2", "t3"}

    def test_one_sided_tasks_still_count_in_each_runs_own_headline(self, shift):
        assert shift.profile_a.pass_at_1 == pytest.approx((1 + 0.5 + 0 + 0.75 + 0.5) / 5)
        assert shift.profile_b.pass_at_1 == pytest.approx((0.5 + 1 + 0 + 0 + 1) / 5)

    def test_tasks_are_sorted_by_contribution_largest_drop_first(self, shift):
        assert [t.task_id for t in shift.tasks] == ["t3", "t0", "t2", "t1"]

    def test_errors_buckets_and_slices_per_task(self, shift):
        t3 = shift.tasks[0]
        assert (t3.errors_a, t3.errors_b, t3.bucket_a, t3.bucket_b, t3.slices) == (0, 1, "sometimes", "never",
                                                                                     {"category": "y"})

    @pytest.mark.parametrize("seed", [0, 1, 2])
    def test_the_sum_is_exact_on_random_runs_with_uneven_repeats(self, seed):
        rng = np.random.default_rng(seed)

        def random_run(run_id: str, n: int) -> RunData:
            tasks = [{"id": f"t{i}", "outcomes": [P if rng.random() < 0.6 else W for _ in range(rng.integers(1, 9))]}
                     for i in range(n)]
            return make_run(tasks, 8, run_id=run_id)

        s = shift_of(random_run("A", 300), random_run("B", 280))
        assert s.n_paired == 280 and len(s.only_a) == 20
        total = math.fsum(t.contribution for t in s.tasks)
        assert abs(total - s.delta) <= 1e-12


class TestBreakdowns:
    def test_slices_sum_their_tasks_most_negative_first(self, shift):
        assert shift.slices == (
            SliceShift("category", "y", n_tasks=2, contribution=-0.1875, pass_at_1_a=0.375, pass_at_1_b=0.0,
                       n_regressed=1, n_improved=0),
            SliceShift("category", "x", n_tasks=2, contribution=0.0, pass_at_1_a=0.75, pass_at_1_b=0.75,
                       n_regressed=1, n_improved=1),
        )

    def test_bucket_transitions(self, shift):
        moved = {k: v for k, v in shift.transitions.items() if v}
        assert moved == {("always", "sometimes"): 1, ("sometimes", "always"): 1, ("never", "never"): 1,
                         ("sometimes", "never"): 1}
        assert len(shift.transitions) == 9, "every pair of attempted buckets, zeros included"

    def test_attempt_flips_pair_repeat_r_with_repeat_r(self, shift):
        # t0: P/P vs P/W; t1: P/P vs P/P; t2: W/W vs W/W; t3: P/P vs W/T; A's repeats 2 and 3 have no partner
        assert shift.attempt_flips == AttemptFlips(n_pairs=8, pass_to_fail=3, fail_to_pass=0, pass_to_pass=3,
                                                   fail_to_fail=2)

    def test_problems_sharing_content_pair_in_order(self):
        a = make_run([{"id": "same", "idx": 0, "outcomes": [P]}, {"id": "same", "idx": 1, "outcomes": [W]}], 1)
        b = make_run([{"id": "same", "idx": 5, "outcomes": [P]}, {"id": "same", "idx": 7, "outcomes": [P]}], 1)
        assert attempt_flips(a, b) == AttemptFlips(n_pairs=2, pass_to_fail=0, fail_to_pass=1, pass_to_pass=1,
                                                   fail_to_fail=0)
        assert shift_of(a, b).n_paired == 1, "one content, one task (its attempts pooled)"

    def test_runs_of_different_metrics_are_refused(self, runs):
        a, b = runs
        other = RunData(**{**{f: getattr(b, f) for f in b.__dataclass_fields__}, "metric": "f1"})
        with pytest.raises(UsageError, match="different metrics"):
            shift_of(a, other)


class FakeEvidence:
    """Attempt texts made up from the frames: the response names the outcome."""

    def __init__(self, run: RunData) -> None:
        self.run = run

    @property
    def run_id(self) -> str:
        return self.run.run_id

    def attempts(self, task_idx: Sequence[int]) -> dict[int, list[AttemptEvidence]]:
        out: dict[int, list[AttemptEvidence]] = {}
        for row in self.run.attempts.iter_rows(named=True):
            if row["task_idx"] in task_idx:
                answer = "42" if row["passed"] else "41"
                out.setdefault(row["task_idx"], []).append(AttemptEvidence(
                    run_id=self.run_id, task_idx=row["task_idx"], repeat=row["repeat"], passed=row["passed"],
                    extracted_answer=answer, expected_answer="42", failure_category=row["failure_category"],
                    error=None, response=f"The answer is {answer}."))
        return out

    def answer_agreement(self, task_idx: Sequence[int]) -> dict[int, int]:
        return {}


class TestDrivers:
    def test_top_tasks_in_each_direction(self, shift):
        assert [d.task.task_id for d in shift.drivers_down] == ["t3"]
        assert [d.task.task_id for d in shift.drivers_up] == ["t1"]

    def test_more_drivers_largest_first_and_only_tasks_that_moved(self, runs):
        s = shift_of(*runs, top=5)
        assert [d.task.task_id for d in s.drivers_down] == ["t3", "t0"]
        assert [d.task.task_id for d in s.drivers_up] == ["t1"]

    def test_without_evidence_the_dives_carry_counts_only(self, shift):
        d = shift.drivers_down[0]
        assert (d.dive_a.passes, d.dive_a.attempts, d.dive_b.passes, d.dive_b.attempts) == (3, 4, 0, 2)
        assert d.dive_a.evidence == () and d.representative_pass is None and d.diff_markdown == ""

    def test_the_side_that_passed_more_gives_the_pass(self, runs):
        a, b = runs
        s = shift_of(a, b, evidence_a=FakeEvidence(a), evidence_b=FakeEvidence(b), top=1)
        down, up = s.drivers_down[0], s.drivers_up[0]
        assert (down.representative_pass.run_id, down.representative_pass.repeat) == ("A", 0)
        assert (down.representative_fail.run_id, down.representative_fail.repeat) == ("B", 0)
        assert (up.representative_pass.run_id, up.representative_fail.run_id) == ("B", "A")
        assert "[-42-]" in down.diff_markdown and "{+41+}" in down.diff_markdown
        assert [e.repeat for e in down.dive_a.evidence] == [0, 1, 2, 3]
