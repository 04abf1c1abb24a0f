"""The mock model on SimpleQA: answering its questions, and grading them as simple-evals' judge would.

As a solver, a right attempt is the gold target; a wrong one is another question's answer of the same shape
(INCORRECT) or, now and then, "I don't know." (NOT_ATTEMPTED). As the judge, it reads the question, gold target
and predicted answer out of simple-evals' template and replies with the letter the template asks for: A when the
answer gives the target (``mock.judge.agrees``, the built-in scorers' rules), C when it declines or is empty,
B otherwise. Deterministic, and not a model of judging quality.
"""

from __future__ import annotations

import re

from workbench.mock.answers import Task

DONT_KNOW = "I don't know."
_DECLINES = re.compile(r"\b(i don'?t know|not sure|cannot answer|can'?t (help|answer)|no idea)\b", re.IGNORECASE)
_EXAMPLE = re.compile(r"```\nQuestion: (?P<question>.*)\nGold target: (?P<target>.*)\nPredicted answer: "
                      r"(?P<answer>.*)\n```", re.DOTALL)


def simpleqa_answer(task: Task, correct: bool, choice: int) -> str:
    if correct:
        return task.answer
    if (choice >> 8) % 4 == 0 or not task.distractors:
        return DONT_KNOW
    return task.distractors[(choice >> 16) % len(task.distractors)]


def simpleqa_grade(prompt: str) -> str | None:
    """The grading reply ("A", "B" or "C") to a prompt built on simple-evals' template; ``None`` if it is not one."""
    from workbench.mock.judge import agrees

    found = _EXAMPLE.search(prompt[prompt.rfind("```\nQuestion: "):])
    if found is None:
        return None
    answer, target = found["answer"].strip(), found["target"].strip()
    if not answer or _DECLINES.search(answer):
        return "C"
    return "A" if agrees(answer, target) else "B"
