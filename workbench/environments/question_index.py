"""Which of a benchmark's problems another harness's sample is: one rule for every importer.

A native run names a problem by ``task_id``, the hash of the benchmark's own data row. A Gym rollout, an
inspect sample or an lm-eval document holds what *that* harness asked, so nel never hashes it into an id of
its own (a second hash would never meet the first): it finds the problem instead, by the problem's
question, normalised (Unicode NFKC, whitespace collapsed, case folded), in this order:

1. the text is the prompt nel itself sends for a problem (a row ``nel serve`` exported): that problem;
2. the text, or the sample's own question field, *is* a problem's question;
3. a problem's question appears *inside* the text: a harness's template around it ("Question: …\\nAnswer:",
   inspect's "Solve the following math problem step by step…", a system prompt, few-shot examples before
   it). When several do (few-shot examples from the same split), the one that ends last is the question
   being asked.

The expected answer settles a question the benchmark holds twice; what stays ambiguous or matches nothing
is unpaired, with the reason, never guessed.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workbench.environments.registry import benchmark_names, get_environment
from workbench.errors import UsageError

PREFIX_CHARS = 24
"""Characters of a normalised question the inside-the-text search keys on (shorter questions: their length)."""


def normalise(text: str) -> str:
    """What two harnesses' copies of a question share: NFKC, whitespace collapsed, case folded."""
    return " ".join(unicodedata.normalize("NFKC", text).split()).casefold()


@dataclass(frozen=True, slots=True)
class Match:
    """A problem's task id, or ``None`` with the reason there is none."""

    task_id: str | None
    reason: str | None = None
    how: str | None = None
    """``prompt``, ``question`` or ``inside``: which rule found it."""


@dataclass(frozen=True, slots=True)
class _Problem:
    task_id: str
    question: str
    expected: frozenset[str]
    """nel's expected answer and the data row's raw target (gsm8k: ``18`` and the worked answer), normalised."""


class QuestionIndex:
    """One benchmark's problems by prompt and by question, loaded on first need (``benchmark`` may be ``None``
    or one nel does not know: every lookup then says why it cannot pair)."""

    def __init__(self, benchmark: str | None) -> None:
        self.benchmark = benchmark
        self.failure: str | None = None
        self.question_field: str | None = None
        """The data field holding a problem's question (gsm8k: ``question``), when the benchmark is a dataset."""
        self.target_field: str | None = None
        """The data field holding a problem's answer (gsm8k: ``answer``), when the benchmark is a dataset."""
        self._loaded = False
        self._prompts: dict[str, list[_Problem]] = {}
        self._questions: dict[str, list[_Problem]] = {}
        self._prefixes: dict[str, list[_Problem]] = {}
        self._widths: set[int] = set()

    def ready(self) -> bool:
        """Load the benchmark's problems now; False (with ``failure`` saying why) when nothing can pair."""
        return self._load()

    def find(self, text: str | None, *, question: Any = None, expected: Any = None) -> Match:
        """The problem ``text`` (what the harness asked) or its ``question`` field is; ``expected`` breaks ties."""
        if not self._load():
            return Match(None, self.failure)
        wanted = normalise(str(expected)) if expected is not None else None
        if text:
            found = self._one(self._prompts.get(text, ()), wanted)
            if found is not None:
                return found if found.task_id is None else Match(found.task_id, how="prompt")
        for candidate in (question, text):
            if isinstance(candidate, str) and candidate:
                found = self._one(self._questions.get(normalise(candidate), ()), wanted)
                if found is not None:
                    return found if found.task_id is None else Match(found.task_id, how="question")
        if text:
            found = self._one(self._inside(normalise(text)), wanted)
            if found is not None:
                return found if found.task_id is None else Match(found.task_id, how="inside")
        if not text and not question:
            return Match(None, "no prompt or question to match")
        return Match(None, f"the prompt is none of {self.benchmark}'s problems")

    def _one(self, problems: Any, wanted: str | None) -> Match | None:
        """The single problem of ``problems`` (narrowed by the expected answer when several); ``None`` if empty."""
        ids = {p.task_id for p in problems}
        if not ids:
            return None
        if len(ids) > 1 and wanted is not None:
            ids = {p.task_id for p in problems if wanted in p.expected}
        if len(ids) == 1:
            return Match(ids.pop())
        return Match(None, f"the prompt is {len({p.task_id for p in problems})} {self.benchmark} problems "
                           "the expected answer does not tell apart")

    def _inside(self, text: str) -> list[_Problem]:
        """The problems whose question appears in ``text``; of several, those ending last (the one asked)."""
        best_end, found = -1, []
        for width in self._widths:
            for start in range(len(text) - width + 1):
                if start and text[start - 1].isalnum():  # a question starts a word: the other positions are skipped
                    continue
                for problem in self._prefixes.get(text[start:start + width], ()):
                    if text.startswith(problem.question, start):
                        end = start + len(problem.question)
                        if end > best_end:
                            best_end, found = end, [problem]
                        elif end == best_end and problem not in found:
                            found.append(problem)
        return found

    def _load(self) -> bool:
        if self._loaded:
            return self.failure is None
        self._loaded = True
        name = self.benchmark
        if name is None:
            self.failure = "no benchmark named to match the prompt against (name one with --benchmark)"
            return False
        if name not in benchmark_names():
            self.failure = (f"{name!r} is not a benchmark nel knows, so its prompt cannot be matched "
                            "(name one with --benchmark)")
            return False
        try:
            env = get_environment(name)
            definition = getattr(env, "definition", None)
            field = getattr(definition, "input_field", None)
            target_field = getattr(definition, "target_field", None)
            rows = getattr(env, "rows", None)
            self.question_field = field if isinstance(field, str) else None
            self.target_field = target_field if isinstance(target_field, str) else None
            for idx in range(len(env)):
                seed = env.seed(idx)
                row = rows[idx] if isinstance(rows, list) and idx < len(rows) else None
                raw = row.get(field) if isinstance(row, Mapping) and field else None
                target = row.get(target_field) if isinstance(row, Mapping) and target_field else None
                expected = {normalise(str(v)) for v in (seed.expected_answer, target) if v is not None}
                problem = _Problem(seed.task_id, normalise(raw if isinstance(raw, str) else seed.prompt),
                                   frozenset(expected))
                for prompt in {seed.prompt, _last_user_text(seed.messages)}:
                    if prompt:
                        self._prompts.setdefault(prompt, []).append(problem)
                if problem.question:
                    self._questions.setdefault(problem.question, []).append(problem)
                    width = min(PREFIX_CHARS, len(problem.question))
                    self._prefixes.setdefault(problem.question[:width], []).append(problem)
                    self._widths.add(width)
        except UsageError as exc:  # a hub benchmark whose data is not here (offline, never pulled)
            self.failure = f"{name}'s problems cannot be loaded to match the prompt: {exc}"
            return False
        return True


def _last_user_text(messages: Any) -> str | None:
    for message in reversed(list(messages or ())):
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(message, Mapping) and message.get("role") == "user" and isinstance(content, str):
            return content
    return None
