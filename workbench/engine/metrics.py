"""Several metrics per benchmark: each response scored by every configured metric, each stored.

A benchmark scores with its own scorer by default. A config's ``scoring:`` section adds
metrics (library scorers with parameters, or an LLM judge on a second service); the first
metric is the primary one, whose verdict fills the step's ``reward`` and ``passed``, and every
metric's verdict goes to ``steps.scores``. Judge calls are model calls: each engine worker
opens its own connection to each judge service, as it does for the solver's model.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from workbench.environments.base import EvalEnvironment
from workbench.errors import UsageError
from workbench.model.client import ModelClient, prepare
from workbench.model.config import ModelConfig, redact_url
from workbench.model.failures import FailureCategory
from workbench.scoring import get_scorer
from workbench.scoring.judge import DEFAULT_TEMPLATE, check_template, parse_verdict, render_prompt
from workbench.solvers.base import SolverOutput
from workbench.solvers.simple import SimpleSolver
from workbench.types import SeedResult, VerifyResult

DEFAULT = "default"
"""Metric type meaning "the benchmark's own scorer"."""
JUDGE = "judge"

JUDGE_ERROR: FailureCategory = "judge_error"
"""Failure category of a step whose primary metric is a judge that gave no verdict."""


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One metric: ``type`` is a scorer name, ``"judge"`` or ``"default"`` (the benchmark's own scorer)."""

    name: str
    type: str
    params: Mapping[str, Any] = field(default_factory=dict)
    judge: ModelConfig | None = None
    template: str = DEFAULT_TEMPLATE

    def identity(self) -> dict[str, Any]:
        """What changes this metric's verdicts (no secrets): part of a run's identity."""
        out: dict[str, Any] = {"name": self.name, "type": self.type}
        if self.params:
            out["params"] = dict(sorted(self.params.items()))
        if self.judge is not None:
            out["judge"] = self.judge.identity()
            out["template_sha256"] = hashlib.sha256(self.template.encode()).hexdigest()[:16]
        return out


Verify = Callable[..., VerifyResult]


class JudgeGrading(Protocol):
    """A benchmark's own judge prompt and reading of the reply (SimpleQA's grader), used by a judge metric that
    names no prompt of its own."""

    template: str

    def verdict(self, reply: str) -> VerifyResult | None: ...


def check_judged(env: EvalEnvironment, metrics: MetricSuite | None) -> None:
    """A benchmark graded only by a judge (``env.judge_grading``) runs with a judge metric and without its own
    scorer (which has nothing to grade with): say how to configure one, before any model call."""
    if getattr(env, "judge_grading", None) is None:
        return
    if metrics is None or all(s.type != JUDGE for s in metrics.specs) or any(s.type == DEFAULT for s in metrics.specs):
        raise UsageError(f"{env.name} is graded by an LLM judge: run it from a config whose entry has scoring: "
                         "{include_defaults: false, metrics: [{type: judge, service: JUDGE}]} with the judge model "
                         "under services: (see benchmarks/" + env.name + "/README.md)")


class MetricSuite:
    """The metrics of one run, the first being primary."""

    def __init__(self, env: EvalEnvironment, specs: Sequence[MetricSpec]) -> None:
        if not specs:
            raise UsageError("scoring: at least one metric is needed")
        seen: set[str] = set()
        for spec in specs:
            if spec.name in seen:
                raise UsageError(f"scoring.metrics: two metrics are named {spec.name!r}; give each its own name")
            seen.add(spec.name)
            if spec.type == JUDGE:
                if spec.judge is None:
                    raise UsageError(f"scoring.metrics: judge metric {spec.name!r} needs a service")
                problem = check_template(spec.template)
                if problem:
                    raise UsageError(f"scoring.metrics: judge metric {spec.name!r}: {problem}")
        self.specs = tuple(specs)
        self.grading: JudgeGrading | None = getattr(env, "judge_grading", None)
        self._scorers: dict[str, Verify] = {
            spec.name: _sync_scorer(env, spec) for spec in self.specs if spec.type != JUDGE
        }

    @property
    def primary(self) -> str:
        return self.specs[0].name

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.specs]

    def identity(self) -> list[dict[str, Any]]:
        return [s.identity() for s in self.specs]

    async def preflight(self) -> None:
        """Fail before the run when a judge service cannot be reached at all."""
        for spec in self.specs:
            if spec.judge is not None:
                await SimpleSolver(spec.judge).preflight()

    @asynccontextmanager
    async def worker(self) -> AsyncIterator[MetricWorker]:
        async with AsyncExitStack() as stack:
            clients = {
                spec.name: await stack.enter_async_context(ModelClient(spec.judge))
                for spec in self.specs if spec.judge is not None
            }
            yield MetricWorker(self, clients)


