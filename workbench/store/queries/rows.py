"""Reading rows from a store: the small helpers every triage query (``workbench.analysis.triage``) shares."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from workbench.store.reader import Store


def fetch_dicts(store: Store, query: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """One query's rows as dicts (the store opens and closes its own connection)."""
    return store.dicts(query, list(params))


def cursor_dicts(cur: Any) -> list[dict[str, Any]]:
    """The rows of the statement just run (none for a statement without a result)."""
    if cur.description is None:
        return []
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def fetch_many(store: Store, queries: Sequence[tuple[str, Sequence[Any]]]) -> list[list[dict[str, Any]]]:
    """Several queries on one connection: one snapshot of a store being written, and one set-up cost."""

    def fetch(cur: Any) -> list[list[dict[str, Any]]]:
        out = [cursor_dicts(cur)]
        for query, params in queries[1:]:
            out.append(cursor_dicts(cur.execute(query, list(params))))
        return out

    first, params = queries[0]
    return store.query(first, list(params), fetch)


def parse_json(value: Any) -> Any:
    """A JSON column's value parsed; text that is not JSON stays as it is."""
    if value is None or not isinstance(value, str | bytes):
        return value
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return value
