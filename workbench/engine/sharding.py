"""Which contiguous slice of the problems this process evaluates.

Shards come from ``NEL_SHARD_IDX`` / ``NEL_TOTAL_SHARDS`` or, under a SLURM job
array, ``SLURM_ARRAY_TASK_ID`` / ``SLURM_ARRAY_TASK_COUNT``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from workbench.errors import UsageError


@dataclass(frozen=True, slots=True)
class Shard:
    idx: int = 0
    total: int = 1

    def __post_init__(self) -> None:
        if self.total < 1:
            raise UsageError(f"total shards must be at least 1, got {self.total}")
        if not 0 <= self.idx < self.total:
            raise UsageError(f"shard index {self.idx} is outside 0..{self.total - 1}")

    @property
    def sharded(self) -> bool:
        return self.total > 1

    def slice(self, start: int, end: int) -> tuple[int, int]:
        """This shard's contiguous part of ``[start, end)``; sizes differ by at most one."""
        n = end - start
        lo = start + (n * self.idx) // self.total
        hi = start + (n * (self.idx + 1)) // self.total
        return lo, hi


def _int(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env[name])
    except ValueError:
        raise UsageError(f"environment variable {name}={env[name]!r} is not an integer") from None


def shard_from_env(env: Mapping[str, str] | None = None) -> Shard:
    env = os.environ if env is None else env
    if "NEL_SHARD_IDX" in env or "NEL_TOTAL_SHARDS" in env:
        if "NEL_SHARD_IDX" not in env or "NEL_TOTAL_SHARDS" not in env:
            raise UsageError("set both NEL_SHARD_IDX and NEL_TOTAL_SHARDS, or neither")
        return Shard(_int(env, "NEL_SHARD_IDX"), _int(env, "NEL_TOTAL_SHARDS"))
    if "SLURM_ARRAY_TASK_ID" in env and "SLURM_ARRAY_TASK_COUNT" in env:
        offset = _int(env, "SLURM_ARRAY_TASK_MIN") if "SLURM_ARRAY_TASK_MIN" in env else 0
        return Shard(_int(env, "SLURM_ARRAY_TASK_ID") - offset, _int(env, "SLURM_ARRAY_TASK_COUNT"))
    return Shard()
