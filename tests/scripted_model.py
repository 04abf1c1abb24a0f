"""An in-process scripted model and a tiny benchmark, so ``run_evaluation`` is tested in milliseconds.

``ScriptedModel`` is a ``Solver``: no HTTP, no mock server. Each attempt is answered from a script, per task id
and repeat, deterministically: a text, a transport failure (``rate_limit``, ``timeout``, ...), a fatal refusal of
every request, or a simulated latency. It records what the engine asked of it (which attempts, how many at once,
how many workers and preflights), so a test can say what the engine did, not only what it stored.

``Quiz`` is the benchmark: ``n`` questions ``q0, q1, ...`` whose answer to ``q<i>`` is ``str(i)``, scored by
exact match (``reward 1`` iff the response is the answer; ``None`` extracted when it is not a number).

Usage::

    model = ScriptedModel({("q1", 0): Reply(failure="timeout")}, default=Reply.correct)
    result = asyncio.run(run_evaluation(Quiz(4), model, store=tmp_path / "nel.duckdb", n_repeats=2))
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from workbench.environments.base import EvalEnvironment, VerifyResult
from workbench.model.client import FatalModelError, ModelResponse
from workbench.model.failures import FailureCategory
from workbench.solvers.base import AttemptContext, SolverOutput
from workbench.types import SeedResult  # the engine's type (solvers take it), not the environments' friendlier subclass

# The HTTP status a real endpoint gives with each transport failure (None: no answer at all).
_STATUS: dict[str, int | None] = {"rate_limit": 429, "timeout": None, "server_error": 500, "context_window": 400,
                                  "model_error": 400}


@dataclass(frozen=True, slots=True)
class Reply:
    """What the model does for one attempt.

    ``text`` is the answer; ``failure`` makes the call fail with that category instead (``http_status`` and
    ``error`` then default to what an endpoint would give); ``fatal`` raises ``FatalModelError`` (the endpoint
    refuses every request: the run stops); ``latency_s`` is awaited before answering.
    """

    text: str = ""
    failure: FailureCategory | None = None
    http_status: int | None = 200
    error: str | None = None
    latency_s: float = 0.0
    fatal: str | None = None
    tokens: int = 10

    @staticmethod
    def correct(seed: SeedResult, attempt: int) -> Reply:
        """The right answer, whatever the task."""
        return Reply(text=seed.expected_answer)

    @staticmethod
    def wrong(seed: SeedResult, attempt: int) -> Reply:
        return Reply(text=f"{seed.expected_answer}1")

    def response(self) -> ModelResponse:
        if self.failure is not None:
            status = _STATUS.get(self.failure) if self.http_status == 200 else self.http_status
            error = self.error or f"scripted {self.failure}" + (f" (HTTP {status})" if status else "")
            return ModelResponse(http_status=status, failure=self.failure, error=error)
        return ModelResponse(text=self.text, finish_reason="stop", prompt_tokens=self.tokens,
                             completion_tokens=self.tokens, total_tokens=2 * self.tokens,
                             latency_ms=self.latency_s * 1000.0, http_status=self.http_status)


Script = Mapping[tuple[str, int], Reply] | Callable[[SeedResult, int], Reply]


@dataclass
class ScriptedModel:
    """A ``Solver`` answering from ``script`` (by ``(task_id, repeat)``, or a function of the seed and repeat),
    falling back to ``default`` for attempts the script does not name."""

    script: Script = field(default_factory=dict)
    default: Callable[[SeedResult, int], Reply] = Reply.correct
    model_id: str = "scripted"
    name: str = "scripted"
    calls: list[tuple[str, int]] = field(default_factory=list)
    """Every attempt asked of the model, in the order the engine asked."""
    in_flight: int = 0
    peak_in_flight: int = 0
    """The most attempts the engine had waiting on the model at once."""
    workers_opened: int = 0
    preflights: int = 0

    def reply(self, seed: SeedResult, attempt: int) -> Reply:
        if callable(self.script):
            return self.script(seed, attempt)
        found = self.script.get((seed.task_id, attempt))
        return found if found is not None else self.default(seed, attempt)

    # ---- the Solver protocol ----
    def identity(self) -> dict[str, Any]:
        return {"solver": self.name, "model_id": self.model_id, "model_url": "scripted://", "protocol": "scripted"}

    @asynccontextmanager
    async def worker(self) -> AsyncIterator[_ScriptedWorker]:
        self.workers_opened += 1
        yield _ScriptedWorker(self)

    async def preflight(self) -> None:
        self.preflights += 1


class _ScriptedWorker:
    def __init__(self, model: ScriptedModel) -> None:
        self.model = model

    async def solve(self, seed: SeedResult, attempt: int, context: AttemptContext | None = None) -> SolverOutput:
        model = self.model
        model.calls.append((seed.task_id, attempt))
        reply = model.reply(seed, attempt)
        model.in_flight += 1
        model.peak_in_flight = max(model.peak_in_flight, model.in_flight)
        try:
            await asyncio.sleep(reply.latency_s)  # yields even at 0: the other workers get their turn
        finally:
            model.in_flight -= 1
        if reply.fatal is not None:
            raise FatalModelError(reply.fatal)
        messages = list(seed.messages)
        digest = hashlib.sha256(f"{seed.task_id}/{attempt}".encode()).hexdigest()
        return SolverOutput(response=reply.text if reply.failure is None else "", messages=messages,
                            model=reply.response(), request_hash=digest, request_seed=attempt)


class Quiz(EvalEnvironment):
    """``n`` questions: ``q<i>`` asks for ``i``; exact match; an optional ``category`` per task in metadata."""

    name = "quiz"

    def __init__(self, n: int, *, categories: tuple[str, ...] = ()) -> None:
        self.n = n
        self.categories = categories
        self.seeded: list[int] = []

    def __len__(self) -> int:
        return self.n

    def seed(self, idx: int) -> SeedResult:
        self.seeded.append(idx)
        question = f"What is {idx}?"
        meta = {"category": self.categories[idx % len(self.categories)]} if self.categories else {}
        return SeedResult(prompt=question, messages=({"role": "user", "content": question},),
                          expected_answer=str(idx), task_id=f"q{idx}", metadata=meta)

    def verify(self, response: str, expected: str, **metadata: Any) -> VerifyResult:
        answer = response.strip()
        extracted = answer if answer.lstrip("-").isdigit() else None
        return VerifyResult(float(extracted == expected), extracted, {"method": "exact", "expected": expected})

    @property
    def data_hash(self) -> str:
        return hashlib.sha256(f"quiz/{self.n}/{self.categories}".encode()).hexdigest()
