"""The mock model's skill profile: how likely it is to solve each task, and whether it does.

Every number comes from a stable hash (BLAKE2b) of the skill seed and the task
key, never from Python's per-process randomised ``hash()``: the same
(skill seed, task, request seed, attempt) always gives the same verdict, in
every process. Roughly ``ALWAYS_SHARE`` of tasks are always solved,
``NEVER_SHARE`` never, and the rest with a probability spread uniformly over
``(P_LOW, P_HIGH)`` — the always / sometimes / never mix real models show.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

ALWAYS_SHARE = 0.20
NEVER_SHARE = 0.15
P_LOW, P_HIGH = 0.05, 0.95

_TWO_53 = float(2**53)


def _uniform(chunk: bytes) -> float:
    """A float in [0, 1) from 8 hash bytes (53 bits, so it can never round up to 1.0)."""
    return (int.from_bytes(chunk, "little") >> 11) / _TWO_53


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


@dataclass(frozen=True, slots=True)
class Attempt:
    """The verdict on one attempt: ``correct``, plus ``choice`` bits that pick its wording."""

    correct: bool
    choice: int


class SkillProfile:
    """Per-task pass probabilities and per-attempt verdicts for one ``skill_seed``."""

    __slots__ = ("_p", "skill_seed")

    def __init__(self, skill_seed: int = 0) -> None:
        self.skill_seed = skill_seed
        self._p: dict[str, float] = {}

    def pass_probability(self, task_key: str) -> float:
        """The probability that an attempt at ``task_key`` is correct (0 and 1 included)."""
        p = self._p.get(task_key)
        if p is None:
            d = _digest(f"skill\x1f{self.skill_seed}\x1f{task_key}")
            kind = _uniform(d[:8])
            if kind < ALWAYS_SHARE:
                p = 1.0
            elif kind < ALWAYS_SHARE + NEVER_SHARE:
                p = 0.0
            else:
                spread = _uniform(d[8:])
                p = P_LOW + (P_HIGH - P_LOW) * spread
                # the open interval: keep "sometimes" tasks strictly between the ends
                p = min(max(p, P_LOW + 1e-9), P_HIGH - 1e-9)
            self._p[task_key] = p
        return p

    def attempt(self, task_key: str, request_seed: object = None, attempt: object = 0) -> Attempt:
        """Decide attempt ``attempt`` (with the request's ``seed``, if any) at ``task_key``."""
        p = self.pass_probability(task_key)
        seed = "" if request_seed is None else request_seed
        d = _digest(f"attempt\x1f{self.skill_seed}\x1f{task_key}\x1f{seed}\x1f{attempt}")
        u = _uniform(d[:8])
        return Attempt(correct=u < p, choice=int.from_bytes(d[8:], "little"))
