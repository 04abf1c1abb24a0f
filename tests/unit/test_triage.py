"""The headless queries and diffs behind `nel tui` (workbench.analysis.triage), without Textual.

The store is written through the shard writer, so most tests read a live run (journals), and the
ingested database is read too: the TUI must see both the same way.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest
from factories import open_shard, run_header, step_row, task_rows

from workbench.analysis import triage
from workbench.analysis.triage import Attempt, RunRow, Span, TaskFilter
from workbench.store import ingest, open_store

RUN, OTHER = "tri-a", "tri-b"
PROMPTS = ["Add 2 and 2.", "Name the capital of France.", "Multiply 3 by 3.", "Spell cat backwards.", "Unused."]
EXPECTED = ["4", "Paris", "9", "tac", "x"]
CATEGORIES = ["math", "geo", "math", "words", "words"]
# per task: (passed, answer or failure category) per repeat; task 4 has no attempt (missing)
PLAN: dict[str, list[list[tuple[bool, str]]]] = {
    RUN: [
        [(True, "4"), (True, "4"), (True, "4")],
        [(True, "Paris"), (False, "Lyon"), (False, "format_error")],
        [(False, "server_error"), (False, "server_error"), (False, "timeout")],
        [(False, "tca"), (False, "act"), (False, "tca")],
        [],
    ],
    OTHER: [[(False, "5")], [(True, "Paris")], [(True, "9")], [(True, "tac")], [(True, "x")]],
}
ERRORS = {"server_error", "timeout"}


def _messages(idx: int) -> list[dict[str, Any]]:
    return [{"role": "system", "content": "Be brief."}, {"role": "user", "content": PROMPTS[idx]}]


def _step(run_id: str, idx: int, rep: int, passed: bool, what: str) -> dict[str, Any]:
    failure = what if what in ERRORS or what == "format_error" else None
    answer = None if failure else what
    return step_row(
        run_id, idx, rep, task_id=f"tid{idx}",
        messages=orjson.dumps(_messages(idx)).decode(), reward=float(passed), passed=passed,
        expected_answer=EXPECTED[idx], extracted_answer=answer, scoring_method="exact", failure_category=failure,
        scoring_details=orjson.dumps({"method": "exact", "normalized_extracted": answer}).decode(),
        response=None if what in ERRORS else f"Thinking about it.\nThe answer is {answer or 'unclear'}.",
        error=f"{what} from the endpoint" if what in ERRORS else None, total_tokens=10 * (idx + 1) + rep,
        latency_ms=100.0 * (idx + 1) + rep,
    )


def _write(store: Path, run_id: str, finish: bool = True) -> None:
    plan = PLAN[run_id]
    header = run_header(run_id, n_tasks=len(plan), n_repeats=3, model_id=f"m-{run_id}",
                        identity_hash=run_id.ljust(64, "0"), identity={})
    writer = open_shard(store, header, tasks=task_rows(
        run_id, len(plan), task_id=lambda i: f"tid{i}", prompt=PROMPTS.__getitem__,
        expected_answer=EXPECTED.__getitem__, metadata=lambda i: orjson.dumps({"category": CATEGORIES[i]}).decode()))
    for idx, reps in enumerate(plan):
        for rep, (passed, what) in enumerate(reps):
            writer.append(_step(run_id, idx, rep, passed, what))
    if finish:
        writer.finish("complete")
    else:
        writer.abandon()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Two runs of the same tasks, live (not ingested)."""
    path = tmp_path_factory.mktemp("triage") / "nel.duckdb"
    _write(path, RUN)
    _write(path, OTHER)
    return open_store(path)


def _keys(page: triage.TaskPage) -> list[int]:
    return [r.task_idx for r in page.rows]


