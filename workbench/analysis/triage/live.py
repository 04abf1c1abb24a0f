"""A run while it is written: rates over a window of polls (the snapshot itself is read by
``workbench.store.queries.triage_live``)."""

from __future__ import annotations

from collections import deque

from workbench.store.queries.triage_runs import RunRow


class RateMeter:
    """Steps/s and tokens/s over the last ``window_s`` seconds of samples (the clock is the caller's)."""

    def __init__(self, window_s: float = 10.0) -> None:
        self.window_s = window_s
        self._samples: deque[tuple[float, int, int]] = deque()

    def add(self, t: float, steps: int, tokens: int) -> None:
        self._samples.append((t, steps, tokens))
        while len(self._samples) > 2 and t - self._samples[1][0] >= self.window_s:
            self._samples.popleft()

    def rates(self) -> tuple[float, float] | None:
        """(steps/s, tokens/s) between the oldest and newest sample; None until time has passed."""
        if len(self._samples) < 2:
            return None
        (t0, s0, k0), (t1, s1, k1) = self._samples[0], self._samples[-1]
        if t1 <= t0:
            return None
        return (s1 - s0) / (t1 - t0), (k1 - k0) / (t1 - t0)


def average_rates(run: RunRow) -> tuple[float, float] | None:
    """A run's mean steps/s and tokens/s over its wall time (for a run that is not writing now)."""
    span = run.duration_s
    if not span:
        return None
    return run.n_steps / span, run.total_tokens / span
