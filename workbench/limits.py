"""Sizes nel refuses past a limit, so a typo cannot turn into a memory bomb.

``--repeats 1000000000000`` was accepted and the run grew by ~350 MB/s until the machine ran out. Each limit
is generous for real evaluations and can be raised by an environment variable, which the message names (an
environment variable reaches every shard worker, local, Ray or SLURM, with no flag to pass on).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from workbench.errors import UsageError


@dataclass(frozen=True, slots=True)
class Limit:
    what: str
    env: str
    default: int

    @property
    def value(self) -> int:
        """The limit in force: ``$ENV`` when it holds a positive whole number, else the default."""
        text = os.environ.get(self.env, "").replace("_", "").replace(",", "").strip()
        if not text:
            return self.default
        if not text.isdigit() or int(text) < 1:
            raise UsageError(f"{self.env}: expected a positive whole number, got {os.environ[self.env]!r}")
        return int(text)

    def exceeded(self, value: int) -> str | None:
        """Why ``value`` is refused (naming the limit and how to raise it), or None when it is within."""
        limit = self.value
        if value <= limit:
            return None
        return f"more than nel's limit of {limit:,} {self.what}; set {self.env} to raise it"

    def check(self, name: str, value: int) -> int:
        """``value`` if it is within the limit; else a ``UsageError`` naming ``name``, the limit and its knob."""
        reason = self.exceeded(value)
        if reason is not None:
            raise UsageError(f"{name} {value:,}: {reason}")
        return value


MAX_REPEATS = Limit("repeats per problem", "NEL_MAX_REPEATS", 100_000)
MAX_STEPS = Limit("steps (problems x repeats) in one run", "NEL_MAX_STEPS", 50_000_000)
MAX_CONCURRENT = Limit("requests in flight", "NEL_MAX_CONCURRENT", 10_000)
