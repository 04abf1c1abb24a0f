"""Which nel task a Gym row is (``workbench.gym.pairing``), and the gym:// URL a Gym server needs."""

from __future__ import annotations

from typing import Any

import pytest

from workbench.environments import EvalEnvironment, VerifyResult, benchmark_names, get_environment, registry
from workbench.errors import UsageError
from workbench.gym.pairing import LineSpans, TaskResolver, UnpairedRows, benchmark_metric
from workbench.gym.url import parse_gym_url
from workbench.types import SeedResult

TWINS = "pairing-twins"


class _Twins(EvalEnvironment):
    """Two problems with the same prompt and different answers, and one of their own."""

    name = TWINS
    _problems = (("Pick a number.", "1", "id-one"), ("Pick a number.", "2", "id-two"), ("Say hi.", "hi", "id-hi"))

    def __len__(self) -> int:
        return len(self._problems)

    def seed(self, idx: int) -> SeedResult:
        prompt, expected, task_id = self._problems[idx]
        return SeedResult(prompt=prompt, messages=({"role": "user", "content": prompt},), expected_answer=expected,
                          task_id=task_id)

    def verify(self, response: str, expected: str, **metadata: Any) -> VerifyResult:
        return VerifyResult(float(response == expected), response)

    def describe(self) -> dict[str, Any]:
        return {"name": TWINS, "scorer": "exact_match", "size": len(self)}


@pytest.fixture(autouse=True)
def twins(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_Twins`` registered for this test only (a benchmark left registered would join other tests' lists)."""
    benchmark_names()  # the built-ins are in first
    monkeypatch.setitem(registry._REGISTRY, TWINS, _Twins)


class TestResolver:
    """A row's own task_id first, then its prompt among the benchmark's problems, else a reason."""

    def test_a_rows_own_task_id_is_kept_whatever_the_benchmark(self):
        assert TaskResolver(None).resolve({"task_id": "abc"}, None, None).task_id == "abc"

    def test_a_prompt_finds_the_id_the_native_engine_gave_that_problem(self):
        gsm8k = get_environment("gsm8k")
        seed = gsm8k.seed(7)
        found = TaskResolver("gsm8k").resolve({}, seed.prompt, None)
        assert (found.task_id, found.reason) == (seed.task_id, None)

    def test_the_expected_answer_tells_apart_problems_with_the_same_prompt(self):
        resolver = TaskResolver(TWINS)
        assert resolver.resolve({}, "Pick a number.", "2").task_id == "id-two"
        assert resolver.resolve({}, "Say hi.", None).task_id == "id-hi"
        unsure = resolver.resolve({}, "Pick a number.", "3")
        assert unsure.task_id is None and "2 pairing-twins problems the expected answer does not tell apart" in (
            unsure.reason or "")

    @pytest.mark.parametrize(("benchmark", "prompt", "reason"), [
        ("gsm8k", None, "no task_id and no prompt"),
        ("gsm8k", "What is love?", "the prompt is none of gsm8k's problems"),
        ("math_simple_agent", "What is 1 + 1?", "'math_simple_agent' is not a benchmark nel knows"),
        (None, "What is 1 + 1?", "no benchmark named to match the prompt against (name one with --benchmark)"),
    ])
    def test_a_row_that_cannot_be_paired_says_why(self, benchmark, prompt, reason):
        found = TaskResolver(benchmark).resolve({"task_id": {"taskset": "gym's own"}}, prompt, None)
        assert found.task_id is None and reason in (found.reason or "")


def test_the_metric_is_the_one_a_native_run_records():
    assert benchmark_metric("gsm8k") == "numeric"
    assert benchmark_metric(TWINS) == "exact_match"
    assert benchmark_metric("not-a-benchmark") is None


def test_line_spans_are_compact_and_bounded():
    spans = LineSpans()
    for line in (3, 4, 5, 6, 7, 12):
        spans.add(line)
    assert (str(spans), spans.count) == ("3-7, 12", 6)
    many = LineSpans()
    for line in range(1, 60, 2):
        many.add(line)
    assert str(many).endswith("23, ... (18 more spans)")
    assert str(UnpairedRows("r.jsonl", "12", 1, "why")) == "r.jsonl row 12: why"


class TestGymURLForAGymServer:
    """A Gym resources server needs its rows from here: data= says so, and the hint keeps the rest of the URL."""

    def test_data_alone_implies_the_native_protocol(self, tmp_path):
        (tmp_path / "rows.jsonl").write_text("{}\n")
        assert parse_gym_url("gym://h:80?data=rows.jsonl", cwd=tmp_path).protocol == "native"

    def test_data_with_the_evaluator_protocol_is_still_refused(self, tmp_path):
        (tmp_path / "rows.jsonl").write_text("{}\n")
        with pytest.raises(UsageError, match="only protocol=native reads local rows"):
            parse_gym_url("gym://h:80?protocol=evaluator&data=rows.jsonl", cwd=tmp_path)

    def test_the_native_form_of_a_url(self):
        assert parse_gym_url("gym://h:80/p?timeout=5").as_native() == "gym://h:80/p?protocol=native&data=ROWS.jsonl" \
            "&timeout=5"
