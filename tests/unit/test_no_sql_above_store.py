"""Analysis and export hold no SQL: the queries and their execution live in ``workbench.store`` (store/queries/).

The import side (no ``duckdb``, no ``store.queries.rows``) is an import-linter contract (``.importlinter``,
``no-sql-above-store``); this checks what imports cannot: no SQL text in a string, no query run on a store.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

import workbench

ROOT = Path(workbench.__file__).parent
PACKAGES = ("analysis", "export")
SQL_TEXT = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE)\b[\s\S]*\b(FROM|INTO|SET|TABLE|VIEW)\b")
STRING_TOKENS = {tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}  # f-strings: 3.12+
RUNS_SQL = re.compile(r"\.(execute|executemany|sql|query|rows|dicts|on_connection)\(")


def _sources() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def test_there_are_sources_to_check():
    assert len(_sources()) > 10


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_sql_text_and_no_query_run(path: Path):
    source = path.read_text()
    found = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in STRING_TOKENS and SQL_TEXT.search(tok.string):
            found.append(f"line {tok.start[0]}: SQL in a string")
    found += [f"line {source.count(chr(10), 0, m.start()) + 1}: {m.group(0)}" for m in RUNS_SQL.finditer(source)]
    assert not found, f"{path.relative_to(ROOT)} (move it to workbench/store/queries/): {found}"
