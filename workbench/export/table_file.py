"""Rows out to a file a person or a notebook opens next: Markdown, JSON, CSV or Parquet.

What the TUI's export dialog writes (a task's attempts, a flip list, a SQL result). polars writes JSON, CSV and
Parquet: nested values (a transcript's messages, scoring details) stay nested in JSON and Parquet when their
shapes agree, and become JSON text in CSV, which has no nesting, or when they do not. Markdown is a document
when the caller has one (a transcript reads better as prose than as a table cell), else a table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson
import polars as pl

from workbench.errors import UsageError

Format = Literal["markdown", "json", "csv", "parquet"]
SUFFIXES: dict[Format, str] = {"markdown": ".md", "json": ".json", "csv": ".csv", "parquet": ".parquet"}
"""Every format the export writes, and the file suffix it suggests."""


@dataclass(frozen=True, slots=True)
class Table:
    """What to export: named columns and their rows, a short name for the file, and words for the message."""

    name: str
    """A file stem (``task-2-attempts``)."""
    what: str
    """What the rows are, for the line that says it was written (``4 attempts of task 2``)."""
    columns: list[str]
    rows: Sequence[Sequence[Any]]
    document: str | None = None
    """A Markdown document written instead of a table (the attempts as transcripts)."""


def _unique(columns: Sequence[str]) -> list[str]:
    """Column names made unique (``SELECT 1, 1`` names both ``1``): a file's columns cannot repeat."""
    seen: dict[str, int] = {}
    out = []
    for name in columns:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}_{seen[name]}")
    return out


def _as_text(value: Any) -> Any:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode() if isinstance(value, dict | list) else value


def frame(table: Table, *, nested: bool) -> pl.DataFrame:
    """The rows as a frame; with ``nested`` lists and dicts are kept as such when polars can type them."""
    columns = _unique(table.columns)
    if nested:
        try:
            return pl.DataFrame([list(row) for row in table.rows], schema=columns, orient="row",
                                infer_schema_length=None)
        except Exception:  # polars raises several types on ragged nesting: fall back to JSON text
            pass
    rows = [[_as_text(v) for v in row] for row in table.rows]
    return pl.DataFrame(rows, schema=columns, orient="row", infer_schema_length=None, strict=False)


def _cell(value: Any) -> str:
    text = "" if value is None else str(_as_text(value))
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", "").replace("\n", "<br>")


def markdown_table(table: Table) -> str:
    """The rows as a GitHub-flavoured Markdown table (pipes escaped, line breaks as ``<br>``)."""
    columns = _unique(table.columns)
    lines = ["| " + " | ".join(_cell(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in table.rows]
    return "\n".join(lines) + "\n"


def write_table(table: Table, path: Path, fmt: Format) -> Path:
    """Write ``table`` to ``path`` as ``fmt`` (its folder is made); ``UsageError`` names the path when it cannot
    be written."""
    if fmt not in SUFFIXES:
        raise UsageError(f"export: unknown format {fmt!r} (one of {', '.join(SUFFIXES)})")
    path = path.expanduser()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if fmt == "markdown":
            path.write_text(table.document if table.document is not None else markdown_table(table), encoding="utf-8")
        elif fmt == "csv":
            frame(table, nested=False).write_csv(path)
        else:
            _write_nested(table, path, fmt)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from exc
    return path


def _write_nested(table: Table, path: Path, fmt: Format) -> None:
    """JSON or Parquet, nested values kept; when the file format cannot hold their shape (a struct without
    fields, say), written again with them as JSON text."""
    for nested in (True, False):
        data = frame(table, nested=nested)
        try:
            data.write_json(path) if fmt == "json" else data.write_parquet(path)
            return
        except OSError:
            raise
        except Exception:  # polars/Arrow refuse some nested types: the flat frame always writes
            if not nested:
                raise
