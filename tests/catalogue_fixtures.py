"""Upstream-schema fixtures of catalogue benchmarks (``tests/fixtures/hub/<name>/``) and the environments they make.

A fixture folder holds the upstream files at their paths in the dataset repo (simpleqa's CSV, ifeval's JSONL), or,
for a parquet dataset, ``rows.json``: the rows and the upstream arrow schema, written to parquet here so that the
bytes are upstream's format. ``frozen_environment`` converts the rows with the benchmark's ``[hub] convert`` and
builds its environment over them, as the loader does once the data is present.
"""

from __future__ import annotations

import csv
import importlib
import io
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
_TYPES: dict[str, pa.DataType] = {"string": pa.string(), "int32": pa.int32(), "int64": pa.int64(),
                                  "list<string>": pa.list_(pa.string())}


def upstream_files(name: str) -> dict[str, bytes]:
    """Path in the dataset repo → bytes in upstream's format, for ``hub_cache.place_dataset``."""
    folder = FIXTURES / name
    described = folder / "rows.json"
    if described.exists():
        spec = orjson.loads(described.read_bytes())
        schema = pa.schema([(column, _TYPES[kind]) for column, kind in spec["schema"].items()])
        sink = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(spec["rows"], schema=schema), sink)
        return {spec["path"]: sink.getvalue()}
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def upstream_rows(name: str) -> list[dict[str, Any]]:
    """The fixture's rows as read from its upstream bytes (parquet, JSONL or CSV), columns named as upstream."""
    rows: list[dict[str, Any]] = []
    for path, data in upstream_files(name).items():
        if path.endswith(".parquet"):
            rows += pq.read_table(io.BytesIO(data)).to_pylist()
        elif path.endswith(".jsonl"):
            rows += [orjson.loads(line) for line in data.splitlines() if line.strip()]
        elif path.endswith(".csv"):
            rows += list(csv.DictReader(io.StringIO(data.decode("utf-8"))))
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