def _sync_scorer(env: EvalEnvironment, spec: MetricSpec) -> Verify:
    if spec.type == DEFAULT:
        if spec.params:
            raise UsageError(f"scoring.metrics: {spec.name!r} is the benchmark's own scorer, which takes no params")
        return env.verify
    score = get_scorer(spec.type, spec.params)

    def verify(response: str, expected: str, **_: Any) -> VerifyResult:
        return score(response, expected)

    return verify


class MetricWorker:
    """One engine worker's scoring: its own judge connections."""

    def __init__(self, suite: MetricSuite, clients: dict[str, ModelClient]) -> None:
        self.suite = suite
        self.clients = clients

    async def score(self, seed: SeedResult, out: SolverOutput) -> tuple[VerifyResult, dict[str, Any]]:
        """The primary verdict and every metric's verdict, as stored in ``steps.scores``."""
        verdicts: dict[str, VerifyResult] = {}
        for spec in self.suite.specs:
            if out.model.failure is not None:
                verdicts[spec.name] = VerifyResult(0.0, None, {"method": "none",
                                                               "reason": f"no response: {out.model.error}"})
            elif spec.type == JUDGE:
                verdicts[spec.name] = await self._judge(spec, seed, out.response)
            else:
                verdicts[spec.name] = self.suite._scorers[spec.name](
                    out.response, seed.expected_answer, **seed.metadata
                )
        scores = {name: score_entry(v) for name, v in verdicts.items()}
        return verdicts[self.suite.primary], scores

    async def _judge(self, spec: MetricSpec, seed: SeedResult, response: str) -> VerifyResult:
        assert spec.judge is not None
        details: dict[str, Any] = {"method": "llm_judge", "judge_model": spec.judge.model_id,
                                   "judge_url": redact_url(spec.judge.endpoint)}
        if not response.strip():
            details.update(verdict=None, reason="empty response: not sent to the judge")
            return VerifyResult(0.0, None, details)
        grading = self.suite.grading if spec.template == DEFAULT_TEMPLATE else None  # the benchmark's own grader
        template = spec.template if grading is None else grading.template
        prompt = render_prompt(template, question=seed.prompt, expected=seed.expected_answer, response=response)
        request = prepare(spec.judge, ({"role": "user", "content": prompt},), prompt, 0)
        t0 = time.perf_counter()
        reply = await self.clients[spec.name].generate(request, 0)
        details.update(
            judge_prompt=prompt,
            judge_response=reply.text if reply.failure is None else None,
            judge_latency_ms=(time.perf_counter() - t0) * 1000.0,
            judge_prompt_tokens=reply.prompt_tokens,
            judge_completion_tokens=reply.completion_tokens,
        )
        if reply.failure is not None:
            details.update(verdict=None, reason=f"judge call failed ({reply.failure}): {reply.error}")
            return VerifyResult(0.0, None, details, {"failure_category": JUDGE_ERROR})
        if grading is not None:
            graded = grading.verdict(reply.text)
            if graded is None:
                details.update(verdict=None, reason="the judge's reply gives no grade")
                return VerifyResult(0.0, None, details, {"failure_category": JUDGE_ERROR})
            details.update(grader=graded.scoring_details.get("method"), grade=graded.extracted_answer,
                           verdict=graded.extracted_answer)
            return VerifyResult(graded.reward, graded.extracted_answer, details)
        verdict = parse_verdict(reply.text)
        details.update(verdict=None if verdict.correct is None else ("correct" if verdict.correct else "incorrect"),
                       reason=verdict.reason)
        if verdict.correct is None:
            return VerifyResult(0.0, None, details, {"failure_category": JUDGE_ERROR})
        return VerifyResult(1.0 if verdict.correct else 0.0, "CORRECT" if verdict.correct else "INCORRECT", details)


def score_entry(verdict: VerifyResult) -> dict[str, Any]:
    """One metric's verdict as stored in ``steps.scores``."""
    return {
        "reward": float(verdict.reward),
        "passed": verdict.reward >= 1.0,
        "extracted_answer": verdict.extracted_answer,
        "method": verdict.scoring_details.get("method"),
        "details": verdict.scoring_details,
    }
