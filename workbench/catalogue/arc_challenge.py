"""ARC-Challenge (allenai/ai2_arc, config ARC-Challenge): options labelled A–E or 1–5, shown as letters."""

from __future__ import annotations

from typing import Any

from workbench.catalogue.choices import mcq_row
from workbench.errors import UsageError


def convert(row: dict[str, Any]) -> dict[str, Any]:
    """One upstream row (``id``, ``question``, ``choices: {text, label}``, ``answerKey``) → its frozen row.

    A few questions are labelled ``1``–``5`` upstream; every question is shown with letters in the upstream
    order, and the answer is the letter at the answer key's position. The category is the exam the question
    comes from, the prefix of its id (``Mercury``, ``NYSEDREGENTS``, ``MCAS``, ...).
    """
    labels = [str(label).strip() for label in row["choices"]["label"]]
    key = str(row["answerKey"]).strip()
    if key not in labels:
        raise UsageError(f"ARC question {row['id']}: answerKey {key!r} is not one of its labels {labels}")
    exam = str(row["id"]).split("_", 1)[0]
    return mcq_row(row["question"], list(row["choices"]["text"]), labels.index(key), category=exam, id=row["id"])
