"""A benchmark whose attempts run somewhere else (each in a sandbox, or by a NeMo Gym agent): the wrapper decides how
an attempt runs and is verified; the problems, their identity and their answer key stay the wrapped benchmark's."""

from __future__ import annotations

from collections.abc import Iterator

from workbench.environments.base import AnswerKeyEntry, EvalEnvironment
from workbench.types import SeedResult


class Wrapped(EvalEnvironment):
    """Seeded, sized, identified and answer-keyed as ``inner`` (a subclass sets it, and ``name``)."""

    inner: EvalEnvironment
    requires_sandbox = False

    def __len__(self) -> int:
        return len(self.inner)

    def seed(self, idx: int) -> SeedResult:
        return self.inner.seed(idx)

    @property
    def data_hash(self) -> str:
        return self.inner.data_hash

    @property
    def dataset_identity(self) -> dict[str, str] | None:
        return self.inner.dataset_identity

    def check_answer_key(self, idx: int) -> tuple[bool, str]:
        return self.inner.check_answer_key(idx)

    def answer_key(self) -> Iterator[AnswerKeyEntry]:
        return self.inner.answer_key()
