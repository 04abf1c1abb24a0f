"""MMLU (cais/mmlu, config ``all``): a question, four choices and the index of the right one."""

from __future__ import annotations

from typing import Any

from workbench.catalogue.choices import mcq_row


def convert(row: dict[str, Any]) -> dict[str, Any]:
    """One upstream row (``question``, ``subject``, ``choices``, ``answer`` as 0–3) → its frozen row;
    the subject (``high_school_physics``) is the category."""
    return mcq_row(row["question"], list(row["choices"]), int(row["answer"]), category=row["subject"])
