"""Which nel task a Gym rollout row is: what lets an imported run pair, task by task, with a native run.

A native run names each problem by ``task_id``, the hash of the benchmark's own data row
(``workbench.environments.dataset.task_id_of``). A Gym row cannot be hashed into that id (its fields are
the prompt as sent, not the data row), so the id is found, never guessed:

1. the row's own ``task_id`` (``nel serve --export-data`` writes it, Gym copies the row's fields into its
   rollouts and materialized inputs): nel's id, kept as it is;
2. else its prompt, looked up among the problems of the benchmark the run names (``--benchmark``, or the
   row's ``benchmark`` / ``eval_type``): the id the native engine gave the problem with that prompt (the
   expected answer settles prompts the benchmark holds twice);
3. else the task is **unpaired**: it gets an id of its own (``gym-`` and a hash of what the model was
   asked and the expected answer) that pairs it with other Gym imports of the same data, never with a
   native run, and the import names its rows and the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from workbench.environments import benchmark_names, get_environment
from workbench.errors import UsageError

UNPAIRED_PREFIX = "gym-"
"""Ids of unpaired tasks start with it; nel's own ids are bare hex digests, so the two never meet."""
_SHOWN_SPANS = 12


@dataclass(frozen=True, slots=True)
class Resolution:
    """A row's nel task id, or ``None`` with the reason it has none."""

    task_id: str | None
    reason: str | None = None


def _last_user_text(messages: Any) -> str | None:
    for message in reversed(list(messages)):
        content = message.get("content") if isinstance(message, Mapping) else None
        if message.get("role") == "user" and isinstance(content, str):
            return content
    return None


class TaskResolver:
    """Finds nel's task id for Gym rows of one benchmark (its problems are loaded once, on first need)."""

    def __init__(self, benchmark: str | None) -> None:
        self.benchmark = benchmark
        self._index: dict[str, list[tuple[str, str]]] | None = None  # prompt -> [(expected, task_id)]
        self._failure: str | None = None

    def resolve(self, row: Mapping[str, Any], prompt: str | None, expected: str | None) -> Resolution:
        """``row``'s id: its own ``task_id``, else the benchmark's problem with this ``prompt``."""
        own = row.get("task_id")
        if isinstance(own, str) and own:
            return Resolution(own)
        if not prompt:
            return Resolution(None, "no task_id and no prompt (responses_create_params.input)")
        index = self._problems()
        if index is None:
            return Resolution(None, f"no task_id, and {self._failure}")
        found = {task_id for _, task_id in index.get(prompt, ())}
        if len(found) > 1:
            found = {task_id for exp, task_id in index[prompt] if exp == expected}
            if len(found) != 1:
                return Resolution(None, f"no task_id, and the prompt is {len(index[prompt])} {self.benchmark} "
                                        "problems the expected answer does not tell apart")
        if not found:
            return Resolution(None, f"no task_id, and the prompt is none of {self.benchmark}'s problems")
        return Resolution(found.pop())

    def _problems(self) -> dict[str, list[tuple[str, str]]] | None:
        """The benchmark's problems by prompt text (the seed's prompt and its last user message)."""
        if self._index is not None or self._failure is not None:
            return self._index
        name = self.benchmark
        if name is None:
            self._failure = "no benchmark named to match the prompt against (name one with --benchmark)"
            return None
        if name not in benchmark_names():
            self._failure = (f"{name!r} is not a benchmark nel knows, so its prompt cannot be matched "
                             "(name one with --benchmark)")
            return None
        try:
            env = get_environment(name)
            index: dict[str, list[tuple[str, str]]] = {}
            for idx in range(len(env)):
                seed = env.seed(idx)
                for text in {seed.prompt, _last_user_text(seed.messages)}:
                    if text:
                        index.setdefault(text, []).append((seed.expected_answer, seed.task_id))
        except UsageError as exc:  # a hub benchmark whose data is not here (offline, never pulled)
            self._failure = f"{name}'s problems cannot be loaded to match the prompt: {exc}"
            return None
        self._index = index
        return index


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
