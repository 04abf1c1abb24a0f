"""The mock model as a judge: a deterministic grader for prompts built on the workbench's judge template.

When a request carries the default judge prompt (``workbench.scoring.judge.DEFAULT_TEMPLATE``),
the mock compares the model answer in it with the reference answer, the way the built-in
scorers would (a number, a choice letter, a normalised short answer, or the reference as the
final line's words), and replies with a line of reasoning and a strict verdict line. It lets
LLM-as-judge scoring run end to end without an LLM; it is not a model of judging quality.
"""

from __future__ import annotations

from workbench.mock.simpleqa_replies import simpleqa_grade
from workbench.scoring.judge import REFERENCE_MARK, sections
from workbench.scoring.multiple_choice import score_multiple_choice
from workbench.scoring.normalized import normalize_answer, score_normalized
from workbench.scoring.numeric import normalize_number, score_numeric
from workbench.scoring.simpleqa import NEW_EXAMPLE


def is_judge_prompt(prompt: str) -> bool:
    """A cheap test before parsing: the workbench's judge template, or SimpleQA's grader."""
    return REFERENCE_MARK in prompt or NEW_EXAMPLE in prompt


def judge_reply(prompt: str) -> str | None:
    """The verdict reply to a judge prompt; ``None`` when ``prompt`` is not one."""
    if NEW_EXAMPLE in prompt:
        return simpleqa_grade(prompt)
    found = sections(prompt)
    if found is None:
        return None
    _, reference, answer = found
    if agrees(answer, reference):
        return "The model's final answer agrees with the reference answer.\nVERDICT: CORRECT"
    return "The model's final answer does not agree with the reference answer.\nVERDICT: INCORRECT"


def agrees(answer: str, reference: str) -> bool:
    """Whether ``answer`` gives ``reference`` as its final answer, by the built-in scorers' rules."""
    if not answer.strip() or not reference.strip():
        return False
    ref = reference.strip()
    if normalize_number(ref) is not None:
        return score_numeric(answer, ref).reward >= 1.0
    if len(ref) == 1 and ref.isalpha():
        return score_multiple_choice(answer, ref).reward >= 1.0
    if score_normalized(answer, ref).reward >= 1.0:
        return True
    lines = [line for line in answer.splitlines() if line.strip()]
    last, want = normalize_answer(lines[-1]).split(), normalize_answer(ref).split()
    return bool(want) and any(last[i:i + len(want)] == want for i in range(len(last) - len(want) + 1))
