"""Which built-in problem is this prompt? The mock model's answer key.

``AnswerIndex`` maps the exact prompt the engine renders (``env.seed(i).prompt``)
to its task in one dictionary lookup. A prompt wrapped differently (a system
prompt, a user template, completions-style text) falls back to finding a known
question verbatim inside the text: questions are indexed by their first
``PREFIX_CHARS`` characters, so the search costs one dictionary lookup per
position of the text rather than one scan per known question, and its result is
cached per prompt hash.
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from workbench.datasources import DataNotPresent
from workbench.environments import VerifyResult, benchmark_names, get_environment
from workbench.environments.registry import describe_benchmark
from workbench.errors import NelError
from workbench.mock.images import seed_key

PREFIX_CHARS = 32
"""Length of the question prefix the fallback search keys on (shorter questions use their length)."""

CACHE_LIMIT = 65_536
"""Fallback results kept before the cache starts afresh: bounds memory under endless unknown prompts."""


@dataclass(frozen=True, slots=True)
class Task:
    """One problem the mock model knows: where it comes from and what its answer is.

    ``key`` (``"<benchmark>:<task_id>"``) identifies the problem by content, so the
    skill profile follows a problem even if the data file is reordered.
    ``verify`` is the benchmark's scorer, which the responder uses to make sure
    its wrong replies really score as wrong (``None`` for code benchmarks, whose
    scoring needs a sandbox); ``scorer`` is its name, which decides the form of
    the replies (a letter, a short answer, a worked solution, a code block).
    ``distractors`` are other problems' answers that score 0 here: the short-answer
    replies' plausible wrong answers.
    """

    benchmark: str
    key: str
    index: int
    prompt: str
    question: str
    answer: str
    solution: str | None
    verify: Callable[[str, str], VerifyResult] | None = field(default=None, repr=False, compare=False)
    scorer: str = ""
    distractors: tuple[str, ...] = ()


SHORT_ANSWER_SCORERS = frozenset({"exact", "normalized", "f1", "aliases"})
"""Scorers whose benchmarks the mock answers with a bare short answer."""

CODE_SCORERS = frozenset({"code_execution"})
"""Scorers that run code: the mock answers with a code block and never calls their ``verify``."""

SANDBOX_SCORERS = frozenset({"sandbox_state"})
"""Scorers that inspect an agent's sandbox: the mock answers those as an agent and never calls their ``verify``."""

JUDGED_SCORERS = frozenset({"simpleqa_grader"})
"""Benchmarks graded by a judge: the mock answers them with short answers and never calls their ``verify``."""

N_DISTRACTORS = 3


def load_tasks(benchmarks: Sequence[str] | None = None) -> list[Task]:
    """Read the answer keys of ``benchmarks`` (``None``: every built-in benchmark).

    A named benchmark that cannot be loaded is an error; when all built-ins are
    wanted, one whose data is not present (a hub benchmark not pulled) is skipped
    quietly, without asking the hub, and one that fails to load otherwise is skipped
    with a warning, so the others still work.
    """
    tasks: list[Task] = []
    for name in benchmark_names() if benchmarks is None else benchmarks:
        try:
            if benchmarks is None and describe_benchmark(name).get("present") == "not present":
                continue
            env = get_environment(name)
        except NelError as exc:
            if benchmarks is not None:
                raise
            if isinstance(exc, DataNotPresent):
                continue
            print(f"nel mock model: warning: skipping benchmark {name!r}: {exc}", file=sys.stderr)
            continue
        scorer = str(env.describe().get("scorer", ""))
        verify = None if scorer in CODE_SCORERS | SANDBOX_SCORERS | JUDGED_SCORERS else env.verify
        found: list[Task] = []
        for i, entry in enumerate(env.answer_key()):
            seed = env.seed(i)
            found.append(
                Task(
                    benchmark=env.name,
                    key=f"{env.name}:{seed.task_id}",
                    index=i,
                    prompt=seed_key(seed.prompt, seed.messages),  # a picture's task: its text and image hash
                    question=entry.question,
                    answer=entry.answer,
                    solution=entry.solution,
                    verify=verify,
                    scorer=scorer,
                )
            )
        tasks += with_distractors(found) if scorer in SHORT_ANSWER_SCORERS | JUDGED_SCORERS else found
    return tasks