class TestRuns:
    def test_every_run_with_pass_at_1_and_its_interval(self, store: Any) -> None:
        runs = {r.run_id: r for r in triage.runs_table(store)}
        assert set(runs) == {RUN, OTHER}
        a = runs[RUN]
        assert (a.n_tasks, a.n_steps, a.n_errors) == (5, 12, 3)
        assert a.pass_at_1 == pytest.approx((1 + 1 / 3 + 0 + 0) / 4)
        assert a.pass_at_1_low is not None and a.pass_at_1_low <= a.pass_at_1 <= a.pass_at_1_high  # type: ignore[operator]
        assert a.finished_at is not None and a.duration_s is not None
        assert a.last_step_at is None  # read only for a run that has not finished

    def test_run_row_is_none_for_a_run_that_is_gone(self, store: Any) -> None:
        assert triage.run_row(store, "nope") is None
        assert triage.run_row(store, RUN).run_id == RUN  # type: ignore[union-attr]

    def test_sort_and_filter_keep_runs_without_a_value_last(self) -> None:
        def run(run_id: str, p: float | None, model: str) -> RunRow:
            return RunRow(run_id, "b", model, "complete", 1, 1, 1, 1, p, p, p, 0, 0, 0, datetime(2026, 1, 1), None,
                          None, None)

        runs = [run("x", 0.2, "alpha"), run("y", None, "beta"), run("z", 0.9, "alpha")]
        assert [r.run_id for r in triage.sort_filter_runs(runs, sort="pass@1")] == ["z", "x", "y"]
        assert [r.run_id for r in triage.sort_filter_runs(runs, sort="pass@1", descending=False)] == ["x", "z", "y"]
        assert [r.run_id for r in triage.sort_filter_runs(runs, text="ALPHA")] == ["x", "z"]

    def test_duration_runs_to_the_finish_or_else_the_latest_step(self) -> None:
        start = datetime(2026, 1, 1)
        done = RunRow("r", "b", None, "complete", 1, 1, 1, 1, None, None, None, 0, 0, 0, start,
                      start + timedelta(seconds=90), start, start + timedelta(seconds=30))
        going = RunRow("r", "b", None, "running", 1, 1, 1, 1, None, None, None, 0, 0, 0, start, None, start,
                       start + timedelta(seconds=30))
        assert (done.duration_s, going.duration_s) == (90.0, 30.0)


class TestTaskList:
    def test_sometimes_pass_first_then_never_errored_always_missing(self, store: Any) -> None:
        page = triage.task_page(store, RUN)
        assert [(r.task_idx, r.bucket) for r in page.rows] == [
            (1, "sometimes"), (3, "never"), (2, "errored"), (0, "always"), (4, "missing")]
        assert page.total == 5
        first = page.rows[0]
        assert (first.n_pass, first.n, first.category) == (1, 3, "geo")
        assert first.wilson_low is not None and 0 < first.wilson_low < 1 / 3 < first.wilson_high  # type: ignore[operator]

    def test_filters_by_bucket_category_and_failure_category(self, store: Any) -> None:
        assert _keys(triage.task_page(store, RUN, TaskFilter(bucket="errored"))) == [2]
        assert _keys(triage.task_page(store, RUN, TaskFilter(category="math"))) == [2, 0]
        assert _keys(triage.task_page(store, RUN, TaskFilter(failure="timeout"))) == [2]
        assert _keys(triage.task_page(store, RUN, TaskFilter(failure="format_error", category="geo"))) == [1]
        assert triage.task_page(store, RUN, TaskFilter(bucket="never", category="geo")).total == 0

    def test_free_text_searches_prompts_responses_and_task_index(self, store: Any) -> None:
        assert _keys(triage.task_page(store, RUN, TaskFilter(text="CAPITAL"))) == [1]
        assert _keys(triage.task_page(store, RUN, TaskFilter(text="answer is act"))) == [3]
        assert _keys(triage.task_page(store, RUN, TaskFilter(text="4"))) == [0, 4]  # 0 answers 4; 4 is an index
        assert _keys(triage.task_page(store, RUN, TaskFilter(text="tid3"))) == [3]

    def test_sorts_by_any_column_with_missing_values_last(self, store: Any) -> None:
        by_tokens = triage.task_page(store, RUN, TaskFilter(sort="tokens"))
        assert _keys(by_tokens) == [0, 1, 2, 3, 4]
        assert _keys(triage.task_page(store, RUN, TaskFilter(sort="tokens", descending=True))) == [3, 2, 1, 0, 4]
        assert _keys(triage.task_page(store, RUN, TaskFilter(sort="pass rate"))) == [2, 3, 1, 0, 4]
        assert set(triage.TASK_SORTS) >= {"task", "passes", "wilson", "bucket", "category", "failure", "latency"}

    def test_pages_are_windows_of_the_same_order(self, store: Any) -> None:
        page = triage.task_page(store, RUN, offset=2, limit=2)
        assert (page.offset, page.total, _keys(page)) == (2, 5, [2, 0])

    def test_facets_count_buckets_and_list_categories(self, store: Any) -> None:
        facets = triage.task_facets(store, RUN)
        assert facets.buckets == {"sometimes": 1, "never": 1, "errored": 1, "always": 1, "pending": 0, "missing": 1}
        assert facets.categories == ["geo", "math", "words"]
        assert facets.failures == ["format_error", "server_error", "timeout"]

    def test_task_list_reads_the_run_and_the_first_page_together(self, store: Any) -> None:
        first = triage.task_list(store, RUN, TaskFilter(bucket="always"))
        assert first.run is not None and (first.run.run_id, first.run.n_tasks, first.run.n_repeats) == (RUN, 5, 3)
        assert _keys(first.page) == [0]
        gone = triage.task_list(store, "nope")
        assert (gone.run, gone.page.total) == (None, 0)

    def test_the_overview_has_the_runs_metrics_and_facets(self, store: Any) -> None:
        overview = triage.run_overview(store, RUN)
        assert overview.run is not None and overview.run.pass_at_1 == pytest.approx(1 / 3)
        assert overview.facets == triage.task_facets(store, RUN)


