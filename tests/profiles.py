"""Hypothesis profiles (registered by ``tests/conftest.py``) and ``examples``, a property test's example count.

``default`` is what ``make test`` runs: a quarter of each property test's examples, derandomized (the same
examples on every run, so a red CI is a real failure, reproducible) and no deadline (a loaded machine is not
a bug). ``pytest --hypothesis-profile=thorough`` runs ten times each test's examples, freshly drawn.
"""

from __future__ import annotations

from hypothesis import settings

settings.register_profile("default", max_examples=25, deadline=None, derandomize=True, database=None)
settings.register_profile("thorough", max_examples=1000, deadline=None)


def examples(n: int) -> int:
    """``n`` examples scaled to the loaded profile: ``n`` is what the test runs under hypothesis' own 100."""
    return max(5, round(n * settings().max_examples / 100))
