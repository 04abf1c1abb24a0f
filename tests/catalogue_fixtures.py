"""The catalogue's upstream-schema fixtures as the bytes the hub serves.

``tests/fixtures/hub/<benchmark>/upstream.json`` holds a handful of rows written for the tests (not
copied from the benchmarks) and the file's path inside the dataset repository; this module writes them
in the upstream file format with the upstream column types (parquet with the dataset's Arrow schema,
the CSV header, JSON lines), so a converter, the hub cache and the loader see what they would see there.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

FIXTURES = Path(__file__).parent / "fixtures" / "hub"

_STRINGS = pa.list_(pa.string())
SCHEMAS: dict[str, pa.Schema] = {
    # cais/mmlu: `answer` is a ClassLabel, stored as int64.
    "mmlu": pa.schema([("question", pa.string()), ("subject", pa.string()), ("choices", _STRINGS),
                       ("answer", pa.int64())]),
    "mmlu_pro": pa.schema([("question_id", pa.int64()), ("question", pa.string()), ("options", _STRINGS),
                           ("answer", pa.string()), ("answer_index", pa.int64()), ("cot_content", pa.string()),
                           ("category", pa.string()), ("src", pa.string())]),
    "arc_challenge": pa.schema([("id", pa.string()), ("question", pa.string()),
                                ("choices", pa.struct([("text", _STRINGS), ("label", _STRINGS)])),
                                ("answerKey", pa.string())]),
    # rc.nocontext keeps the evidence columns, empty.
    "triviaqa": pa.schema([
        ("question", pa.string()), ("question_id", pa.string()), ("question_source", pa.string()),
        ("entity_pages", pa.struct([("doc_source", _STRINGS), ("filename", _STRINGS), ("title", _STRINGS),
                                    ("wiki_context", _STRINGS)])),
        ("search_results", pa.struct([("description", _STRINGS), ("filename", _STRINGS),
                                      ("rank", pa.list_(pa.int32())), ("title", _STRINGS), ("url", _STRINGS),
                                      ("search_context", _STRINGS)])),
        ("answer", pa.struct([("aliases", _STRINGS), ("normalized_aliases", _STRINGS),
                              ("matched_wiki_entity_name", pa.string()),
                              ("normalized_matched_wiki_entity_name", pa.string()),
                              ("normalized_value", pa.string()), ("type", pa.string()), ("value", pa.string())])),
    ]),
    "aime24": pa.schema([("id", pa.int64()), ("problem", pa.string()), ("solution", pa.string()),
                         ("answer", pa.string()), ("url", pa.string()), ("year", pa.string())]),
}
_EMPTY: dict[str, dict[str, Any]] = {"triviaqa": {
    "entity_pages": {"doc_source": [], "filename": [], "title": [], "wiki_context": []},
    "search_results": {"description": [], "filename": [], "rank": [], "title": [], "url": [], "search_context": []},
}}
"""Columns the fixture rows leave out because upstream holds them empty (rc.nocontext has no evidence)."""


def description(name: str) -> dict[str, Any]:
    """The fixture's JSON description: ``path`` in the repository, ``rows`` (and a CSV's ``columns``)."""
    loaded: dict[str, Any] = json.loads((FIXTURES / name / "upstream.json").read_text(encoding="utf-8"))
    return loaded


def upstream_rows(name: str) -> list[dict[str, Any]]:
    """The fixture's rows as a reader of the upstream file returns them (a parquet round trip: types as stored)."""
    path, data = upstream_file(name)
    if path.endswith(".parquet"):
        rows: list[dict[str, Any]] = pq.read_table(io.BytesIO(data)).to_pylist()
        return rows
    if path.endswith(".csv"):
        return list(csv.DictReader(io.StringIO(data.decode("utf-8"))))
    return [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]


def upstream_file(name: str) -> tuple[str, bytes]:
    """``(path in the dataset repository, bytes)`` of benchmark ``name``'s fixture in its upstream format."""
    spec = description(name)
    path: str = spec["path"]
    rows = [{**_EMPTY.get(name, {}), **row} for row in spec["rows"]]
    if path.endswith(".parquet"):
        sink = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMAS[name]), sink)
        return path, sink.getvalue()
    if path.endswith(".csv"):
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=spec["columns"], lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        return path, text.getvalue().encode("utf-8")
    return path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8")


def hub_files(name: str) -> dict[str, bytes]:
    """The files to place in the hub cache for benchmark ``name`` (``hub_cache.place_dataset``'s ``files``)."""
    path, data = upstream_file(name)
    return {path: data}
