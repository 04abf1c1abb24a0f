"""MATH-500 (HuggingFaceH4/MATH-500): the 500-problem subset of MATH from OpenAI's "Let's Verify Step by Step"."""

from __future__ import annotations

from typing import Any


def convert(row: dict[str, Any]) -> dict[str, Any]:
    """One upstream row (``problem``, ``solution``, ``answer``, ``subject``, ``level`` 1–5, ``unique_id``) → its
    frozen row; the subject (``Algebra``, ``Precalculus``, ...) is the category and the level is kept beside it."""
    return {
        "problem": str(row["problem"]).strip(),
        "solution": str(row["solution"]).strip(),
        "answer": str(row["answer"]).strip(),
        "category": row["subject"],
        "level": int(row["level"]),
        "unique_id": row["unique_id"],
    }
