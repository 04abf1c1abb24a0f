"""The records every layer shares: messages, seeds, verdicts, steps, intervals and the status enums.

A leaf module: it imports the standard library only, never ``workbench`` (``tests/unit/test_types.py``
checks), so the scorers, the model client, the engine and the store can all depend on it without depending
on one another. The enums are ``StrEnum``: a member *is* its string, so what reaches a shard's JSON, the
store and ``--json`` output is byte for byte what the literals gave.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, NamedTuple, TypedDict

Message = dict[str, Any]
"""An OpenAI-format chat message: ``{"role": ..., "content": ...}``."""


@dataclass(frozen=True, slots=True)
class SeedResult:
    """One problem, ready to send to a model.

    ``messages`` is the chat form (system prompt excluded: the solver adds the
    run's system prompt); ``prompt`` is the same content as plain text for the
    completions protocol.
    """

    prompt: str
    messages: tuple[Message, ...]
    expected_answer: str
    task_id: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class VerifyResult:
    """The verdict on one response.

    ``extracted_answer`` is ``None`` when no answer could be found, and
    ``scoring_details`` always says how the answer was found (or why not), so an
    extraction failure is visible rather than silently scored as wrong.
    """

    reward: float
    extracted_answer: str | None
    scoring_details: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)


FailureCategory = Literal[
    "rate_limit",
    "timeout",
    "server_error",
    "context_window",
    "model_error",
    "empty_response",
    "refusal",
    "format_error",
    "judge_error",
    "max_turns_exhausted",
    "scorer_error",
    "image_error",
]
"""Why an attempt produced no usable answer (``workbench.model.failures`` classifies; the first five are the
exchange failing, ``scorer_error`` the scorer raising, ``image_error`` a prompt's image that could not be sent:
it does not decode, or the protocol carries no images)."""


class Step(TypedDict):
    """One attempt as the engine records it: a row of ``steps`` (``workbench.store.columns.STEP_COLUMNS``, the
    same keys in the same order). JSON-typed columns are pre-serialised strings and ``started_at`` is epoch
    seconds, so the writer appends the dict with one ``orjson.dumps``. A ``TypedDict``, not a class: the
    engine builds thousands a second, and a dict literal is the cheapest thing to build and to serialise."""

    run_id: str
    task_idx: int
    repeat: int
    task_id: str
    shard_idx: int
    started_at: float
    prompt: str
    messages: str | None
    response: str
    reasoning: str | None
    finish_reason: str | None
    tool_calls: str | None
    reward: float
    passed: bool
    expected_answer: str
    extracted_answer: str | None
    scoring_method: str | None
    scoring_details: str | None
    failure_category: FailureCategory | None
    error: str | None
    http_status: int | None
    n_retries: int
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None
    reasoning_tokens: int | None
    latency_ms: float
    seed_ms: float
    model_ms: float
    verify_ms: float
    request_hash: str | None
    request_seed: int | None
    response_id: str | None
    metadata: str | None
    scores: str | None
    turns: str | None
    attempt: int


@dataclass(frozen=True, slots=True)
class BenchmarkFigures:
    """A run's figures as a benchmark's authors report them, where they are not a mean of one per-step reward
    (SimpleQA's F1, IFEval's instruction-level accuracy): ``EvalEnvironment.benchmark_figures``, in the
    end-of-run summary, ``summary.json``, the export's bundle and ``nel eval stats``."""

    source: str
    """Whose figures these are, and so whose names they carry: ``"OpenAI simple-evals"``, ``"lm-eval"``."""
    values: dict[str, float]
    """The figures by their authors' names, in their authors' order."""
    n_steps: int
    """How many attempts they are computed over."""
    over: str
    """Which attempts those are, in words ("graded attempts, every repeat pooled")."""


class Interval(NamedTuple):
    """A confidence interval ``[low, high]``. A tuple, so ``low, high = ...`` and ``== (lo, hi)`` keep working."""

    low: float
    high: float


class RunStatus(StrEnum):
    """A shard's status, as ``shard.json`` and ``run_shards.status`` store it, and a run's (``runs.status``, derived
    from its shards': ``incomplete`` when some ended neither complete nor failed, or are missing)."""

    RUNNING = "running"
    COMPLETE = "complete"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    INCOMPLETE = "incomplete"



class Verdict(StrEnum):
    """``nel compare``'s verdict on a candidate against a baseline (``workbench.analysis.compare.verdict``)."""

    PASS = "PASS"
    WARN = "WARN"
    BLOCK = "BLOCK"
    INCONCLUSIVE = "INCONCLUSIVE"


class GateStatus(StrEnum):
    """One benchmark's status under a release gate's policy (``workbench.analysis.gate``)."""

    PASS = "PASS"
    BREACH = "BREACH"
    INSUFFICIENT_EVIDENCE = "INSUFFICIENT_EVIDENCE"
    MISSING = "MISSING"


class GateDecision(StrEnum):
    """A release gate's decision over its benchmarks (``workbench.analysis.gate``)."""

    GO = "GO"
    NO_GO = "NO-GO"
    INCONCLUSIVE = "INCONCLUSIVE"
