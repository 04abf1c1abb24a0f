"""Progress events: what front ends subscribe to while the engine runs.

The engine updates one ``RunProgress`` per run and calls every listener once
per completed step with the step's row; listeners must be cheap (the CLI bar
only reads the counters on its own refresh timer).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from workbench.types import Step


@dataclass(slots=True)
class RunProgress:
    """Counters for the live view of one run (one shard, in a sharded run)."""

    run_id: str
    total: int
    already_done: int = 0
    done: int = 0
    n_pass: int = 0
    n_errors: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    started: float = field(default_factory=time.monotonic)
    finished: bool = False

    @property
    def completed(self) -> int:
        """Steps in the run so far, including those done before a resume."""
        return self.already_done + self.done

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    @property
    def steps_per_s(self) -> float:
        elapsed = self.elapsed
        return self.done / elapsed if elapsed > 0 else 0.0

    @property
    def running_pass_rate(self) -> float | None:
        """Share of this session's attempts that passed (pass@1 over attempts so far)."""
        return self.n_pass / self.done if self.done else None

    def record(self, row: Step) -> None:
        self.done += 1
        if row["passed"]:
            self.n_pass += 1
        category = row["failure_category"]
        if category is not None:
            self.failures[category] += 1
            if row["error"] is not None:
                self.n_errors += 1


StepListener = Callable[[RunProgress, Step], None]
