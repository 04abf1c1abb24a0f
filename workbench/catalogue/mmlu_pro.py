"""MMLU-Pro (TIGER-Lab/MMLU-Pro): up to ten options A–J, the answer as a letter and as an index."""

from __future__ import annotations

from typing import Any

from workbench.catalogue.choices import LETTERS, mcq_row
from workbench.errors import UsageError


def convert(row: dict[str, Any]) -> dict[str, Any]:
    """One upstream row (``question_id``, ``question``, ``options``, ``answer``, ``answer_index``, ``category``,
    ``src``) → its frozen row. Some questions keep fewer than ten options upstream: only those are offered."""
    options = list(row["options"])
    index = int(row["answer_index"])
    if LETTERS[index : index + 1] != str(row["answer"]).strip():
        raise UsageError(f"MMLU-Pro question {row['question_id']}: answer {row['answer']!r} disagrees with "
                         f"answer_index {index}")
    return mcq_row(row["question"], options, index, category=row["category"], question_id=int(row["question_id"]),
                   src=row["src"])
