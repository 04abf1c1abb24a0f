"""IFEval: prompts with verifiable instructions ("answer in at least 300 words", "no commas"), scored by lm-eval's
implementation of Google's checkers (``workbench.scoring.ifeval``, the ``[lm-eval]`` extra)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import orjson

from workbench.environments.base import AnswerKeyEntry, Capabilities, VerifyResult
from workbench.environments.dataset import BenchmarkDefinition, DatasetEnvironment
from workbench.extras import require
from workbench.scoring.ifeval import checkers, fetch_punkt, score_ifeval


class IFEvalEnvironment(DatasetEnvironment):
    """IFEval's prompts; the expected answer is the instructions (JSON), reward 1 iff all are followed strictly."""

    own_scoring: ClassVar[bool] = True

    def __init__(self, definition: BenchmarkDefinition) -> None:
        require("lm-eval", "the ifeval benchmark's instruction checkers")  # before a run, not at its first answer
        super().__init__(definition)
        self.capabilities = Capabilities(scoring="thread")  # langdetect and nltk: not a pure regex

    def verify(self, response: str, expected: str, **metadata: Any) -> VerifyResult:
        instructions = orjson.loads(expected)
        prompt = str(self.rows[int(metadata["idx"])]["prompt"])
        return score_ifeval(response, prompt, instructions["instruction_id_list"], instructions["kwargs"])

    def check_answer_key(self, idx: int) -> tuple[bool, str]:
        """No reference answer exists: check that lm-eval knows every instruction the prompt carries."""
        known = checkers().instructions_registry.INSTRUCTION_DICT
        unknown = [i for i in self.rows[idx]["instruction_id_list"] if i not in known]
        if unknown:
            return False, f"instructions unknown to lm-eval's registry: {', '.join(unknown)}"
        return True, f"{len(self.rows[idx]['instruction_id_list'])} instructions known to lm-eval's checkers"

    def answer_key(self) -> Iterator[AnswerKeyEntry]:
        for row in self.rows:
            yield AnswerKeyEntry(question=str(row["prompt"]), answer=str(row["instructions"]), solution=None)


def pull_extras() -> str:
    """What ``nel benchmarks pull ifeval`` fetches beside the data: nltk's punkt_tab, which two checkers need."""
    if not fetch_punkt():
        raise OSError("could not download nltk's punkt_tab (needed by ifeval's sentence and word counts)")
    return "nltk punkt_tab tokenizer installed"
