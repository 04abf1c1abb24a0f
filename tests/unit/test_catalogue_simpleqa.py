"""SimpleQA from its upstream CSV: the converter, simple-evals' grader and metrics, and the mock on both sides."""

from __future__ import annotations

from pathlib import Path

import pytest
from catalogue_fixtures import frozen_environment, upstream_rows

from workbench.catalogue.simpleqa import convert
from workbench.engine.metrics import DEFAULT, JUDGE, MetricSpec, MetricSuite, check_judged
from workbench.environments.simpleqa import SimpleQAEnvironment
from workbench.errors import UsageError
from workbench.mock.answers import Task, with_distractors
from workbench.mock.judge import judge_reply
from workbench.mock.responder import Responder
from workbench.mock.simpleqa_replies import DONT_KNOW
from workbench.mock.skill import SkillProfile
from workbench.model.config import ModelConfig
from workbench.scoring.judge import render_prompt
from workbench.scoring.simpleqa import GRADER_TEMPLATE, GRADING, read_grade, simpleqa_figures

JUDGE_MODEL = ModelConfig(url="http://127.0.0.1:9/v1", model_id="judge")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> SimpleQAEnvironment:
    built = frozen_environment("simpleqa", tmp_path_factory.mktemp("simpleqa"))
    assert isinstance(built, SimpleQAEnvironment)
    return built


def test_the_csv_rows_convert_with_the_topic_read_from_upstreams_python_dict_metadata() -> None:
    row = upstream_rows("simpleqa")[0]
    out = convert(row)
    assert out == {"problem": "Who received the IEEE Frank Rosenblatt Award in 2010?", "answer": "Michio Sugeno",
                   "topic": "Science and technology", "answer_type": "Person",
                   "urls": ["https://en.wikipedia.org/wiki/IEEE_Frank_Rosenblatt_Award",
                            "https://ieeexplore.ieee.org/author/37271220500"]}


def test_metadata_that_is_not_a_literal_is_never_evaluated() -> None:
    out = convert({"metadata": "__import__('os').system('false')", "problem": "q?", "answer": "a"})
    assert out is not None and out["topic"] == "unknown"


def test_the_question_is_sent_alone_and_the_topic_is_the_category(env: SimpleQAEnvironment) -> None:
    seed = env.seed(2)
    assert seed.prompt == "What's the name of the women's liberal arts college in Cambridge, Massachusetts?"
    assert seed.expected_answer == "Radcliffe College" and seed.metadata["category"] == "Geography"


@pytest.mark.parametrize(("reply", "grade"), [
    ("A", "CORRECT"), ("B", "INCORRECT"), ("C", "NOT_ATTEMPTED"), (" b. ", "INCORRECT"), ("A: CORRECT", "CORRECT"),
    ("CORRECT", "CORRECT"), ("NOT ATTEMPTED", "NOT_ATTEMPTED"), ("not_attempted", "NOT_ATTEMPTED"),
    ("A: INCORRECT", None), ("The answer is correct, so A", None), ("", None), ("D", None),
])
def test_the_judges_reply_is_read_strictly(reply: str, grade: str | None) -> None:
    """simple-evals takes the first A/B/C anywhere ("CORRECT" → C) and defaults to NOT_ATTEMPTED; we do neither."""
    assert read_grade(reply) == grade


def test_a_correct_grade_scores_one_and_the_others_zero_with_the_grade_as_the_answer() -> None:
    for reply, reward in (("A", 1.0), ("B", 0.0), ("C", 0.0)):
        verdict = GRADING.verdict(reply)
        assert verdict is not None and verdict.reward == reward and verdict.extracted_answer == read_grade(reply)
    assert GRADING.verdict("I think A or B") is None


def test_the_figures_are_simple_evals_shares_accuracy_given_attempted_and_f1() -> None:
    figures = simpleqa_figures(["CORRECT"] * 3 + ["INCORRECT"] + ["NOT_ATTEMPTED"] * 4)
    assert figures["correct"] == 3 / 8 and figures["incorrect"] == 1 / 8 and figures["not_attempted"] == 0.5
    assert figures["correct_given_attempted"] == 0.75
    assert figures["f1"] == pytest.approx(2 * 0.75 * 0.375 / (0.75 + 0.375))
    assert simpleqa_figures([]) == {}


def test_the_template_is_simple_evals_with_the_workbenchs_placeholders() -> None:
    assert GRADER_TEMPLATE.startswith("Your job is to look at a question, a gold target, and a predicted answer")
    assert GRADER_TEMPLATE.endswith('Just return the letters "A", "B", or "C", with no text around it.')
    assert all(p in GRADER_TEMPLATE for p in ("{question}", "{expected}", "{response}"))


def test_the_mock_judge_grades_simple_evals_template_from_the_answer() -> None:
    def grade(response: str) -> str | None:
        return judge_reply(render_prompt(GRADER_TEMPLATE, question="Who engineered Abbey Road?",
                                         expected="Geoff Emerick", response=response))

    assert grade("Geoff Emerick") == "A" and grade("It was engineered by Geoff Emerick.") == "A"
    assert grade("Glyn Johns") == "B"
    assert grade("I don't know.") == "C" and grade("") == "C"


def test_the_mocks_answers_are_graded_correct_when_right_and_otherwise_when_wrong(env: SimpleQAEnvironment) -> None:
    tasks = with_distractors([
        Task("simpleqa", f"simpleqa:{env.seed(i).task_id}", i, env.seed(i).prompt, e.question, e.answer, None,
             scorer="simpleqa_grader") for i, e in enumerate(env.answer_key())])
    responder = Responder(SkillProfile(0))
    grades: dict[str, int] = {}
    for task in tasks:
        for attempt in range(8):
            correct = responder.skill.attempt(task.key, None, attempt).correct
            reply = responder.respond(task, None, attempt).text
            grade = judge_reply(render_prompt(GRADER_TEMPLATE, question=task.prompt, expected=task.answer,
                                              response=reply))
            assert (grade == "A") == correct, (task.answer, reply, grade)
            assert grade != "C" or reply == DONT_KNOW
            grades[str(grade)] = grades.get(str(grade), 0) + 1
    assert set(grades) == {"A", "B", "C"}


def test_without_a_judge_the_run_is_refused_before_any_model_call_saying_how_to_configure_one(
        env: SimpleQAEnvironment) -> None:
    with pytest.raises(UsageError, match=r"simpleqa is graded by an LLM judge: .*type: judge"):
        check_judged(env, None)
    with_default = MetricSuite(env, [MetricSpec("simpleqa_grader", DEFAULT), MetricSpec("j", JUDGE, judge=JUDGE_MODEL)])
    with pytest.raises(UsageError, match="include_defaults: false"):
        check_judged(env, with_default)
    check_judged(env, MetricSuite(env, [MetricSpec("j", JUDGE, judge=JUDGE_MODEL)]))
    with pytest.raises(UsageError, match="graded by an LLM judge"):
        env.verify("Michio Sugeno", "Michio Sugeno", idx=0)


def test_the_grader_template_is_part_of_the_datas_identity(env: SimpleQAEnvironment, tmp_path: Path) -> None:
    assert env.data_hash != super(SimpleQAEnvironment, env).data_hash
