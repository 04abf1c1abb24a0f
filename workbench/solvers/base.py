"""Solvers turn a seeded problem into a final response and its transcript.

A solver is shared by the whole run; each engine worker opens its own
``SolverWorker`` (holding its own connection), so workers never contend on a
shared client.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from workbench.model.client import ModelResponse
from workbench.types import Message, SeedResult

if TYPE_CHECKING:
    from workbench.solvers.tools import ToolBox


@dataclass(slots=True)
class SolverOutput:
    """The final response, the messages sent for it, and what the model call reported.

    ``messages`` is the conversation as sent in the final model call; the reply itself is
    ``response`` (plus ``model.tool_calls``) and is not repeated there, so the store keeps
    each reply once. The ``step_messages`` view shows the two together.
    """

    response: str
    messages: list[Message]
    model: ModelResponse
    request_hash: str | None = None
    request_seed: int | None = None
    turns: list[dict[str, Any]] | None = None
    """An agent's every model call and tool call, turn by turn (``None`` for a single call)."""


@runtime_checkable
class AttemptContext(Protocol):
    """What the environment opened for one attempt before the model is called (a sandbox, a server
    session), as far as a solver can use it."""

    @property
    def tools(self) -> ToolBox | None: ...


class SolverWorker(Protocol):
    async def solve(self, seed: SeedResult, attempt: int, context: AttemptContext | None = None) -> SolverOutput: ...


class Solver(Protocol):
    name: str

    def identity(self) -> dict[str, Any]:
        """Everything about the solver (and its model) that changes answers; no secrets."""
        ...

    def worker(self) -> AbstractAsyncContextManager[SolverWorker]:
        """Per-worker resources (a connection), opened once per engine worker."""
        ...

    async def preflight(self) -> None:
        """Fail fast, with a clear message, when the model cannot be reached at all."""
        ...
