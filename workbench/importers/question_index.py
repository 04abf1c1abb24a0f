"""Which problem of a benchmark nel knows is this text? Finding a question inside another harness's prompt.

Other harnesses wrap a benchmark's question in their own template ("Solve the following math problem step by
step... {question} ... ANSWER: $ANSWER"), so equality is not enough: the question is found *inside* the text,
both normalised (``normalise``: NFKC, whitespace collapsed, case folded). As in the mock model's answer index,
questions are keyed by their first ``PREFIX_CHARS`` normalised characters, so a search costs one dictionary
lookup per position of the text; when several questions are found, the one found last wins (few-shot prompts
end with the question asked), the longer one at the same place.
"""

from __future__ import annotations

from workbench.environments import benchmark_names, get_environment
from workbench.environments.dataset import DatasetEnvironment
from workbench.errors import UsageError
from workbench.importers.lmeval import normalise

PREFIX_CHARS = 32


class QuestionIndex:
    """nel's task ids of one benchmark's problems, found by their question in a text (loaded on first need).

    ``failure`` says why nothing can pair (no benchmark named, unknown, data not here) once a lookup was tried.
    """

    def __init__(self, benchmark: str | None) -> None:
        self.benchmark = benchmark
        self.failure: str | None = None
        self._exact: dict[str, list[str]] | None = None
        self._by_prefix: dict[int, dict[str, list[tuple[str, str]]]] = {}

    def task_id(self, text: str) -> str | None:
        """The task id of the one problem whose question is ``text`` or is found in it, else ``None``."""
        exact = self._load()
        if exact is None:
            return None
        norm = normalise(text)
        found = exact.get(norm)
        if found is not None:
            return found[0] if len(set(found)) == 1 else None
        return self._search(norm)

    def _search(self, norm: str) -> str | None:
        best: tuple[int, int, set[str]] = (-1, 0, set())  # position, question length, task ids
        for width, table in self._by_prefix.items():
            for pos in range(len(norm) - width + 1):
                for question, task_id in table.get(norm[pos:pos + width], ()):
                    if not norm.startswith(question, pos):
                        continue
                    key = (pos, len(question))
                    if key > best[:2]:
                        best = (pos, len(question), {task_id})
                    elif key == best[:2]:
                        best[2].add(task_id)
        return next(iter(best[2])) if len(best[2]) == 1 else None

    def _load(self) -> dict[str, list[str]] | None:
        if self._exact is not None or self.failure is not None:
            return self._exact
        name = self.benchmark
        if name is None or name not in benchmark_names():
            self.failure = "no benchmark nel knows is named (pass --benchmark NAME to pair)"
            return None
        try:
            env = get_environment(name)
        except UsageError as exc:  # a hub benchmark whose data is not here
            self.failure = f"{name}'s problems cannot be loaded: {exc}"
            return None
        if not isinstance(env, DatasetEnvironment):
            self.failure = f"{name} is not a dataset of questions to match samples against"
            return None
        field = env.definition.input_field
        exact: dict[str, list[str]] = {}
        for idx, row in enumerate(env.rows):
            question = row.get(field)
            if not isinstance(question, str) or not question.strip():
                continue
            norm, task_id = normalise(question), env.seed(idx).task_id
            exact.setdefault(norm, []).append(task_id)
            width = min(PREFIX_CHARS, len(norm))
            self._by_prefix.setdefault(width, {}).setdefault(norm[:width], []).append((norm, task_id))
        self._exact = exact
        return exact
