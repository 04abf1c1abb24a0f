"""Environments whose attempts live on a server: per-attempt sessions and awaitable verification.

A local benchmark seeds once per task and verifies in-process, so ``EvalEnvironment.seed``/``verify``
are plain calls. A remote one (``gym://``) opens a session per attempt before the model is called
(NeMo Gym's ``/seed_session`` and its cookie) and verifies over HTTP, which must not block the event
loop that the other workers share. Such an environment offers ``attempt_worker()``: each engine worker
opens one (its own connection, as with the solver) and drives every attempt through it.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Protocol, runtime_checkable

from workbench.environments.base import SeedResult, VerifyResult
from workbench.model.client import ModelResponse


class RemoteAttempt(Protocol):
    """One attempt's server-side session, opened before the model call."""

    seed_ms: float
    """Time spent opening the session (added to the step's seed time)."""

    async def verify(self, response: str, model: ModelResponse) -> VerifyResult:
        """Score the final ``response`` (``model`` carries reasoning, tool calls, usage)."""
        ...


class AttemptWorker(Protocol):
    async def begin(self, seed: SeedResult, attempt: int) -> RemoteAttempt: ...


@runtime_checkable
class RemoteEnvironmentLike(Protocol):
    def attempt_worker(self) -> AbstractAsyncContextManager[AttemptWorker]: ...
