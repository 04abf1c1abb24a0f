"""SimpleQA: short fact-seeking questions, graded by an LLM judge with OpenAI simple-evals' grader.

The grade (CORRECT / INCORRECT / NOT_ATTEMPTED) needs a model, so it is the engine's judge metric that grades
(``workbench.engine.metrics``), with this benchmark's ``judge_grading``: simple-evals' template and a strict
reading of the reply (``workbench.scoring.simpleqa``). Without a judge the run is refused before any model call:
a self-graded or string-matched SimpleQA score would not be SimpleQA's.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from workbench.environments.base import BenchmarkFigures, VerifyResult
from workbench.environments.dataset import DatasetEnvironment
from workbench.errors import UsageError
from workbench.scoring.simpleqa import GRADES, GRADING, METHOD, JudgeGrading, simpleqa_figures

SOURCE = "OpenAI simple-evals"
"""Whose figures ``benchmark_figures`` computes, and whose names they carry."""
OVER = "graded attempts, every repeat pooled"

class SimpleQAEnvironment(DatasetEnvironment):
    """SimpleQA's questions; the expected answer is the gold target the judge compares against."""

    own_scoring: ClassVar[bool] = True
    judge_grading: ClassVar[JudgeGrading] = GRADING
    figures_source: ClassVar[str | None] = SOURCE

    def verify(self, response: str, expected: str, **metadata: Any) -> VerifyResult:
        """Refuse: only a judge grades SimpleQA (``engine.metrics.check_judged`` says so before a run starts)."""
        raise UsageError(f"{self.name} is graded by an LLM judge, not by a scorer: configure a judge metric "
                         f"(see benchmarks/{self.name}/README.md)")

    @classmethod
    def benchmark_figures(cls, details: Iterable[Mapping[str, Any]]) -> BenchmarkFigures | None:
        """simple-evals' SimpleQA figures (``simpleqa_figures``): the shares ``correct``, ``incorrect`` and
        ``not_attempted``, ``correct_given_attempted`` and ``f1`` (the harmonic mean of the two), named as the
        SimpleQA paper's table names them (simple-evals' own keys: ``is_correct``, ``is_incorrect``,
        ``is_not_attempted``, ``accuracy_given_attempted``, ``f1``).

        Over every graded attempt: those this benchmark's grader graded (``grader: simpleqa_grader`` and a
        ``grade`` in the judge metric's details, the run's primary metric). An attempt with no grade (the judge
        failed or gave none, the exchange failed, an empty response was not sent to the judge) is left out; the
        summary's failures count those.

        Repeats: pooled, every graded attempt counting once, as simple-evals does (``SimpleQAEval(n_repeats=N)``
        evaluates ``examples * N`` and averages over all of them), not a mean of per-repeat figures (F1 is not
        linear in the shares)."""
        counts = Counter(d["grade"] for d in details if d.get("grader") == METHOD and d.get("grade") in GRADES)
        values = simpleqa_figures(counts.elements())
        if not values:
            return None
        return BenchmarkFigures(SOURCE, values, counts.total(), OVER)

    def check_answer_key(self, idx: int) -> tuple[bool, str]:
        """The gold target exists (grading it needs a judge)."""
        target = self.seed(idx).expected_answer
        return bool(target), "a gold target for the judge (grading needs a judge model)"

    @property
    def data_hash(self) -> str:
        """The data and the grader's template: a new template is a different benchmark."""
        return hashlib.sha256(f"{super().data_hash}\0{GRADING.template}".encode()).hexdigest()[:16]
