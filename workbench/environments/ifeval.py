"""IFEval: prompts with verifiable instructions ("answer in at least 300 words", "no commas"), scored by lm-eval's
implementation of Google's checkers (``workbench.scoring.ifeval``, the ``[lm-eval]`` extra)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, ClassVar

import orjson

from workbench.environments.base import AnswerKeyEntry, BenchmarkFigures, Capabilities, VerifyResult
from workbench.environments.dataset import BenchmarkDefinition, DatasetEnvironment
from workbench.extras import require
from workbench.scoring.ifeval import checkers, fetch_punkt, ifeval_figures, score_ifeval

SOURCE = "lm-eval"
"""Whose figures ``benchmark_figures`` computes, and whose names they carry."""
OVER = "scored attempts, every repeat pooled"

class IFEvalEnvironment(DatasetEnvironment):
    """IFEval's prompts; the expected answer is the instructions (JSON), reward 1 iff all are followed strictly."""

    own_scoring: ClassVar[bool] = True
    figures_source: ClassVar[str | None] = SOURCE

    def __init__(self, definition: BenchmarkDefinition) -> None:
        require("lm-eval", "the ifeval benchmark's instruction checkers")  # before a run, not at its first answer
        super().__init__(definition)
        self.capabilities = Capabilities(scoring="thread")  # langdetect and nltk: not a pure regex

    def verify(self, response: str, expected: str, **metadata: Any) -> VerifyResult:
        instructions = orjson.loads(expected)
        prompt = str(self.rows[int(metadata["idx"])]["prompt"])
        return score_ifeval(response, prompt, instructions["instruction_id_list"], instructions["kwargs"])

    @classmethod
    def benchmark_figures(cls, details: Iterable[Mapping[str, Any]]) -> BenchmarkFigures | None:
        """lm-eval's four IFEval figures (``ifeval_figures``): ``prompt_level_strict_acc``,
        ``inst_level_strict_acc``, ``prompt_level_loose_acc``, ``inst_level_loose_acc``, the instruction-level
        ones pooled over every prompt's instructions (lm-eval's ``agg_inst_level_acc``).

        Over every scored attempt: those whose every instruction was checked. An attempt without a verdict (a
        failed exchange, a response too long to score) or with instructions left unchecked (``scorer_error``: no
        Punkt tokenizer) is left out; the summary's failures count those.

        Repeats: pooled, every scored attempt counting once, as one lm-eval evaluation over the prompts repeated.
        lm-eval's ifeval task samples each prompt once; with every repeat complete the pooled figures are exactly
        the mean over repeats of each repeat's figures (every repeat has the same prompts and instructions)."""
        scored = [0]

        def checked() -> Iterator[Mapping[str, Any]]:
            for d in details:
                if "inst_level_strict" in d and "unchecked" not in d:
                    scored[0] += 1
                    yield d

        values = ifeval_figures(checked())
        if not values:
            return None
        return BenchmarkFigures(SOURCE, values, scored[0], OVER)

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
