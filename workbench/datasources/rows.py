"""Rows of a data file, whatever its format: ``.jsonl``, ``.json``, ``.csv`` or ``.parquet``.

One reader for local datasets and the files of a hub snapshot, so a row is the same dict either way, and every
error names the file and the row (the line, for line-based formats).
"""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from workbench.errors import UsageError

FORMATS = (".jsonl", ".json", ".csv", ".parquet")


@dataclass(slots=True)
class Rows:
    """A file's rows, the SHA-256 of its bytes, and where each row is (``file:line`` or ``file: row N``)."""

    rows: list[dict[str, Any]]
    sha256: str
    path: Path
    lines: list[int] | None = None

    def where(self, idx: int) -> str:
        """Row ``idx`` (0-based) as a user finds it: the line number of a JSONL/CSV file, else the row number."""
        if self.lines is not None:
            return f"{self.path}:{self.lines[idx]}"
        return f"{self.path}: row {idx + 1}"


def json_object_line(path: Path, lineno: int, line: bytes) -> dict[str, Any] | None:
    """One JSONL line as an object (``None`` for a blank line); a bad line is an error naming file and line."""
    if not line.strip():
        return None
    try:
        row = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"{path}:{lineno}: not valid JSON ({exc})") from None
    if not isinstance(row, dict):
        raise UsageError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
    return row


def _jsonl(path: Path, data: bytes) -> tuple[list[dict[str, Any]], list[int]]:
    rows, lines = [], []
    for lineno, line in enumerate(data.splitlines(), start=1):
        row = json_object_line(path, lineno, line)
        if row is not None:
            rows.append(row)
            lines.append(lineno)
    return rows, lines


def _json(path: Path, data: bytes) -> tuple[list[dict[str, Any]], list[int] | None]:
    """A JSON array of objects, or (as hub ``.json`` files often are) JSON lines."""
    if not data.lstrip().startswith(b"["):
        return _jsonl(path, data)
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"{path}: not valid JSON ({exc})") from None
    for i, row in enumerate(value):
        if not isinstance(row, dict):
            raise UsageError(f"{path}: row {i + 1}: expected a JSON object, got {type(row).__name__}")
    return value, None


def _csv(path: Path, data: bytes) -> tuple[list[dict[str, Any]], list[int]]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    reader = csv.DictReader(text.splitlines())
    rows = [dict(r) for r in reader]
    return rows, list(range(2, len(rows) + 2))


def _parquet(path: Path, data: bytes) -> tuple[list[dict[str, Any]], None]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(pa.BufferReader(data))
    except (pa.ArrowInvalid, OSError) as exc:
        raise UsageError(f"{path}: not a readable Parquet file ({exc})") from None
    return table.to_pylist(), None


_READERS: dict[str, Callable[[Path, bytes], tuple[list[dict[str, Any]], list[int] | None]]] = {
    ".jsonl": _jsonl, ".json": _json, ".csv": _csv, ".parquet": _parquet,
}


def read_rows(path: Path) -> Rows:
    """Every row of ``path`` (by its suffix); an unreadable file or row is one line naming it."""
    reader = _READERS.get(path.suffix.lower())
    if reader is None:
        raise UsageError(f"{path}: datasets must be {', '.join(FORMATS)} files")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read dataset: {exc.strerror}") from None
    rows, lines = reader(path, data)
    return Rows(rows, hashlib.sha256(data).hexdigest(), path, lines)


def require_fields(rows: Rows, fields: tuple[str, ...], what: str = "") -> None:
    """Every row carries every field; else one line naming the first missing field and its row."""
    for idx, row in enumerate(rows.rows):
        for name in fields:
            if name not in row:
                raise UsageError(f"{rows.where(idx)}: row has no field {name!r}{what}")
