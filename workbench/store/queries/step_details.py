"""Every step's scoring details of one run, streamed: what a benchmark's own run-level figures are computed from
(``EvalEnvironment.benchmark_figures``, called by ``workbench.analysis.figures``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import orjson

from workbench.store.reader import Store

T = TypeVar("T")

FETCH = 2048
"""Rows fetched at a time: the details of a run are never all in memory at once."""

_DETAILS_QUERY = "SELECT scoring_details FROM steps WHERE run_id = ? AND scoring_details IS NOT NULL"


def fold_step_details(store: Store, run_id: str, fold: Callable[[Iterator[Mapping[str, Any]]], T]) -> T:
    """``fold`` over the run's steps' scoring details (each parsed to a dict; in no set order), fetched
    ``FETCH`` at a time. ``fold`` may be called again, from the start, on a fresh snapshot when a live journal is
    rolled into a segment meanwhile: it must be a pure function of what it is given."""

    def fetch(cur: Any) -> T:
        def details() -> Iterator[Mapping[str, Any]]:
            while batch := cur.fetchmany(FETCH):
                for (text,) in batch:
                    value = orjson.loads(text)
                    if isinstance(value, dict):
                        yield value

        return fold(details())

    return store.query(_DETAILS_QUERY, [run_id], fetch)
