"""The attempt texts behind a diagnosis, for a handful of tasks at a time: from a store's ``steps`` or from an
exported run's ``results.jsonl`` / ``trajectories.jsonl``. Rows come back as tuples
``(task_idx, repeat, passed, answer, expected_answer, failure_category, error, response)`` (``ATTEMPT_ROW``)
or ``(task_idx, agreeing)``; ``workbench.analysis.diagnosis.evidence`` turns them into evidence."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from workbench.errors import UsageError
from workbench.store.columns import sql_string
from workbench.store.queries.exported import MAX_LINE
from workbench.store.reader import Store

ATTEMPT_ROW = ("task_idx", "repeat", "passed", "extracted_answer", "expected_answer", "failure_category", "error",
               "response")

_AGREEMENT = """
SELECT task_idx, max(n)::BIGINT FROM (
    SELECT task_idx, count(*) AS n FROM ({src}) WHERE answer IS NOT NULL GROUP BY task_idx, answer
) GROUP BY task_idx
"""


def _metric_sql(metric: str | None) -> tuple[str, str, dict[str, Any]]:
    """SQL for ``passed`` and ``extracted_answer`` under ``metric`` (a step's ``scores`` entry when it has one,
    else its top-level columns, which hold the primary metric), and the parameters they use."""
    if metric is None:
        return "passed", "extracted_answer", {}
    key = f"$.{json.dumps(metric)}"
    has = "json_extract(scores, $m_key) IS NOT NULL"
    passed = (f"CASE WHEN {has} THEN coalesce(json_extract(scores, $m_passed)::BOOLEAN, "
              f"json_extract(scores, $m_reward)::DOUBLE >= 1) ELSE passed END")
    answer = f"CASE WHEN {has} THEN json_extract_string(scores, $m_answer) ELSE extracted_answer END"
    return passed, answer, {"m_key": key, "m_passed": f"{key}.passed", "m_reward": f"{key}.reward",
                            "m_answer": f"{key}.extracted_answer"}


def _wanted(task_idx: Sequence[int]) -> pl.DataFrame:
    return pl.DataFrame({"task_idx": sorted({int(i) for i in task_idx})}, schema={"task_idx": pl.Int64})


class StoreEvidenceRows:
    """A run's attempt texts in a store, live segments included (``Store`` reads them)."""

    def __init__(self, store: Store, run_id: str, metric: str | None) -> None:
        self.store, self.run_id, self.metric = store, run_id, metric

    def _src(self, columns: str) -> tuple[str, dict[str, Any]]:
        passed, answer, params = _metric_sql(self.metric)
        src = (f"SELECT task_idx, repeat, {passed} AS passed, {answer} AS answer{columns} FROM steps "
               "WHERE run_id = $run AND task_idx IN (SELECT task_idx FROM nel_wanted)")
        return src, params

    def attempt_rows(self, task_idx: Sequence[int]) -> list[tuple[Any, ...]]:
        src, params = self._src(", expected_answer, failure_category, error, response")
        query = (f"SELECT task_idx, repeat, passed, answer, expected_answer, failure_category, error, response "
                 f"FROM ({src}) ORDER BY task_idx, repeat")
        return self._rows(query, params, task_idx)

    def agreement_rows(self, task_idx: Sequence[int]) -> list[tuple[Any, ...]]:
        src, params = self._src("")
        return self._rows(_AGREEMENT.format(src=src), params, task_idx)

    def _rows(self, query: str, params: dict[str, Any], task_idx: Sequence[int]) -> list[tuple[Any, ...]]:
        # Named parameters: run on the store's connection, which ``Store.query`` hands to its fetch function
        # (retried on a fresh snapshot if a live journal is rolled into a segment meanwhile).
        bound = {**params, "run": self.run_id}

        def fetch(con: duckdb.DuckDBPyConnection) -> list[tuple[Any, ...]]:
            con.register("nel_wanted", _wanted(task_idx))  # a table, not a list parameter: binding is slow
            return con.execute(query, bound).fetchall()

        return self.store.on_connection(fetch)


class ExportEvidenceRows:
    """A run's attempt texts in an exported directory: ``results.jsonl`` (answers, verdicts, responses) and, when
    given, ``trajectories.jsonl`` (the transport error). DuckDB streams the files; only the tasks asked for
    become Python objects."""

    def __init__(self, folder: Path, results: Path, trajectories: Path | None, metric: str | None) -> None:
        self.folder, self.results, self.trajectories, self.metric = folder, results, trajectories, metric

    def _src(self, extra: str, with_error: bool) -> tuple[str, dict[str, Any]]:
        passed, answer, params = _metric_sql(self.metric)
        columns = ("{problem_idx: 'BIGINT', repeat: 'BIGINT', passed: 'BOOLEAN', extracted_answer: 'VARCHAR', "
                   "expected_answer: 'VARCHAR', failure_category: 'VARCHAR', model_response: 'VARCHAR', "
                   "scores: 'JSON'}")
        results = (f"SELECT problem_idx AS task_idx, repeat, passed, extracted_answer, expected_answer, "
                   f"failure_category, model_response AS response, scores "
                   f"FROM read_json({sql_string(self.results)}, format = 'newline_delimited', columns = {columns}, "
                   f"maximum_object_size = {MAX_LINE}) WHERE problem_idx IN (SELECT task_idx FROM nel_wanted)")
        error = "NULL::VARCHAR"
        join = ""
        if with_error and self.trajectories is not None:
            error = "x.error"
            join = (f"LEFT JOIN (SELECT problem_idx, repeat, error FROM read_json("
                    f"{sql_string(self.trajectories)}, format = 'newline_delimited', columns = "
                    "{problem_idx: 'BIGINT', repeat: 'BIGINT', error: 'VARCHAR'}, "
                    f"maximum_object_size = {MAX_LINE}) WHERE problem_idx IN (SELECT task_idx FROM nel_wanted)) x "
                    "ON x.problem_idx = r.task_idx AND x.repeat = r.repeat")
        src = (f"SELECT r.task_idx, r.repeat, {passed} AS passed, {answer} AS answer, {error} AS error{extra} "
               f"FROM ({results}) r {join}")
        return src, params

    def _rows(self, query: str, params: dict[str, Any], task_idx: Sequence[int]) -> list[tuple[Any, ...]]:
        con = duckdb.connect()
        try:
            con.register("nel_wanted", _wanted(task_idx))
            return con.execute(query, params).fetchall()
        except duckdb.Error as exc:
            raise UsageError(f"{self.folder}: cannot read its evidence ({str(exc).splitlines()[0]})") from None
        finally:
            con.close()

    def attempt_rows(self, task_idx: Sequence[int]) -> list[tuple[Any, ...]]:
        src, params = self._src(", expected_answer, failure_category, response", with_error=True)
        query = (f"SELECT task_idx, repeat, passed, answer, expected_answer, failure_category, error, response "
                 f"FROM ({src}) ORDER BY task_idx, repeat")
        return self._rows(query, params, task_idx)

    def agreement_rows(self, task_idx: Sequence[int]) -> list[tuple[Any, ...]]:
        src, params = self._src("", with_error=False)
        return self._rows(_AGREEMENT.format(src=src), params, task_idx)
