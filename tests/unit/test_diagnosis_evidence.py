"""The close read of one task (``build_dive``): distinct answers, the representative pass and fail, and the
word diff between them, rendered for a report."""

from __future__ import annotations

from workbench.analysis.diagnosis.evidence import (
    DIFF_LINES,
    answer_counts,
    build_dive,
    diff_markdown,
    representative_fail,
    representative_pass,
)
from workbench.analysis.diagnosis.types import AnswerCount, AttemptEvidence


def attempt(repeat: int, passed: bool, answer: str | None, response: str | None = None,
            category: str | None = None) -> AttemptEvidence:
    text = response if response is not None else f"Working.\nThe answer is {answer}."
    return AttemptEvidence(run_id="r", task_idx=7, repeat=repeat, passed=passed, extracted_answer=answer,
                           expected_answer="12", failure_category=category, error=None, response=text)


ATTEMPTS = [attempt(3, False, "11"), attempt(0, False, None, "", "timeout"), attempt(1, True, "12"),
            attempt(2, False, "13"), attempt(4, False, "11"), attempt(5, True, "12")]


class TestAnswers:
    def test_distinct_answers_most_frequent_first(self):
        assert answer_counts(ATTEMPTS) == (AnswerCount("12", 2, True), AnswerCount("11", 2, False),
                                           AnswerCount("13", 1, False), AnswerCount(None, 1, False))

    def test_an_answer_that_passed_and_failed_is_listed_per_verdict(self):
        counts = answer_counts([attempt(0, True, "x"), attempt(1, False, "x")])
        assert counts == (AnswerCount("x", 1, True), AnswerCount("x", 1, False))


class TestRepresentatives:
    def test_the_first_passing_attempt(self):
        assert representative_pass(ATTEMPTS).repeat == 1
        assert representative_pass([attempt(0, False, "1")]) is None

    def test_the_modal_wrong_answers_first_attempt_skipping_empty_responses(self):
        # "11" (repeats 3, 4) is the most common wrong answer; the timeout (repeat 0) has nothing to show
        assert representative_fail(ATTEMPTS).repeat == 3

    def test_equally_common_wrong_answers_the_earliest_wins(self):
        assert representative_fail([attempt(4, False, "a"), attempt(2, False, "b")]).repeat == 2

    def test_only_errors_still_give_a_fail(self):
        assert representative_fail([attempt(1, False, None, "", "timeout")]).repeat == 1


class TestDive:
    def test_a_dive_follows_the_frames_counts_and_verdicts(self):
        dive = build_dive("r", "tid", 7, 2, 6, ATTEMPTS, verdicts={2: True})
        assert (dive.passes, dive.attempts, dive.expected_answer) == (2, 6, "12")
        assert [e.repeat for e in dive.evidence] == [0, 1, 2, 3, 4, 5]
        assert dive.evidence[2].passed, "the diagnosed metric's verdict overrides the evidence's"
        assert dive.representative_pass.repeat == 1 and dive.representative_fail.repeat == 3
        assert dive.diff_markdown.startswith("```diff\n--- pass: r #7 attempt 1 (answer '12')\n"
                                             "+++ fail: r #7 attempt 3 (answer '11')\n")

    def test_without_evidence_only_counts(self):
        dive = build_dive("r", "tid", 7, 0, 4, [])
        assert (dive.answers, dive.evidence, dive.representative_pass, dive.diff_markdown) == ((), (), None, "")


class TestDiff:
    def test_changed_words_are_marked_with_one_line_of_context(self):
        text = diff_markdown(attempt(0, True, "12"), attempt(1, False, "11"))
        assert text.splitlines()[3:] == [" Working.", "-The answer is [-12-].", "+The answer is {+11+}.", "```"]

    def test_long_diffs_are_clipped(self):
        a = "\n".join(f"line {i}" for i in range(500))
        b = "\n".join(f"line {i} changed" for i in range(500))
        text = diff_markdown(attempt(0, True, "1", a), attempt(1, False, "2", b))
        body = text.splitlines()[3:-1]
        assert len(body) == DIFF_LINES + 1 and body[-1].startswith("@@ …")

    def test_identical_responses_say_so(self):
        same = attempt(0, True, "1", "same"), attempt(1, False, "1", "same")
        assert "identical" in diff_markdown(*same)


class TestSources:
    """Store and export evidence of a two-metric run (``test_run_stats``' store: exact primary, and f1)."""

    def test_the_metric_picks_the_verdict_shown_from_store_and_export(self, tmp_path):
        from test_run_stats import RUN, make_store

        from workbench.analysis.diagnosis.evidence import evidence_for
        from workbench.export.artifacts import export_run

        store = make_store(tmp_path / "nel.duckdb")
        export_run(store, RUN, tmp_path / "out")
        for source, where in ((RUN, store), (str(tmp_path / "out"), None)):
            primary = evidence_for(source, where).attempts([0, 1, 3])
            f1 = evidence_for(source, where, metric="f1").attempts([0, 1, 3])
            assert sorted(primary) == [0, 1], "task 3 has no attempt"
            assert [e.passed for e in primary[0]] == [True, False]
            assert not any(e.passed for v in f1.values() for e in v)
            assert primary[1][0].failure_category == "timeout"
