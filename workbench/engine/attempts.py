"""Environments whose attempts live on a server: per-attempt sessions and awaitable verification.

A local benchmark seeds once per task and verifies in-process, so ``EvalEnvironment.seed``/``verify``
are plain calls. A remote one (``gym://``) opens a session per attempt before the model is called
(NeMo Gym's ``/seed_session`` and its cookie) and verifies over HTTP, which must not block the event
loop that the other workers share. Such an environment offers ``attempt_worker()``: each engine worker
opens one (its own connection, as with the solver) and drives every attempt through it.
"""

from __future__ import annotations

from typing import Protocol

from workbench.model.client import ModelResponse
from workbench.solvers.tools import ToolBox
from workbench.types import SeedResult, VerifyResult


class RemoteAttempt(Protocol):
    """One attempt's session (on a server, or a sandbox), opened before the model call; the solver's
    ``AttemptContext`` too."""

    seed_ms: float
    """Time spent opening the session (added to the step's seed time)."""

    @property
    def tools(self) -> ToolBox | None:
        """The tools the attempt offers an agent (None: none)."""
        ...

    async def verify(self, response: str, model: ModelResponse) -> VerifyResult:
        """Score the final ``response`` (``model`` carries reasoning, tool calls, usage)."""
        ...

    async def close(self) -> None:
        """End the session (its sandbox goes), whatever happened, Ctrl-C included."""
        ...


class AttemptWorker(Protocol):
    async def begin(self, seed: SeedResult, attempt: int) -> RemoteAttempt: ...
