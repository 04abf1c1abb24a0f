"""The mock model answers the knowledge and maths catalogue in each benchmark's own form.

The tasks are built as ``workbench.mock.answers.load_tasks`` builds them, from the benchmarks served from
their frozen fixture rows (``environment`` in test_catalogue_knowledge.py), so this runs without the hub.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from test_catalogue_knowledge import ALL, MATHS, MCQ, environment

from workbench.environments.dataset import DatasetEnvironment
from workbench.mock.answers import SHORT_ANSWER_SCORERS, Task, with_distractors
from workbench.mock.responder import REFUSAL, SHORT_FORMATS, Responder, count_options, wrong_answer
from workbench.mock.skill import SkillProfile
from workbench.scoring.aliases import split_aliases

ATTEMPTS = 24


def tasks_of(env: DatasetEnvironment) -> list[Task]:
    scorer = str(env.describe()["scorer"])
    found = [Task(benchmark=env.name, key=f"{env.name}:{env.seed(i).task_id}", index=i, prompt=env.seed(i).prompt,
                  question=entry.question, answer=entry.answer, solution=entry.solution, verify=env.verify,
                  scorer=scorer) for i, entry in enumerate(env.answer_key())]
    return with_distractors(found) if scorer in SHORT_ANSWER_SCORERS else found


@pytest.mark.parametrize("name", ALL)
def test_right_replies_score_one_and_wrong_ones_zero(name: str, tmp_path: Path) -> None:
    env = environment(name, tmp_path)
    responder = Responder(SkillProfile(3))
    outcomes: Counter[bool] = Counter()
    for task in tasks_of(env):
        for attempt in range(ATTEMPTS):
            correct = responder.skill.attempt(task.key, None, attempt).correct
            reply = responder.respond(task, None, attempt).text
            assert env.verify(reply, task.answer).reward == (1.0 if correct else 0.0), (task.index, attempt, reply)
            outcomes[correct] += 1
    assert outcomes[True] > 0 and outcomes[False] > 0


@pytest.mark.parametrize("name", MCQ)
def test_multiple_choice_replies_name_only_letters_the_question_offers(name: str, tmp_path: Path) -> None:
    env = environment(name, tmp_path)
    responder = Responder(SkillProfile(0))
    for task in tasks_of(env):
        offered = env.seed(task.index).prompt.rsplit("one of ", 1)[1].split(".", 1)[0]
        assert count_options(task.prompt) == len(offered)
        for attempt in range(ATTEMPTS):
            match = re.search(r"The answer is \(([A-J])\)\.$", responder.respond(task, None, attempt).text)
            assert match is None or match.group(1) in offered


@pytest.mark.parametrize("answer", ["A", "C", "E", "J"])
def test_a_wrong_letter_stays_within_the_options(answer: str) -> None:
    options = 10 if answer == "J" else 5
    letters = {wrong_answer(answer, choice, options) for choice in range(200)}
    assert answer not in letters and letters <= set("ABCDEFGHIJ"[:options])
    assert len(letters) == options - 1


@pytest.mark.parametrize("name", MATHS)
def test_math_replies_end_in_a_boxed_answer(name: str, tmp_path: Path) -> None:
    responder = Responder(SkillProfile(0))
    for task in tasks_of(environment(name, tmp_path)):
        for attempt in range(ATTEMPTS):
            completion = responder.respond(task, None, attempt)
            if responder.skill.attempt(task.key, None, attempt).correct:
                assert completion.text.endswith(f"\\boxed{{{task.answer}}}")
                if task.solution:
                    assert completion.text.startswith(task.solution)
            elif completion.finish_reason == "stop" and completion.text not in ("", REFUSAL):
                assert re.search(r"\n\\boxed\{.+\}$", completion.text)


def test_triviaqa_replies_are_one_alias_or_another_questions_answer(tmp_path: Path) -> None:
    responder = Responder(SkillProfile(0))
    tasks = tasks_of(environment("triviaqa", tmp_path))
    seen: Counter[str] = Counter()
    for task in tasks:
        aliases = split_aliases(task.answer)
        others = {split_aliases(t.answer)[0] for t in tasks if t is not task}
        for attempt in range(ATTEMPTS):
            reply = responder.respond(task, None, attempt).text
            said = {fmt.format(alias): alias for fmt in SHORT_FORMATS for alias in aliases}
            if responder.skill.attempt(task.key, None, attempt).correct:
                assert reply in said
                seen["alias" if said[reply] != aliases[0] else "canonical"] += 1
            elif reply and reply != REFUSAL:
                assert reply in {fmt.format(other) for fmt in SHORT_FORMATS for other in others}
                seen["other"] += 1
    assert seen["alias"] and seen["canonical"] and seen["other"]


def test_wrong_math_replies_to_non_numeric_answers_box_a_wrong_expression(tmp_path: Path) -> None:
    env = environment("math500", tmp_path)
    responder = Responder(SkillProfile(0))
    boxed: Counter[str] = Counter()
    for task in tasks_of(env):
        if task.answer.isdigit():
            continue
        for attempt in range(64):
            completion = responder.respond(task, None, attempt)
            if responder.skill.attempt(task.key, None, attempt).correct or completion.finish_reason != "stop":
                continue
            if completion.text.endswith("}") and "\\boxed{" in completion.text:
                assert env.verify(completion.text, task.answer).reward == 0.0
                assert task.answer in completion.text.rsplit("\\boxed{", 1)[1]
                boxed[task.answer] += 1
    assert len(boxed) >= 3, boxed  # of the four non-numeric answers (one task may rarely fail in these attempts)