class TestTaskDetail:
    def test_attempts_carry_parsed_json_and_the_task_its_statistics(self, store: Any) -> None:
        detail = triage.task_detail(store, RUN, 1)
        assert detail is not None
        assert (detail.prompt, detail.expected_answer, detail.category, detail.bucket) == (
            PROMPTS[1], "Paris", "geo", "sometimes")
        assert [a.outcome for a in detail.attempts] == ["pass", "wrong", "format_error"]
        first = detail.attempts[0]
        assert first.messages == _messages(1) and first.scoring_details["method"] == "exact"

    def test_an_unknown_task_or_run_is_none(self, store: Any) -> None:
        assert triage.task_detail(store, RUN, 42) is None
        assert triage.task_detail(store, "nope", 0) is None

    def test_the_ingested_store_reads_the_same(self, tmp_path: Path) -> None:
        path = tmp_path / "nel.duckdb"
        _write(path, RUN)
        live = triage.task_page(open_store(path), RUN)
        ingest(path)
        assert triage.task_page(open_store(path), RUN) == live


def _attempt(**changes: Any) -> Attempt:
    base: dict[str, Any] = dict(
        run_id=RUN, task_idx=0, repeat=0, task_id="tid0", passed=True, reward=1.0, expected_answer="4",
        extracted_answer="4", failure_category=None, error=None, scoring_method="exact",
        scoring_details={"method": "exact", "normalized_extracted": "4"}, prompt_tokens=1, completion_tokens=1,
        total_tokens=2, latency_ms=1.0, finish_reason="stop", http_status=200, n_retries=0,
        messages=_messages(0), response="The answer is 4.", reasoning=None, tool_calls=None, scores=None)
    base.update(changes)
    return Attempt(**base)


