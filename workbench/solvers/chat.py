"""``ChatSolver``: NeMo Evaluator's name for one model call per attempt, over a ``workbench.api.ModelClient``.

It is the engine's ``SimpleSolver`` (each engine worker opens its own connection from the client's settings),
plus the two things the seed's solver carries: a system prompt, and the client's bound on requests in flight,
which ``workbench.api.run_evaluation`` applies to the run's concurrency.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

from workbench.model.config import ModelConfig
from workbench.solvers.simple import SimpleSolver


class ConfiguredClient(Protocol):
    """What a solver needs of a client: its endpoint and sampling settings, and how many requests it allows."""

    @property
    def config(self) -> ModelConfig: ...

    @property
    def max_concurrent(self) -> int: ...


class ChatSolver(SimpleSolver):
    """Send each seeded prompt (as chat messages) once, with ``system_prompt`` first if given."""

    def __init__(self, client: ConfiguredClient, system_prompt: str | None = None) -> None:
        config = client.config
        if system_prompt is not None:
            config = dataclasses.replace(config, system_prompt=system_prompt)
        super().__init__(config)
        self.max_concurrent = client.max_concurrent
