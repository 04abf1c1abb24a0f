"""What the mock model says: a worked solution with a final answer, or a plausible way to be wrong.

The form of a reply follows the benchmark's scorer (``Task.scorer``): multiple-choice
benchmarks get a line of reasoning and "The answer is (C)." (a different letter when
wrong); short-answer benchmarks (exact, normalized, f1) get the bare answer (another
problem's answer when wrong); code benchmarks (``code_execution``) get a sentence and a
```` ```python ```` block holding the complete reference function (when wrong: the same
signature and docstring with a body that returns a wrong constant, or code cut off
mid-function); everything else gets the numeric form below. Code replies are never
checked with ``verify``: scoring them needs a sandbox.

A correct numeric attempt is the task's worked solution (calculator annotations such as
``<<16-3-4=9>>`` stripped) followed by a final line in one of
``FINAL_FORMATS``. A wrong attempt is, by hash, a wrong number after the same
kind of marker (never equal to the answer), reasoning cut off without a final
answer (finish reason "length"), a refusal, or an empty reply. Everything is
decided by the attempt's ``choice`` bits, so the same attempt always reads the
same. Texts that depend only on the task are cached per task.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from workbench.mock.answers import CODE_SCORERS, JUDGED_SCORERS, SANDBOX_SCORERS, SHORT_ANSWER_SCORERS, Task
from workbench.mock.code_replies import is_python, stubbed_functions
from workbench.mock.ifeval_replies import right_reply, wrong_reply
from workbench.mock.maths import VARIANTS, wrong_expression
from workbench.mock.simpleqa_replies import simpleqa_answer
from workbench.mock.skill import SkillProfile
from workbench.scoring.aliases import split_aliases

FINAL_FORMATS: tuple[str, ...] = ("The answer is: {}", "#### {}", "\\boxed{{{}}}", "Answer: {}")
REFUSAL = "I'm sorry, but I can't help with that."
GENERIC_REPLY = (
    "Hello! I am the nel workbench's built-in mock model. I only know the questions of the "
    "built-in benchmarks, and this prompt is not one of them."
)
CHARS_PER_TOKEN = 4

# Shares of wrong attempts, in permille: refusal, then empty, then cut-off reasoning; the rest
# give a wrong number after a final-answer marker.
_REFUSAL_UNTIL, _EMPTY_UNTIL, _CUT_OFF_UNTIL = 30, 50, 300

MC_REASONING = "Let's check each option against the question."
MC_FINAL = "The answer is ({})."
SHORT_FORMATS: tuple[str, ...] = ("{}", "{}.", "**{}**")
"""Short answers as a model might write them; the exact scorer only ever gets the first."""

CODE_INTROS: tuple[str, ...] = (
    "Here is the completed function.",
    "Here is a complete implementation:",
    "Sure. The function below does what the docstring asks.",
)
WRONG_BODIES: tuple[str, ...] = ("return None", "return 0", "return []", 'return ""')
"""Bodies of the mock's wrong functions: plausible-looking, and wrong for any real HumanEval problem."""

_ANNOTATION = re.compile(r"<<[^<>]*>>")
_OPTION_LINE = re.compile(r"^\(?([A-J])[).]\s", re.MULTILINE)
BOXED_FORMAT = FINAL_FORMATS.index("\\boxed{{{}}}")
"""The final line of a ``math`` benchmark's replies: its prompts ask for the answer in ``\\boxed{}``."""
_OPENER = "Let's work through this step by step.\n"


@dataclass(frozen=True, slots=True)
class Completion:
    """A reply and why it ended: ``"stop"`` (complete) or ``"length"`` (cut off)."""

    text: str
    finish_reason: str = "stop"


