"""AIME 2025 (math-ai/aime25, the dataset lm-evaluation-harness's ``aime25`` task reads): 30 problems, no solutions."""

from __future__ import annotations

from typing import Any


def convert(row: dict[str, Any]) -> dict[str, Any]:
    """One upstream row (``id``, ``problem``, ``answer``) → its frozen row."""
    return {"problem": str(row["problem"]).strip(), "answer": str(row["answer"]).strip(), "id": row["id"]}
