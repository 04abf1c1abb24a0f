"""Which nel task a Gym rollout row is: what lets an imported run pair, task by task, with a native run.

A native run names each problem by ``task_id``, the hash of the benchmark's own data row
(``workbench.environments.dataset.task_id_of``). A Gym row cannot be hashed into that id (its fields are
the prompt as sent, not the data row), so the id is found, never guessed:

1. the row's own ``task_id`` (``nel serve --export-data`` writes it, Gym copies the row's fields into its
   rollouts and materialized inputs): nel's id, kept as it is;
2. else its prompt, looked up among the problems of the benchmark the run names (``--benchmark``, or the
   row's ``benchmark`` / ``eval_type``) by the rule every importer shares
   (``workbench.environments.question_index``): the prompt nel sends for a problem, else the problem's
   question, equal or inside the prompt (the expected answer settles questions the benchmark holds twice);
3. else the task is **unpaired**: it gets an id of its own (``gym-`` and a hash of what the model was
   asked and the expected answer) that pairs it with other Gym imports of the same data, never with a
   native run, and the import names its rows and the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from workbench.environments import benchmark_names
from workbench.environments.question_index import QuestionIndex
from workbench.errors import UsageError

UNPAIRED_PREFIX = "gym-"
"""Ids of unpaired tasks start with it; nel's own ids are bare hex digests, so the two never meet."""
_SHOWN_SPANS = 12


@dataclass(frozen=True, slots=True)
class Resolution:
    """A row's nel task id, or ``None`` with the reason it has none."""

    task_id: str | None
    reason: str | None = None


class TaskResolver:
    """Finds nel's task id for Gym rows of one benchmark: the row's own ``task_id``, else its prompt among the
    benchmark's problems by the rule every importer shares (``workbench.environments.question_index``)."""

    def __init__(self, benchmark: str | None) -> None:
        self.benchmark = benchmark
        self._index = QuestionIndex(benchmark)

    def resolve(self, row: Mapping[str, Any], prompt: str | None, expected: str | None) -> Resolution:
        """``row``'s id: its own ``task_id``, else the benchmark's problem this ``prompt`` asks."""
        own = row.get("task_id")
        if isinstance(own, str) and own:
            return Resolution(own)
        if not prompt:
            return Resolution(None, "no task_id and no prompt (responses_create_params.input)")
        match = self._index.find(prompt, expected=expected)
        return Resolution(match.task_id) if match.task_id else Resolution(None, f"no task_id, and {match.reason}")


def benchmark_metric(benchmark: str) -> str | None:
    """The metric a native run of ``benchmark`` records (its scorer's name), ``None`` for one nel does not know."""
    if benchmark not in benchmark_names():
        return None
    from workbench.environments.registry import describe_benchmark

    try:
        scorer = describe_benchmark(benchmark).get("scorer")
    except UsageError:
        return None
    return str(scorer) if scorer else None


def known_benchmark(name: Any) -> bool:
    return isinstance(name, str) and name in benchmark_names()


@dataclass(slots=True)
class LineSpans:
    """Line numbers as sorted spans (``3-7, 12``): what the unpaired report names, in little memory."""

    spans: list[list[int]] = field(default_factory=list)
    count: int = 0

    def add(self, line: int) -> None:
        self.count += 1
        if self.spans and self.spans[-1][1] == line - 1:
            self.spans[-1][1] = line
        else:
            self.spans.append([line, line])

    def __str__(self) -> str:
        shown = [f"{a}-{b}" if b > a else str(a) for a, b in self.spans[:_SHOWN_SPANS]]
        more = len(self.spans) - _SHOWN_SPANS
        return ", ".join(shown) + (f", ... ({more} more spans)" if more > 0 else "")


@dataclass(frozen=True, slots=True)
class UnpairedRows:
    """Rows of one file whose tasks could not be paired, for one reason."""

    file: str
    rows: str
    n_rows: int
    reason: str

    def __str__(self) -> str:
        noun = "row" if self.n_rows == 1 and "-" not in self.rows else "rows"
        return f"{self.file} {noun} {self.rows}: {self.reason}"