class TestTranscript:
    def test_messages_tool_calls_reasoning_reply_error_and_scoring_in_order(self) -> None:
        call = [{"id": "c1", "type": "function", "function": {"name": "calc", "arguments": "{}"}}]
        messages = [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": [{"type": "text", "text": "part one"}, {"type": "image_url"}]},
            {"role": "assistant", "content": None, "tool_calls": call},
            {"role": "tool", "tool_call_id": "c1", "content": "4"},
        ]
        blocks = triage.transcript(_attempt(messages=messages, reasoning="hmm", error="late", http_status=500))
        assert [(b.kind, b.title, b.turn) for b in blocks] == [
            ("system", "system", 0), ("user", "user", 0), ("tool", "assistant tool call", 1),
            ("tool", "output of calc (c1; 1 line)", 1), ("reasoning", "reasoning", 2),
            ("assistant", "assistant reply (finish: stop)", 2), ("error", "error (HTTP 500, 0 retries)", 0),
            ("scoring", "scoring", 0)]
        assert blocks[1].text == "part one\n[image without a URL]" and blocks[2].text == "calc"
        assert blocks[3].foldable and not blocks[3].folded  # one line: it opens unfolded
        assert "extracted: '4'" in blocks[-1].text and '"normalized_extracted": "4"' in blocks[-1].text

    def test_an_agents_tool_results_say_which_tool_ran_on_which_turn_and_how_it_ended(self) -> None:
        calls = [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "x"}'}},
                 {"id": "c2", "type": "function", "function": {"name": "file_write", "arguments": "{}"}}]
        messages = [{"role": "user", "content": "do it"}, {"role": "assistant", "content": None, "tool_calls": calls},
                    {"role": "tool", "tool_call_id": "c1", "content": "exit code: 1"},
                    {"role": "tool", "tool_call_id": "c2", "content": "error"}]
        turns = [{"turn": 1, "tool_calls": [
            {"id": "c1", "name": "bash", "exit_code": 1, "error": None, "turn": 1, "truncated": True},
            {"id": "c2", "name": "file_write", "exit_code": None, "error": "timeout", "turn": 1}]}]
        titles = [b.title for b in triage.conversation(_attempt(messages=messages, turns=turns))]
        assert titles == ["user", "assistant tool calls (2)", "output of bash (c1; turn 1, exit 1, output cut; 1 line)",
                          "output of file_write (c2; turn 1, error timeout; 1 line)", "assistant reply (finish: stop)"]

    def test_a_tool_call_reads_as_the_command_a_person_would_type(self) -> None:
        assert triage.call_line("bash", '{"cmd": "ls -la"}') == "bash: ls -la"  # one string argument: itself
        assert triage.call_line("write", '{"path": "a.txt", "text": "two words", "n": 3}') == (
            'write: path=a.txt text="two words" n=3')  # several: key=value, quoted only when needed
        assert triage.call_line("ls", "{}") == "ls" and triage.call_line("ls", "") == "ls"
        assert triage.call_line("x", "not json {") == "x: not json {"  # as sent, never a traceback
        assert triage.call_line("x", {"cmd": "echo \"hi\"\nls"}) == 'x: echo "hi"\nls'  # no double escaping

    def test_long_tool_output_opens_folded(self) -> None:
        short, long = (triage.Block("tool", "output", "\n".join(["x"] * n), foldable=True) for n in (12, 13))
        assert not short.folded and long.folded
        assert not triage.Block("user", "user", "\n".join(["x"] * 50)).folded  # only tool output folds

    def test_turns_cut_the_conversation_at_each_model_call(self) -> None:
        calls = [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls"}'}}]
        messages = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "looking", "tool_calls": calls},
                    {"role": "tool", "tool_call_id": "c1", "content": "a.py"}]
        parts = triage.turns(triage.conversation(_attempt(messages=messages, response="done")))
        assert [label for label, _ in parts] == ["prompt", "turn 1", "turn 2"]
        assert parts[1][1] == ("── assistant ──\nlooking\n── assistant tool call ──\nbash: ls\n"
                               "── output of bash (c1; 1 line) ──\na.py")

    def test_a_step_with_no_reply_has_no_reply_block(self) -> None:
        blocks = triage.conversation(_attempt(response=None, error="HTTP 500"))
        assert [b.kind for b in blocks] == ["system", "user"]


class TestPairs:
    def test_the_default_pair_is_a_pass_and_a_fail_else_the_first_two(self) -> None:
        a, b, c = _attempt(repeat=0, passed=False), _attempt(repeat=1, passed=False), _attempt(repeat=2)
        pair = triage.default_pair([a, b, c])
        assert pair is not None and (pair[0].repeat, pair[1].repeat) == (2, 0)
        pair = triage.default_pair([a, b])
        assert pair is not None and (pair[0].repeat, pair[1].repeat) == (0, 1)
        assert triage.default_pair([a]) is None

    def test_the_counterpart_in_another_run_prefers_the_opposite_outcome(self, store: Any) -> None:
        detail = triage.task_detail(store, RUN, 1)
        assert detail is not None
        other = triage.counterpart(store, detail.attempts[1], OTHER)  # a failure here, a pass there
        assert other is not None and (other.run_id, other.passed) == (OTHER, True)
        missing = triage.counterpart(store, _attempt(task_id="not-there"), OTHER)
        assert missing is None


def _side(rows: list[triage.DiffRow], side: str) -> list[str]:
    return ["".join(s.text for s in getattr(r, side)) for r in rows]


