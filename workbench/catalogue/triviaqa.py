"""TriviaQA (mandarjoshi/trivia_qa, config rc.nocontext): a question and the aliases of its answer."""

from __future__ import annotations

from typing import Any

SEPARATOR = " | "
"""Between the aliases of ``answers``: the ``aliases`` scorer (``workbench.scoring.aliases``) splits on it. The
catalogue sits beside scoring in the layers, so it cannot import it; a test holds the two to the same string."""


def convert(row: dict[str, Any]) -> dict[str, Any] | None:
    """One upstream row (``question``, ``question_id``, ``question_source``, ``answer: {value, aliases, ...}``) →
    its frozen row: ``answer`` is the canonical value, ``answers`` every accepted form, canonical first
    (``"Sunset Boulevard | Sunset Blvd"``), which is what the ``aliases`` scorer reads. A row with no answer
    is dropped. An alias holding the separator itself cannot be written and is left out (the others stay)."""
    answer = row["answer"]
    value = str(answer.get("value") or "").strip()
    aliases = [value, *(str(a).strip() for a in answer.get("aliases") or ())]
    kept = [a for a in aliases if a and SEPARATOR.strip() not in a]
    if not kept:
        return None
    return {
        "question": str(row["question"]).strip(),
        "question_id": row["question_id"],
        "answer": kept[0],
        "answers": SEPARATOR.join(dict.fromkeys(kept)),
    }