def _shape(answer: str) -> tuple[int, bool]:
    """What an answer looks like (word count, at most two characters), so a wrong answer can look alike."""
    return len(answer.split()), len(answer) <= 2


def with_distractors(tasks: Sequence[Task]) -> list[Task]:
    """``tasks`` with up to ``N_DISTRACTORS`` other tasks' answers each, alike in shape and scoring 0.

    Candidates are taken at fixed strides through the tasks of the same shape, so the choice is
    deterministic and independent of any hash seed.
    """
    by_shape: dict[tuple[int, bool], list[str]] = {}
    for task in tasks:
        by_shape.setdefault(_shape(task.answer), []).append(task.answer)
    out: list[Task] = []
    for position, task in enumerate(tasks):
        pool = by_shape[_shape(task.answer)] if len(by_shape[_shape(task.answer)]) > 1 else [t.answer for t in tasks]
        picked: list[str] = []
        for step in range(1, len(pool)):
            candidate = pool[(position * 7 + step * 13) % len(pool)]
            if candidate in picked or candidate == task.answer:
                continue
            if task.verify is not None and task.verify(candidate, task.answer).reward != 0.0:
                continue
            picked.append(candidate)
            if len(picked) == N_DISTRACTORS:
                break
        out.append(dataclasses.replace(task, distractors=tuple(picked)))
    return out


class AnswerIndex:
    """Prompt text → ``Task``: exact prompts in O(1), wrapped questions by prefix search."""

    def __init__(self, tasks: Iterable[Task]) -> None:
        self.tasks: list[Task] = list(tasks)
        self._by_prompt: dict[str, Task] = {t.prompt: t for t in self.tasks}
        # prefix length → prefix → tasks whose question starts with it
        self._by_prefix: dict[int, dict[str, list[Task]]] = {}
        for task in self.tasks:
            if not task.question:
                continue
            width = min(PREFIX_CHARS, len(task.question))
            self._by_prefix.setdefault(width, {}).setdefault(task.question[:width], []).append(task)
        self._cache: dict[bytes, Task | None] = {}

    @classmethod
    def load(cls, benchmarks: Sequence[str] | None = None) -> AnswerIndex:
        """Build the index from the built-in benchmarks' answer keys."""
        return cls(load_tasks(benchmarks))

    def __len__(self) -> int:
        return len(self.tasks)

    def exact(self, prompt: str) -> Task | None:
        """The task whose rendered prompt is exactly ``prompt``."""
        return self._by_prompt.get(prompt)

    def lookup(self, text: str) -> Task | None:
        """The task whose prompt is ``text``, else whose question appears in ``text``, else ``None``."""
        task = self._by_prompt.get(text)
        if task is not None:
            return task
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        try:
            return self._cache[digest]
        except KeyError:
            pass
        task = self._search(text)
        if len(self._cache) >= CACHE_LIMIT:
            self._cache.clear()
        self._cache[digest] = task
        return task

    def _search(self, text: str) -> Task | None:
        """The known question found verbatim in ``text``; the last one wins (few-shot prompts end with it)."""
        best: Task | None = None
        best_pos = -1
        for width, table in self._by_prefix.items():
            for pos in range(len(text) - width + 1):
                candidates = table.get(text[pos : pos + width])
                if candidates is None:
                    continue
                for task in candidates:
                    if not text.startswith(task.question, pos):
                        continue
                    longer = best is not None and len(task.question) > len(best.question)
                    if pos > best_pos or (pos == best_pos and longer):
                        best, best_pos = task, pos
        return best
