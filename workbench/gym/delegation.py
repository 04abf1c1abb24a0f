"""``solver.type: gym_delegation``: a NeMo Gym agent server runs each attempt; nel stores it and scores it again.

The benchmark's problem goes to the agent's ``/run`` as a Gym row (``workbench.gym.rows``, the shape
``nel serve --export-data`` writes); the agent seeds its resources server, drives its own model and tool loop, and
returns the Responses-API response with its resources server's ``/verify`` verdict. nel keeps the response and the
transcript (as ``nel import gym`` maps a rollout: ``workbench.gym.importer``), and scores the final answer with the
benchmark's own scorer unless ``trust_reward`` is set. Gym's reward is kept beside nel's in the step's
``scoring_details`` (``gym_reward``, ``rewards_disagree``), so the run can report how often the two disagree.

The engine sees two ordinary pieces: ``DelegatedEnvironment`` (the benchmark, with one attempt object per attempt,
which carries the row and, once the agent has answered, Gym's verdict) and ``GymDelegationSolver`` (the ``/run``
call, retried as the model client retries; an agent that stays down, errs or times out is the attempt's
``server_error``/``timeout``, as a model endpoint's would be).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from workbench.engine.verify_pool import Scoring, default_verifier
from workbench.environments.base import Capabilities, EvalEnvironment
from workbench.environments.wrapped import Wrapped
from workbench.errors import UsageError
from workbench.gym.agents import GymAgent
from workbench.gym.importer import _reply, _tokens, scrub
from workbench.gym.rows import gym_row
from workbench.model.client import ModelResponse
from workbench.model.config import ModelConfig
from workbench.model.failures import classify_http_error
from workbench.solvers.base import AttemptContext, SolverOutput
from workbench.solvers.tools import ToolBox
from workbench.store.reader import Store
from workbench.types import SeedResult, VerifyResult

RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0)
ECHOED = ("response", "responses_create_params", "ng_trajectory", "question", "metadata", "expected_answer",
          "options", "uuid", "task_id", "benchmark", "eval_type", "_ng_task_index", "_ng_rollout_index")
"""Fields of Gym's verdict that only echo the row sent (or the response, stored in its own columns)."""


@dataclass(frozen=True, slots=True)
class DelegationSettings:
    """What a ``gym_delegation`` solver of the spec asks for."""

    agent: GymAgent
    trust_reward: bool = False
    timeout: float = 600.0
    max_concurrent: int | None = None
    max_retries: int = 3
    system_prompt: str | None = None


class DelegatedAttempt:
    """One attempt: the row the agent is sent, and (once it answered) Gym's verdict, which ``verify`` weighs."""

    seed_ms = 0.0
    tools: ToolBox | None = None

    def __init__(self, owner: DelegatedEnvironment, seed: SeedResult, row: dict[str, Any]) -> None:
        self._owner, self.seed, self.row = owner, seed, row
        self.result: dict[str, Any] | None = None

    async def verify(self, response: str, model: ModelResponse) -> VerifyResult:
        """nel's verdict (or Gym's, with ``trust_reward``), with Gym's reward beside it."""
        result = self.result or {}
        gym = scrub({k: v for k, v in result.items() if k not in ECHOED})
        gym_reward = _number(result.get("reward"))
        if self._owner.settings.trust_reward:
            reward = 0.0 if gym_reward is None else gym_reward
            extracted = result.get("extracted_answer")
            details = {"method": "gym", "gym_reward": gym_reward, "trusted": "gym", "gym": gym}
            return VerifyResult(reward, None if extracted is None else str(extracted), details)
        verdict = await self._owner.scoring.verify(response, self.seed.expected_answer, dict(self.seed.metadata))
        details = {**verdict.scoring_details, "gym_reward": gym_reward,
                   "rewards_disagree": gym_reward is not None and gym_reward != verdict.reward, "gym": gym}
        return VerifyResult(verdict.reward, verdict.extracted_answer, details, verdict.metadata)

    async def close(self) -> None:
        """Nothing to release: the agent's session ends with its ``/run``."""


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


class _Opener:
    def __init__(self, owner: DelegatedEnvironment) -> None:
        self._owner = owner

    async def begin(self, seed: SeedResult, attempt: int) -> DelegatedAttempt:
        owner = self._owner
        idx = owner.index_of(seed)
        row = gym_row(owner.inner, idx, owner.settings.system_prompt, seed=seed)
        row["_ng_task_index"], row["_ng_rollout_index"] = idx, attempt  # as Gym's own rollout collection numbers
        return DelegatedAttempt(owner, seed, row)


