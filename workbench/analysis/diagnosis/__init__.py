"""BLADE-style diagnosis: which tasks drove a score shift, and why (``nel diagnose``, the notebooks'
widgets). Deterministic: every number is computed from the runs, every claim cites task ids and counts;
the suggested interventions come from documented rules and are labelled as heuristic.

The result types are imported here at once (plain dataclasses); the functions on first use, so a front end
that only reads a diagnosis does not pay for polars and DuckDB.
"""

from __future__ import annotations

import importlib
from typing import Any

from workbench.analysis.diagnosis.types import (
    BUCKETS,
    TASK_BUCKETS,
    TAXONOMY,
    TAXONOMY_LABELS,
    AnswerCount,
    Artifact,
    AttemptEvidence,
    AttemptFlips,
    Attribution,
    CostContrast,
    CrossTabCell,
    Diagnosis,
    ErrorHotspot,
    FailureCount,
    Finding,
    RankedTask,
    RunDiagnosis,
    RunProfile,
    ScoreShift,
    ShiftGroup,
    SliceRow,
    SliceShift,
    TaskDive,
    TaskEvidence,
    TaskShift,
)

_LAZY = {
    "diagnose": "api",
    "run_diagnosis": "api",
    "run_profile": "profile",
    "default_slices": "profile",
    "score_shift": "shift",
    "attribute": "attribution",
    "evidence_for": "evidence",
    "EvidenceSource": "evidence",
    "StoreEvidence": "evidence",
    "ExportEvidence": "evidence",
    "build_dive": "evidence",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'workbench.analysis.diagnosis' has no attribute {name!r}")
    return getattr(importlib.import_module(f"workbench.analysis.diagnosis.{module}"), name)


__all__ = [
    "BUCKETS", "TASK_BUCKETS", "TAXONOMY", "TAXONOMY_LABELS", "AnswerCount", "Artifact", "AttemptEvidence",
    "AttemptFlips", "Attribution",
    "CostContrast", "CrossTabCell", "Diagnosis", "ErrorHotspot", "FailureCount", "Finding", "RunDiagnosis",
    "RankedTask", "RunProfile", "ScoreShift", "ShiftGroup", "SliceRow", "SliceShift", "TaskDive", "TaskEvidence",
    "TaskShift", *_LAZY,
]
