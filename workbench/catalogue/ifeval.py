"""IFEval (google/IFEval): one upstream row of ``ifeval_input_data.jsonl`` → the frozen row ``benchmarks/ifeval``
reads.

The frozen row keeps the prompt, the instructions with their arguments (``None`` arguments dropped: the hub's
parquet view fills every argument of every instruction with nulls), the instructions as one JSON text (the
expected answer the checkers and the mock read) and the group of the first instruction (``detectable_format``,
``length_constraints``, ...) as the row's category.
"""

from __future__ import annotations

from typing import Any

import orjson


def convert(row: dict[str, Any]) -> dict[str, Any] | None:
    ids = [str(i) for i in row["instruction_id_list"]]
    kwargs = [{k: v for k, v in dict(k or {}).items() if v is not None} for k in row["kwargs"]]
    if not ids or len(ids) != len(kwargs):
        return None
    return {
        "key": int(row["key"]),
        "prompt": str(row["prompt"]),
        "instruction_id_list": ids,
        "kwargs": kwargs,
        "instructions": instructions_text(ids, kwargs),
        "category": ids[0].split(":", 1)[0],
    }


def instructions_text(ids: list[str], kwargs: list[dict[str, Any]]) -> str:
    """The instructions as one canonical JSON text: what a step's expected answer shows."""
    return orjson.dumps({"instruction_id_list": ids, "kwargs": kwargs}, option=orjson.OPT_SORT_KEYS).decode()
