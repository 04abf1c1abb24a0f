"""LLM-as-judge: the prompt a judge model sees and the strict reading of its verdict.

The judge call itself belongs to the engine (it is a model call, made by the engine's
workers); this module holds what can be tested without a model. A verdict is read
strictly: the judge's last non-empty line must be exactly ``VERDICT: CORRECT`` or
``VERDICT: INCORRECT`` (case and a final full stop aside), and no earlier line may give
a different verdict. Anything else is "no verdict", which scores 0 and says why: a
judge that rambles is never taken to mean "correct". An empty response is never sent
to the judge at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PLACEHOLDERS = ("{question}", "{expected}", "{response}")

QUESTION_MARK = "[QUESTION]"
REFERENCE_MARK = "[REFERENCE ANSWER]"
RESPONSE_MARK = "[MODEL ANSWER]"
END_MARK = "[END OF MODEL ANSWER]"

DEFAULT_TEMPLATE = f"""You are grading an answer to a question against a reference answer.

{QUESTION_MARK}
{{question}}

{REFERENCE_MARK}
{{expected}}

{RESPONSE_MARK}
{{response}}
{END_MARK}

The model's answer is correct when its final answer agrees with the reference answer in substance; \
extra explanation is fine, a different, hedged or missing final answer is not. Explain briefly, then \
end with a line that is exactly "VERDICT: CORRECT" or "VERDICT: INCORRECT"."""

_VERDICT_LINE = re.compile(r"^\s*\**\s*verdict\s*:\s*\**\s*(correct|incorrect)\s*\**\s*\.?\s*$", re.IGNORECASE)
_MENTION = re.compile(r"verdict\s*:\s*\**\s*(correct|incorrect)\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Verdict:
    """``correct`` is ``None`` when the judge gave no readable verdict; ``reason`` says why."""

    correct: bool | None
    reason: str


def check_template(template: str) -> str | None:
    """Why ``template`` cannot be used (``None`` when it can): it must show the judge the response."""
    if "{response}" not in template:
        return "a judge prompt must contain {response}, where the model's answer goes"
    return None


def render_prompt(template: str, *, question: str, expected: str, response: str) -> str:
    """Fill the placeholders literally (no ``str.format``: answers and questions contain braces)."""
    return template.replace("{question}", question).replace("{expected}", expected).replace("{response}", response)


def parse_verdict(text: str) -> Verdict:
    """Read the judge's reply strictly; see the module docstring."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return Verdict(None, "empty judge reply")
    last = _VERDICT_LINE.match(lines[-1])
    if last is None:
        return Verdict(None, "the judge's last line is not 'VERDICT: CORRECT' or 'VERDICT: INCORRECT'")
    correct = last.group(1).lower() == "correct"
    mentioned = {m.group(1).lower() == "correct" for m in _MENTION.finditer("\n".join(lines[:-1]))}
    if mentioned - {correct}:
        return Verdict(None, "the judge gave conflicting verdicts")
    return Verdict(correct, "judged correct" if correct else "judged incorrect")


def sections(prompt: str) -> tuple[str, str, str] | None:
    """(question, reference, response) from a prompt built on ``DEFAULT_TEMPLATE``; ``None`` otherwise."""
    try:
        q_at = prompt.index(QUESTION_MARK)
        ref_at = prompt.index(REFERENCE_MARK, q_at)
        resp_at = prompt.index(RESPONSE_MARK, ref_at)
        end_at = prompt.rindex(END_MARK)
    except ValueError:
        return None
    if end_at < resp_at:
        return None
    question = prompt[q_at + len(QUESTION_MARK):ref_at].strip()
    reference = prompt[ref_at + len(REFERENCE_MARK):resp_at].strip()
    response = prompt[resp_at + len(RESPONSE_MARK):end_at].strip()
    return question, reference, response
