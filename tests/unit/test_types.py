"""``workbench.types``: a leaf every layer imports, whose records and enums are exactly what the store holds."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import get_args, get_type_hints

import orjson
from scripted_model import Quiz, ScriptedModel

from workbench.analysis.compare import VERDICTS
from workbench.analysis.gate import DECISIONS, STATUSES
from workbench.engine import run_evaluation
from workbench.model.failures import FAILURE_CATEGORIES
from workbench.store import open_store
from workbench.store.columns import STEP_COLUMNS
from workbench.types import (
    FailureCategory,
    GateDecision,
    GateStatus,
    Interval,
    RunStatus,
    Step,
    Verdict,
)


def test_importing_the_types_imports_nothing_else_of_workbench() -> None:
    code = ("import sys, workbench.types; "
            "print('\\n'.join(m for m in sys.modules if m == 'workbench' or m.startswith('workbench.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert sorted(out.split()) == ["workbench", "workbench.types"]


def test_the_enums_are_the_stored_strings() -> None:
    assert [s.value for s in RunStatus] == ["running", "complete", "failed", "interrupted", "incomplete"]
    assert [v.value for v in Verdict] == ["PASS", "WARN", "BLOCK", "INCONCLUSIVE"]
    assert [s.value for s in GateStatus] == ["PASS", "BREACH", "INSUFFICIENT_EVIDENCE", "MISSING"]
    assert [d.value for d in GateDecision] == ["GO", "NO-GO", "INCONCLUSIVE"]
    assert VERDICTS == ("PASS", "WARN", "BLOCK", "INCONCLUSIVE")
    assert STATUSES == ("PASS", "BREACH", "INSUFFICIENT_EVIDENCE", "MISSING")
    assert DECISIONS == ("GO", "NO-GO", "INCONCLUSIVE")
    assert get_args(FailureCategory) == FAILURE_CATEGORIES
    # a member is its string, in every serialisation the store and the front ends use
    for member in (RunStatus.COMPLETE, Verdict.BLOCK, GateDecision.NO_GO):
        assert member == member.value and str(member) == f"{member}" == member.value
        assert orjson.dumps({"s": member}) == orjson.dumps({"s": member.value})
        assert json.dumps(member) == json.dumps(member.value)


def test_an_interval_is_a_pair() -> None:
    interval = Interval(0.25, 0.75)
    low, high = interval
    assert (low, high) == interval == (0.25, 0.75) and (interval.low, interval.high) == (0.25, 0.75)
    assert json.dumps(interval) == "[0.25, 0.75]"


def test_a_step_has_exactly_the_stores_step_columns() -> None:
    assert list(get_type_hints(Step)) == list(STEP_COLUMNS)


def test_a_step_the_engine_builds_has_exactly_the_stores_step_columns(tmp_path: Path) -> None:
    rows: list[Step] = []
    store = tmp_path / "nel.duckdb"
    result = asyncio.run(run_evaluation(Quiz(3), ScriptedModel(), store=store, max_concurrent=2,
                                        listeners=[lambda _p, row: rows.append(row)], ingest_at_end=False))
    assert len(rows) == 3
    for row in rows:
        assert list(row) == list(STEP_COLUMNS)
    # the run's status is the enum, and the stored string is its value
    assert result.status is RunStatus.COMPLETE
    (shard_json,) = store.with_name("nel.duckdb.segments").glob("*/shard-*/shard.json")
    assert orjson.loads(shard_json.read_bytes())["status"] == "complete"
    assert open_store(store).runs()["status"].to_list() == ["complete"]