def count_tokens(text: str) -> int:
    """The mock's token count: about one token per four characters, at least one."""
    return max(1, (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN)


def apply_limits(completion: Completion, max_tokens: int | None, stop: Sequence[str] = ()) -> Completion:
    """Cut ``completion`` at the first ``stop`` string, then at ``max_tokens``, as an API would."""
    text, reason = completion.text, completion.finish_reason
    cut = -1
    for s in stop:
        if s:
            pos = text.find(s)
            if pos >= 0 and (cut < 0 or pos < cut):
                cut = pos
    if cut >= 0:
        text, reason = text[:cut], "stop"
    if max_tokens is not None and len(text) > max_tokens * CHARS_PER_TOKEN:
        text, reason = text[: max_tokens * CHARS_PER_TOKEN], "length"
    if text is completion.text and reason == completion.finish_reason:
        return completion
    return Completion(text, reason)


def strip_annotations(solution: str) -> str:
    """Remove GSM8K calculator annotations (``<<16-3-4=9>>``) from a worked solution."""
    return _ANNOTATION.sub("", solution).strip()


def count_options(prompt: str) -> int:
    """How many lettered options (``A) …``, ``(B) …``, ``C. …`` lines) a multiple-choice prompt offers: the
    letters from A that are all there (4 when none are found)."""
    found = set(_OPTION_LINE.findall(prompt))
    n = 0
    while n < 10 and chr(ord("A") + n) in found:
        n += 1
    return n if n >= 2 else 4


def wrong_answer(answer: str, choice: int, options: int = 4) -> str | None:
    """A plausible wrong final answer, never equal to ``answer``; ``None`` when none can be made.

    Numbers are off by a little, ten times too big, or missing a digit; a
    multiple-choice letter becomes another of the ``options`` letters offered.
    """
    value = _parse_number(answer)
    if value is None:
        if len(answer) == 1 and "A" <= answer <= "Z":
            letters = max(options, ord(answer) - ord("A") + 1)
            return chr(ord("A") + (ord(answer) - ord("A") + 1 + choice % (letters - 1)) % letters)
        return None
    variant = (choice >> 20) % 3
    digits = str(abs(value)) if value == value.to_integral_value() else ""
    if variant == 1 and value != 0:
        wrong = value * 10
    elif variant == 2 and digits.isdigit() and len(digits) >= 2:
        drop = (choice >> 32) % len(digits)
        wrong = Decimal(digits[:drop] + digits[drop + 1 :]) * (-1 if value < 0 else 1)
    else:
        delta = 1 + (choice >> 24) % 9
        wrong = value - delta if (choice >> 40) & 1 and value - delta >= 0 else value + delta
    if wrong == value:  # cannot happen with the variants above; kept as the guarantee
        wrong = value + 1
    return str(wrong)


def _parse_number(answer: str) -> Decimal | None:
    text = answer.strip().replace(",", "").lstrip("$")
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


class _TaskTexts:
    """The parts of a task's replies that do not depend on the attempt."""

    __slots__ = ("correct", "options", "reasoning", "truncated", "wrong_maths")

    def __init__(self, task: Task) -> None:
        self.options = count_options(task.prompt) if task.scorer == "multiple_choice" else 0
        self.reasoning = strip_annotations(task.solution) if task.solution else ""
        self.truncated = _cut_before_answer(self.reasoning, task.answer)
        if _scores_correct(task, self.truncated):
            # e.g. the scorer's last-number fallback reads "36/3" as the answer 12: stop before any number
            first_digit = next((i for i, ch in enumerate(self.truncated) if ch.isdigit()), None)
            self.truncated = _word_cut(self.truncated, first_digit)
            if _scores_correct(task, self.truncated):
                self.truncated = _OPENER.rstrip()
        self.correct: list[str | None] = [None] * len(FINAL_FORMATS)
        self.wrong_maths: dict[int, str | None] = {}


def _cut_before_answer(reasoning: str, answer: str) -> str:
    """The first half of ``reasoning`` at most, ending before the answer first appears in it."""
    cut = len(reasoning) // 2
    for needle in (answer, answer.replace(",", "")):
        pos = reasoning.find(needle) if needle else -1
        if 0 <= pos < cut:
            cut = pos
    return _OPENER + _word_cut(reasoning, cut)


def _word_cut(text: str, cut: int | None) -> str:
    """``text`` up to ``cut``, backed off to the previous space so no word or number is split."""
    if cut is None:
        return text
    space = text.rfind(" ", 0, cut)
    return text[: space if space > 0 else cut].rstrip()


def _scores_correct(task: Task, text: str) -> bool:
    return task.verify is not None and task.verify(text, task.answer).reward > 0


class Responder:
    """Turns (task, request seed, attempt) into the mock's reply under one skill profile."""

    def __init__(self, skill: SkillProfile) -> None:
        self.skill = skill
        self._texts: dict[str, _TaskTexts] = {}

    def respond(self, task: Task | None, request_seed: object = None, attempt: object = 0) -> Completion:
        """The reply to ``task`` (``None``: an unknown prompt, answered generically)."""
        if task is None:
            return Completion(GENERIC_REPLY)
        if task.scorer in SANDBOX_SCORERS:  # an agent's task asked without tools (the agent turns: mock.agent)
            return Completion("This task needs tools (a sandbox to work in), and none were offered.")
        verdict = self.skill.attempt(task.key, request_seed, attempt)
        choice = verdict.choice
        if task.scorer in CODE_SCORERS:
            return _code(task, verdict.correct, choice)
        if task.scorer in JUDGED_SCORERS:  # SimpleQA: the answer, another's answer, or "I don't know."
            return Completion(simpleqa_answer(task, verdict.correct, choice))
        if task.scorer == "ifeval":  # the answer is the instructions: text that follows them, or breaks one
            return Completion(right_reply(task.answer) if verdict.correct else wrong_reply(task.answer, choice))
        texts = self._texts.get(task.key)
        if texts is None:
            texts = self._texts[task.key] = _TaskTexts(task)
        if task.scorer == "multiple_choice":
            return _multiple_choice(task, verdict.correct, choice, texts.options)
        if task.scorer in SHORT_ANSWER_SCORERS:
            return _short_answer(task, verdict.correct, choice)
        fmt = BOXED_FORMAT if task.scorer == "math" else choice % len(FINAL_FORMATS)
        if verdict.correct:
            text = texts.correct[fmt]
            if text is None:
                final = FINAL_FORMATS[fmt].format(task.answer)
                text = texts.correct[fmt] = f"{texts.reasoning}\n{final}" if texts.reasoning else final
            return Completion(text)
        mode = (choice >> 8) % 1000
        if mode < _REFUSAL_UNTIL:
            return Completion(REFUSAL)
        if mode < _EMPTY_UNTIL:
            return Completion("")
        wrong = wrong_answer(task.answer, choice) if mode >= _CUT_OFF_UNTIL else None
        if wrong is None and mode >= _CUT_OFF_UNTIL and task.scorer == "math":  # \frac{3}{4}, 9\pi, (1, 2)
            variant = (choice >> 24) % VARIANTS
            if variant not in texts.wrong_maths:
                texts.wrong_maths[variant] = wrong_expression(task.answer, variant, task.verify, texts.truncated)
            wrong = texts.wrong_maths[variant]
        if wrong is None:
            return Completion(texts.truncated, "length")
        return Completion(f"{texts.truncated}\n{FINAL_FORMATS[fmt].format(wrong)}")


def _wrong_mode(choice: int) -> str | None:
    """For a wrong attempt: "refusal", "empty", "cut_off" or ``None`` (a wrong answer)."""
    mode = (choice >> 8) % 1000
    if mode < _REFUSAL_UNTIL:
        return "refusal"
    if mode < _EMPTY_UNTIL:
        return "empty"
    return "cut_off" if mode < _CUT_OFF_UNTIL else None


def _multiple_choice(task: Task, correct: bool, choice: int, options: int = 4) -> Completion:
    if correct:
        return Completion(f"{MC_REASONING}\n{MC_FINAL.format(task.answer)}")
    mode = _wrong_mode(choice)
    if mode == "refusal":
        return Completion(REFUSAL)
    if mode == "empty":
        return Completion("")
    wrong = wrong_answer(task.answer, choice, options) if mode is None else None
    if wrong is None:
        return Completion(MC_REASONING, "length")
    return Completion(f"{MC_REASONING}\n{MC_FINAL.format(wrong)}")


def _short_answer(task: Task, correct: bool, choice: int) -> Completion:
    formats = SHORT_FORMATS if task.scorer != "exact" else SHORT_FORMATS[:1]
    fmt = formats[choice % len(formats)]
    answer = task.answer
    if task.scorer == "aliases":  # any alias is right: one of them, as a model would say it
        aliases = split_aliases(answer)
        answer = aliases[(choice >> 4) % len(aliases)]
    if correct:
        return Completion(fmt.format(answer))
    mode = _wrong_mode(choice)
    if mode == "refusal":
        return Completion(REFUSAL)
    if mode == "empty" or not task.distractors:
        return Completion("")
    wrong = task.distractors[(choice >> 16) % len(task.distractors)]
    if task.scorer == "aliases":  # another question's answer, unless it is also an alias of this one
        wrong = split_aliases(wrong)[0]
        if task.verify is not None and task.verify(wrong, task.answer).reward > 0:
            return Completion("")
    return Completion(fmt.format(wrong))


def _code(task: Task, correct: bool, choice: int) -> Completion:
    intro = CODE_INTROS[choice % len(CODE_INTROS)]
    if correct:
        return Completion(f"{intro}\n\n```python\n{task.answer.strip()}\n```")
    mode = _wrong_mode(choice)
    if mode == "refusal":
        return Completion(REFUSAL)
    if mode == "empty":
        return Completion("")
    if mode == "cut_off":
        lines = task.answer.strip("\n").splitlines()
        return Completion(f"{intro}\n\n```python\n" + "\n".join(lines[: max(1, len(lines) // 2)]), "length")
    wrong = (wrong_function(task.question, choice) if is_python(task.question)
             else stubbed_functions(task.answer, choice))  # MBPP's question is prose, not a signature
    return Completion(f"{intro}\n\n```python\n{wrong}\n```")


def wrong_function(problem: str, choice: int) -> str:
    """``problem`` (a signature and docstring) completed with a body that returns a wrong constant."""
    last = problem.rstrip().rsplit("\n", 1)[-1]
    indent = last[: len(last) - len(last.lstrip())] or "    "
    return f"{problem.rstrip()}\n{indent}{WRONG_BODIES[(choice >> 16) % len(WRONG_BODIES)]}"
