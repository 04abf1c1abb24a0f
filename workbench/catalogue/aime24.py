"""AIME 2024 (HuggingFaceH4/aime_2024): the 30 problems of AIME I and II 2024, integer answers 0–999."""

from __future__ import annotations

import re
from typing import Any

_CONTEST = re.compile(r"(\d{4})_AIME_(I{1,2})_Problems")


def convert(row: dict[str, Any]) -> dict[str, Any]:
    """One upstream row (``id``, ``problem``, ``solution``, ``answer``, ``url``, ``year``) → its frozen row; the
    category is the paper (``AIME 2024 I`` or ``II``), read from the AoPS wiki address the row cites."""
    url = str(row.get("url") or "")
    match = _CONTEST.search(url)
    return {
        "problem": str(row["problem"]).strip(),
        "solution": str(row.get("solution") or "").strip(),
        "answer": str(row["answer"]).strip(),
        "category": f"AIME {match.group(1)} {match.group(2)}" if match else "AIME 2024",
        "id": row["id"],
        "url": url,
    }