class DelegatedEnvironment(Wrapped):
    """``inner``, its attempts run by a Gym agent: seeded and identified as ``inner``, scored by ``inner``'s scorer
    (in threads: the event loop is shared with every other attempt) unless Gym's reward is trusted."""

    capabilities = Capabilities(remote_attempts=True)

    def __init__(self, inner: EvalEnvironment, settings: DelegationSettings) -> None:
        if inner.capabilities.remote_attempts:
            raise UsageError(f"{inner.name}: its attempts already run on a server or in a sandbox; a gym_delegation "
                             "solver runs a built-in, lm-eval or BYOB benchmark")
        self.inner, self.settings = inner, settings
        self.name = inner.name
        self.max_response_chars = inner.max_response_chars
        self._indices: dict[str, int] = {}
        self._scoring: Scoring | None = None

    @property
    def scoring(self) -> Scoring:
        if self._scoring is None:
            self._scoring = default_verifier(self.inner)
        return self._scoring

    def seed(self, idx: int) -> SeedResult:
        seed = self.inner.seed(idx)
        self._indices[seed.task_id] = idx
        return seed

    def index_of(self, seed: SeedResult) -> int:
        """The problem index a seed came from (its row's ``uuid`` and a multiple-choice row's options need it)."""
        idx = seed.metadata.get("idx")
        return idx if isinstance(idx, int) else self._indices[seed.task_id]

    def verify(self, response: str, expected: str, **metadata: Any) -> VerifyResult:
        raise UsageError(f"{self.name}: verified per attempt, once its Gym agent has answered (the engine's hook)")

    @asynccontextmanager
    async def attempt_worker(self) -> AsyncIterator[_Opener]:  # type: ignore[override]
        yield _Opener(self)

    def describe(self) -> dict[str, Any]:
        return {**self.inner.describe(), "solver": "gym_delegation", "gym_agent": self.settings.agent.name}


class GymDelegationSolver:
    """Each attempt through the Gym agent's ``/run`` (see the module docstring)."""

    name = "gym_delegation"

    def __init__(self, model: ModelConfig, settings: DelegationSettings) -> None:
        self.model, self.settings = model, settings
        self._gates: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}

    def identity(self) -> dict[str, Any]:
        s = self.settings
        return {"solver": self.name, **self.model.identity(),
                "gym_agent": s.agent.name, "gym_agent_implementation": s.agent.implementation,
                "trust_reward": s.trust_reward}

    @asynccontextmanager
    async def worker(self) -> AsyncIterator[_DelegationWorker]:
        gate = None
        if self.settings.max_concurrent is not None:  # one per event loop, shared by every worker of the run
            gate = self._gates.setdefault(asyncio.get_running_loop(), asyncio.Semaphore(self.settings.max_concurrent))
        timeout = httpx.Timeout(self.settings.timeout, connect=min(10.0, self.settings.timeout))
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=False) as client:
            yield _DelegationWorker(self, client, gate)

    async def preflight(self) -> None:
        """The agent was found by name before the run (``workbench.gym.agents``); its /run is not probed, since
        a rollout is a real attempt."""