class TestWordDiff:
    def test_identical_texts_have_no_divergence(self) -> None:
        diff = triage.word_diff("a b\nc", "a b\nc")
        assert diff.first_divergence is None and diff.changed_rows == []
        assert all(not r.changed for r in diff.rows)

    def test_a_changed_word_is_marked_and_the_rest_of_its_line_is_not(self) -> None:
        diff = triage.word_diff("same\nThe answer is 42.\nend", "same\nThe answer is 41.\nend")
        assert diff.first_divergence == 1 and diff.changed_rows == [1]
        row = diff.rows[1]
        assert row.left == (Span("The answer is ", "same"), Span("42", "removed"), Span(".", "same"))
        assert row.right == (Span("The answer is ", "same"), Span("41", "added"), Span(".", "same"))

    def test_inserted_lines_face_an_empty_side_and_alignment_holds(self) -> None:
        a, b = "one\ntwo\nthree", "one\nnew line\ntwo\nthree"
        diff = triage.word_diff(a, b)
        assert diff.first_divergence == 1
        assert _side(diff.rows, "left") == ["one", "", "two", "three"]
        assert _side(diff.rows, "right") == ["one", "new line", "two", "three"]
        assert diff.rows[1].left == () and diff.rows[1].right == (Span("new line", "added"),)

    def test_both_texts_are_reconstructed_exactly_from_their_side(self) -> None:
        a = "Let me think.\nFirst 3 + 4 = 7.\nSo the answer is 7.\nDone."
        b = "Let me think carefully.\nFirst 3 + 4 = 8.\nThe answer is 8.\nDone."
        diff = triage.word_diff(a, b)
        assert "\n".join(line for line, r in zip(_side(diff.rows, "left"), diff.rows, strict=True)
                         if r.left or not r.changed) == a
        assert "\n".join(line for line, r in zip(_side(diff.rows, "right"), diff.rows, strict=True)
                         if r.right or not r.changed) == b
        assert diff.first_divergence == 0

    def test_separate_changes_are_separate_stops(self) -> None:
        lines = [f"line {i}" for i in range(20)]
        changed = [*lines[:5], "line five", *lines[6:15], "line fifteen", *lines[16:]]
        diff = triage.word_diff("\n".join(lines), "\n".join(changed))
        assert diff.changed_rows == [5, 15] and diff.first_divergence == 5

    def test_huge_changed_blocks_fall_back_to_whole_lines(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(triage.diff, "_MAX_WORD_DIFF_TOKENS", 3)
        diff = triage.word_diff("a b c d", "a b c e")
        assert diff.rows[0].left == (Span("a b c d", "removed"),)
        assert diff.rows[0].right == (Span("a b c e", "added"),)

    def test_a_long_rewritten_block_is_compared_line_pair_by_line_pair(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(triage.diff, "_MAX_WORD_DIFF_TOKENS", 6)
        diff = triage.word_diff("one two\nthree four\nfive", "one 2\nthree four!")
        assert [r.left for r in diff.rows] == [
            (Span("one ", "same"), Span("two", "removed")), (Span("three four", "same"),), (Span("five", "removed"),)]
        assert [r.right for r in diff.rows] == [
            (Span("one ", "same"), Span("2", "added")), (Span("three four", "same"), Span("!", "added")), ()]

    def test_long_rewritten_prose_is_diffed_in_well_under_a_second(self) -> None:
        """A regression test: 200 rewritten lines took seconds when diffed as one block of words."""
        import random
        import time

        rng = random.Random(0)
        words = ["the", "model", "said", "x", "is", "seven", "because", "twelve", "minus", "five", "is", "seven"]
        a, b = ("\n".join(" ".join(rng.choice(words) for _ in range(15)) for _ in range(200)) for _ in range(2))
        started = time.perf_counter()
        diff = triage.word_diff(a, b)
        assert time.perf_counter() - started < 1.0 and len(diff.rows) == 200


class TestTurnDiff:
    def test_turn_i_faces_turn_i_so_a_longer_first_turn_does_not_shift_the_rest(self) -> None:
        scaffold = "\n".join(f"setup line {n}" for n in range(5))
        a = [("prompt", scaffold), ("turn 1", "ls\na.py"), ("turn 2", "The answer is: 1")]
        b = [("prompt", scaffold), ("turn 1", "ls\na.py\nb.py\nc.py"), ("turn 2", "The answer is: 1")]
        diff = triage.turn_diff(a, b)
        headings = [i for i, r in enumerate(diff.rows) if r.left and r.left[0].text.startswith("═══")]
        assert [diff.rows[i].left[0].text for i in headings] == ["═══ prompt ═══", "═══ turn 1 ═══", "═══ turn 2 ═══"]
        changed = [i for i, r in enumerate(diff.rows) if r.changed]
        assert changed and all(headings[1] < i < headings[2] for i in changed)  # turn 2 matches turn 2: unchanged
        assert diff.first_divergence == changed[0] and diff.changed_rows == [changed[0]]

    def test_a_turn_one_side_never_took_is_all_removed_or_added(self) -> None:
        diff = triage.turn_diff([("prompt", "q")], [("prompt", "q"), ("turn 1", "extra\nwork")])
        assert _side(diff.rows[-2:], "right") == ["extra", "work"] and _side(diff.rows[-2:], "left") == ["", ""]
        assert all(s.kind == "added" for r in diff.rows[-2:] for s in r.right)
        assert diff.changed_rows == [len(diff.rows) - 2]


class TestScoringDifference:
    def test_spells_out_outcome_answers_and_details(self) -> None:
        wrong = _attempt(passed=False, reward=0.0, extracted_answer="5",
                         scoring_details={"method": "exact", "normalized_extracted": "5"})
        lines = triage.scoring_difference(_attempt(), wrong)
        assert lines == ["outcome: pass (reward 1) → wrong (reward 0)", "extracted answer: '4' → '5'",
                         "expected answer (both): '4'", "details.normalized_extracted: '4' → '5'"]

    def test_a_failure_category_and_an_error_are_named(self) -> None:
        failed = _attempt(passed=False, reward=0.0, extracted_answer=None, failure_category="timeout",
                          error="timed out", scoring_details=None)
        lines = triage.scoring_difference(_attempt(), failed)
        assert "outcome: pass (reward 1) → timeout (reward 0)" in lines
        assert "error: — → timed out" in lines

    def test_two_attempts_scored_alike(self) -> None:
        assert triage.scoring_difference(_attempt(), _attempt(repeat=1)) == ["scored the same"]


class TestSql:
    def test_a_query_returns_columns_and_rows_up_to_the_limit(self, store: Any) -> None:
        result = triage.run_sql(store, "SELECT run_id FROM runs ORDER BY run_id")
        assert (result.columns, result.rows, result.truncated) == (["run_id"], [(RUN,), (OTHER,)], False)
        cut = triage.run_sql(store, "SELECT * FROM range(10)", limit=3)
        assert (len(cut.rows), cut.truncated) == (3, True)

    def test_a_bad_query_raises_a_duckdb_error_that_reads_on_one_line(self, store: Any) -> None:
        with pytest.raises(duckdb.Error) as err:
            triage.run_sql(store, "SELEC 1")
        assert "\n" not in triage.one_line(err.value) and "syntax error" in triage.one_line(err.value)

    def test_named_queries_are_the_store_query_files(self) -> None:
        queries = triage.named_queries()
        assert {"runs", "sometimes_pass", "failures", "wrong_answers"} <= set(queries)
        assert "FROM task_stats" in queries["sometimes_pass"]


class TestLive:
    def test_a_run_being_written_shows_progress_failures_and_latest_failures(self, tmp_path: Path) -> None:
        path = tmp_path / "nel.duckdb"
        _write(path, RUN, finish=False)  # the writer is this (live) process: the run reads as running
        snap = triage.live_snapshot(open_store(path), RUN)
        assert snap is not None and snap.run.status == "running"
        assert snap.run.finished_at is None and snap.run.last_step_at is not None and snap.run.duration_s
        assert [(s.shard_idx, s.status, s.done, s.expected) for s in snap.shards] == [(0, "running", 12, 15)]
        assert snap.failures == {"wrong": 4, "server_error": 2, "format_error": 1, "timeout": 1}
        assert [(e.task_idx, e.repeat) for e in snap.latest[:2]] == [(3, 2), (3, 1)]
        assert triage.live_snapshot(open_store(path), "nope") is None

    def test_the_rate_meter_uses_the_last_window_of_samples(self) -> None:
        meter = triage.RateMeter(window_s=10)
        meter.add(0.0, 0, 0)
        assert meter.rates() is None
        meter.add(1.0, 10, 100)
        assert meter.rates() == (10.0, 100.0)
        for t in range(2, 30):
            meter.add(float(t), 10 + 5 * (t - 1), 100)
        steps, tokens = meter.rates()  # type: ignore[misc]
        assert steps == pytest.approx(5.0) and tokens == 0.0

    def test_a_finished_run_has_mean_rates_over_its_wall_time(self) -> None:
        start = datetime(2026, 1, 1)
        run = RunRow("r", "b", None, "complete", 1, 1, 100, 100, None, None, None, 0, 0, 5000, start,
                     start + timedelta(seconds=50), start, start)
        assert triage.average_rates(run) == (2.0, 100.0)
        assert triage.average_rates(RunRow("r", "b", None, "complete", 1, 1, 0, 0, None, None, None, 0, 0, 0, None,
                                           None, None, None)) is None
