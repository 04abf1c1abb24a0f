"""The catalogue's upstream-schema fixtures (``tests/fixtures/hub/<benchmark>/``) as the bytes the hub serves,
and the environments they make.

A fixture folder holds either
* ``upstream.json``: rows written for the tests (not copied from the benchmarks) and the file's path in the dataset
  repository, written here in the upstream format with the upstream column types (``SCHEMAS``: parquet with the
  dataset's Arrow schema, the CSV header, JSON lines);
* ``rows.json``: the rows, the path and the upstream Arrow schema by type name, written to parquet here;
* or the upstream files themselves at their paths in the repository (simpleqa's CSV, ifeval's JSONL).
So a converter, the hub cache and the loader see what they would see there. ``frozen_environment`` converts the
rows with the benchmark's ``[hub] convert`` and builds its environment over them, as the loader does once the data
is present.
"""

from __future__ import annotations

import csv
import importlib
import io
import json
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from workbench.environments.dataset import BenchmarkDefinition, DatasetEnvironment
from workbench.resources import benchmarks_dir

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


_TYPES: dict[str, pa.DataType] = {"string": pa.string(), "int32": pa.int32(), "int64": pa.int64(),
                                  "list<string>": pa.list_(pa.string())}



def description(name: str) -> dict[str, Any]:
    """The fixture's JSON description: ``path`` in the repository, ``rows`` (and a CSV's ``columns``)."""
    loaded: dict[str, Any] = json.loads((FIXTURES / name / "upstream.json").read_text(encoding="utf-8"))
    return loaded


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




def upstream_files(name: str) -> dict[str, bytes]:
    """Path in the dataset repo → bytes in upstream's format, for ``hub_cache.place_dataset``."""
    folder = FIXTURES / name
    if (folder / "upstream.json").exists():
        path, data = upstream_file(name)
        return {path: data}
    described = folder / "rows.json"
    if described.exists():
        spec = orjson.loads(described.read_bytes())
        schema = pa.schema([(column, _TYPES[kind]) for column, kind in spec["schema"].items()])
        sink = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(spec["rows"], schema=schema), sink)
        return {spec["path"]: sink.getvalue()}
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


hub_files = upstream_files
"""The files to place in the hub cache for benchmark ``name`` (``hub_cache.place_dataset``'s ``files``)."""


def upstream_rows(name: str) -> list[dict[str, Any]]:
    """The fixture's rows as a reader of the upstream files returns them (parquet round trip: types as stored)."""
    rows: list[dict[str, Any]] = []
    for path, data in upstream_files(name).items():
        if path.endswith(".parquet"):
            rows += pq.read_table(io.BytesIO(data)).to_pylist()
        elif path.endswith(".csv"):
            rows += list(csv.DictReader(io.StringIO(data.decode("utf-8"))))
        elif path.endswith((".jsonl", ".json")):
            rows += [orjson.loads(line) for line in data.splitlines() if line.strip()]
    return rows


def hub_table(name: str) -> dict[str, Any]:
    """The ``[hub]`` table of ``benchmarks/<name>/benchmark.toml``."""
    return dict(tomllib.loads((benchmarks_dir() / name / "benchmark.toml").read_text())["hub"])


def converter(name: str) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    module, _, function = hub_table(name)["convert"].partition(":")
    convert: Callable[[dict[str, Any]], dict[str, Any] | None] = getattr(importlib.import_module(module), function)
    return convert


def frozen_rows(name: str) -> list[dict[str, Any]]:
    convert = converter(name)
    return [out for row in upstream_rows(name) if (out := convert(row)) is not None]


def frozen_environment(name: str, tmp_path: Path) -> DatasetEnvironment:
    """Benchmark ``name`` over its fixture's converted rows, written as the frozen JSONL."""
    raw = tomllib.loads((benchmarks_dir() / name / "benchmark.toml").read_text())
    raw.pop("hub")
    target = raw.pop("environment", None)
    data = tmp_path / f"{name}.jsonl"
    data.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in frozen_rows(name)))
    fields = raw.get("metadata_fields", [])
    raw["metadata_fields"] = tuple(fields.items()) if isinstance(fields, dict) else tuple((f, f) for f in fields)
    definition = BenchmarkDefinition(dataset=data, **raw)
    if target is None:
        return DatasetEnvironment(definition)
    module, _, cls = target.partition(":")
    env: DatasetEnvironment = getattr(importlib.import_module(module), cls)(definition)
    return env