class _DelegationWorker:
    def __init__(self, solver: GymDelegationSolver, client: httpx.AsyncClient,
                 gate: asyncio.Semaphore | None) -> None:
        self._solver, self._client, self._gate = solver, client, gate

    async def solve(self, seed: SeedResult, attempt: int, context: AttemptContext | None = None) -> SolverOutput:
        if not isinstance(context, DelegatedAttempt):
            raise UsageError("a gym_delegation solver runs only a benchmark wrapped for delegation (runs.py)")
        body = {**context.row, "responses_create_params": {**context.row["responses_create_params"],
                                                           **_sampling(self._solver.model)}}
        started = time.perf_counter()
        if self._gate is None:
            result, model = await self._run(body)
        else:
            async with self._gate:
                result, model = await self._run(body)
        model.latency_ms = (time.perf_counter() - started) * 1000.0
        params = body["responses_create_params"]
        if result is None:
            return SolverOutput(response="", messages=_reply(params, {}).messages, model=model)
        context.result = result
        found = result.get("response")
        response: dict[str, Any] = found if isinstance(found, dict) else {}
        reply = _reply(params, scrub(response))
        tokens = _tokens(response)
        model.text, model.finish_reason, model.reasoning = reply.response, reply.finish_reason, reply.reasoning
        model.tool_calls = reply.tool_calls
        model.prompt_tokens, model.completion_tokens = tokens["prompt_tokens"], tokens["completion_tokens"]
        model.total_tokens, model.reasoning_tokens = tokens["total_tokens"], tokens["reasoning_tokens"]
        model.response_id = response.get("id") if isinstance(response.get("id"), str) else None
        return SolverOutput(response=reply.response, messages=reply.messages, model=model)

    async def _run(self, body: dict[str, Any]) -> tuple[dict[str, Any] | None, ModelResponse]:
        """POST ``/run``, retrying transport failures and 408/429/5xx; the verdict, or the failure as the model
        client would report it."""
        url = f"{self._solver.settings.agent.url}/run"
        content = orjson.dumps(body, default=str)
        retries = self._solver.settings.max_retries
        failure: ModelResponse = ModelResponse(failure="server_error", error="no answer")
        for n in range(retries + 1):
            if n:
                await asyncio.sleep(BACKOFF_S[min(n - 1, len(BACKOFF_S) - 1)])
            try:
                answer = await self._client.post(url, content=content, headers={"Content-Type": "application/json"})
            except httpx.TimeoutException:
                failure = ModelResponse(failure="timeout", n_retries=n,
                                        error=f"the Gym agent at {url} did not answer within "
                                              f"{self._solver.settings.timeout:g} s")
                continue
            except httpx.TransportError as exc:
                reason = (str(exc) or type(exc).__name__).splitlines()[0][:200]
                failure = ModelResponse(failure="server_error", n_retries=n,
                                        error=f"cannot reach the Gym agent at {url}: {reason}")
                continue
            if not answer.is_success:
                text = " ".join(answer.text.split())[:500]
                failure = ModelResponse(failure=classify_http_error(answer.status_code, text),
                                        http_status=answer.status_code, n_retries=n,
                                        error=f"the Gym agent at {url} answered HTTP {answer.status_code}: {text}")
                if answer.status_code in RETRY_STATUS:
                    continue
                return None, failure
            try:
                result = orjson.loads(answer.content)
            except orjson.JSONDecodeError:
                result = None
            if not isinstance(result, dict):
                return None, ModelResponse(failure="server_error", http_status=answer.status_code, n_retries=n,
                                           error=f"the Gym agent at {url} answered with something other than a "
                                                 f"JSON object: {answer.text[:200]!r}")
            return result, ModelResponse(http_status=answer.status_code, n_retries=n)
        return None, failure


def _sampling(model: ModelConfig) -> dict[str, Any]:
    """The run's sampling settings, in the Responses API's names, where the run sets them (the agent's model
    server keeps its own defaults otherwise)."""
    values = {"temperature": model.temperature, "top_p": model.top_p, "max_output_tokens": model.max_tokens}
    return {k: v for k, v in values.items() if v is not None}


_AGREEMENT_SQL = """
SELECT count(*) FILTER (WHERE json_extract(scoring_details, '$.gym_reward') IS NOT NULL
                          AND json_type(json_extract(scoring_details, '$.gym_reward')) <> 'NULL'),
       count(*) FILTER (WHERE json_extract_string(scoring_details, '$.rewards_disagree') = 'true'),
       count(*) FILTER (WHERE json_extract_string(scoring_details, '$.trusted') = 'gym')
FROM steps WHERE run_id = ?
"""


def agreement(store: Store, run_id: str) -> dict[str, Any]:
    """How often nel's scorer and Gym's ``/verify`` disagreed on a delegated run's answers: attempts Gym scored,
    how many of them nel scored otherwise, and the rate (None when there was nothing to compare, as when
    ``trust_reward`` took Gym's reward without scoring again)."""
    compared, disagree, trusted = (int(v or 0) for v in store.rows(_AGREEMENT_SQL, [run_id])[0])
    if trusted:
        return {"reward": "gym", "gym_scored": compared, "compared": 0, "disagree": 0, "disagreement_rate": None}
    return {"reward": "nel", "gym_scored": compared, "compared": compared, "disagree": disagree,
            "disagreement_rate": disagree / compared if compared else None}
