"""Running SQL (or a named query of ``store/queries/``) over a store."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from workbench.resources import sql_path
from workbench.store.reader import Store


@dataclass(frozen=True, slots=True)
class SqlResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool
    """More rows matched than were fetched."""


def run_sql(store: Store, query: str, *, limit: int = 1000) -> SqlResult:
    """Run ``query`` and fetch at most ``limit`` rows (raises ``duckdb.Error`` on a bad query)."""

    def fetch(cur: Any) -> tuple[list[str], list[tuple[Any, ...]]]:
        if cur.description is None:
            return [], []
        return [d[0] for d in cur.description], cur.fetchmany(limit + 1)

    columns, rows = store.query(query, None, fetch)
    return SqlResult(columns, rows[:limit], len(rows) > limit)


def named_queries() -> dict[str, str]:
    """The named queries of ``store/queries/`` (``nel sql --named``), by name."""
    return {p.stem: p.read_text() for p in sorted(sql_path("queries").glob("*.sql"))}


def one_line(error: BaseException) -> str:
    """An error as one readable line (DuckDB messages span several)."""
    # A DuckDB error ends with the query line and a pointer under the culprit: one caret in 1.x, one per
    # character of the token in 2.x. On one line its position means nothing, so one caret on either.
    return re.sub(r"(?<= )\^+$", "^", " ".join(str(error).split())) or type(error).__name__
