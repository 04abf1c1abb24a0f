"""SimpleQA: short fact-seeking questions, graded by an LLM judge with OpenAI simple-evals' grader.

The grade (CORRECT / INCORRECT / NOT_ATTEMPTED) needs a model, so it is the engine's judge metric that grades
(``workbench.engine.metrics``), with this benchmark's ``judge_grading``: simple-evals' template and a strict
reading of the reply (``workbench.scoring.simpleqa``). Without a judge the run is refused before any model call:
a self-graded or string-matched SimpleQA score would not be SimpleQA's.
"""

from __future__ import annotations

import hashlib
from typing import Any, ClassVar

from workbench.environments.base import VerifyResult
from workbench.environments.dataset import DatasetEnvironment
from workbench.errors import UsageError
from workbench.scoring.simpleqa import GRADING, JudgeGrading


class SimpleQAEnvironment(DatasetEnvironment):
    """SimpleQA's questions; the expected answer is the gold target the judge compares against."""

    own_scoring: ClassVar[bool] = True
    judge_grading: ClassVar[JudgeGrading] = GRADING

    def verify(self, response: str, expected: str, **metadata: Any) -> VerifyResult:
        """Refuse: only a judge grades SimpleQA (``engine.metrics.check_judged`` says so before a run starts)."""
        raise UsageError(f"{self.name} is graded by an LLM judge, not by a scorer: configure a judge metric "
                         f"(see benchmarks/{self.name}/README.md)")

    def check_answer_key(self, idx: int) -> tuple[bool, str]:
        """The gold target exists (grading it needs a judge)."""
        target = self.seed(idx).expected_answer
        return bool(target), "a gold target for the judge (grading needs a judge model)"

    @property
    def data_hash(self) -> str:
        """The data and the grader's template: a new template is a different benchmark."""
        return hashlib.sha256(f"{super().data_hash}\0{GRADING.template}".encode()).hexdigest()[:16]
