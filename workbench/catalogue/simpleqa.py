"""SimpleQA (basicv8vc/SimpleQA, ``simple_qa_test_set.csv``): one upstream row → the frozen row ``benchmarks/simpleqa``
reads.

Upstream's ``metadata`` column is a Python dict literal (``{'topic': 'Art', 'answer_type': 'Person', 'urls':
[...]}``), read with ``ast.literal_eval`` (never ``eval``); its topic is the row's category.
"""

from __future__ import annotations

import ast
from typing import Any


def convert(row: dict[str, Any]) -> dict[str, Any] | None:
    problem, answer = str(row["problem"]).strip(), str(row["answer"]).strip()
    if not problem or not answer:
        return None
    meta = _metadata(row.get("metadata"))
    return {
        "problem": problem,
        "answer": answer,
        "topic": str(meta.get("topic") or "unknown"),
        "answer_type": str(meta.get("answer_type") or "unknown"),
        "urls": [str(u) for u in meta.get("urls") or []],
    }


def _metadata(text: Any) -> dict[str, Any]:
    if isinstance(text, dict):
        return text
    try:
        value = ast.literal_eval(str(text))
    except (ValueError, SyntaxError):
        return {}
    return value if isinstance(value, dict) else {}
