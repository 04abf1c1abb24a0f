"""IFEval's instruction checkers, reused from lm-evaluation-harness (the ``[lm-eval]`` extra), offline-clean.

lm-eval's ``lm_eval.tasks.ifeval`` is Google's reference implementation (Apache-2.0) of the 25 verifiable
instructions; it is scored here with the same functions lm-eval's own ``ifeval`` task calls
(``utils.test_instruction_following_strict`` / ``_loose``), so scores agree with lm-eval's by construction.

Importing it calls ``nltk.download("punkt_tab")`` when the tokenizer is absent: a network call at run time that
prints noise and fails offline. ``checkers()`` imports it with that call skipped (lm-eval downloads only on
``LOCAL_RANK`` 0), and the instructions that need Punkt (sentence counts, capitalised-word counts) are then not
checked: the step records which and why (``scorer_error``, a retryable error, never a silent pass or fail).
``fetch_punkt()`` is the explicit download, run by ``nel benchmarks pull ifeval``.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable, Mapping, Sequence
from types import ModuleType
from typing import Any

from workbench.extras import environ_set, require
from workbench.types import VerifyResult

METHOD = "ifeval"
PUNKT = "tokenizers/punkt_tab/english/"
NEEDS_PUNKT = frozenset({"length_constraints:number_sentences", "change_case:capital_word_frequency"})
"""Instructions whose checker tokenizes with nltk's Punkt model (``count_sentences``, ``word_tokenize``)."""
NO_PUNKT = ("nltk's punkt_tab tokenizer is not installed, so {ids} could not be checked: run `nel benchmarks pull "
            "ifeval` where the internet is reachable, or copy nltk_data/tokenizers/punkt_tab and set NLTK_DATA")



_IMPORTING = threading.Lock()
"""Scoring threads may ask at once; ``LOCAL_RANK`` is changed for the import, so one thread imports."""


@functools.cache
def checkers() -> ModuleType:
    """lm-eval's ``lm_eval.tasks.ifeval.utils``, imported without a download (MissingExtra without lm-eval)."""
    require("lm-eval", "the ifeval benchmark's instruction checkers")
    # lm-eval's ifeval module downloads punkt_tab at import unless LOCAL_RANK is another rank's
    with _IMPORTING, environ_set("LOCAL_RANK", "nel-no-download"):
        import lm_eval.tasks.ifeval.utils as utils
    return utils


def punkt_available() -> bool:
    import nltk

    try:
        nltk.data.find(PUNKT)
    except LookupError:
        return False
    return True


def fetch_punkt(download_dir: str | None = None) -> bool:
    """Download nltk's punkt_tab (an explicit fetch, for ``nel benchmarks pull``); True when it is installed."""
    require("lm-eval", "the ifeval benchmark's instruction checkers")
    import nltk

    return punkt_available() or bool(nltk.download("punkt_tab", download_dir=download_dir, quiet=True))


def score_ifeval(response: str, prompt: str, instruction_ids: Sequence[str],
                 kwargs: Sequence[Mapping[str, Any]]) -> VerifyResult:
    """Reward 1 iff every instruction is followed, strictly (IFEval's ``prompt_level_strict_acc``).

    The details carry every instruction's strict and loose verdicts and the four IFEval figures of this prompt.
    """
    utils = checkers()
    unchecked = [i for i in instruction_ids if i in NEEDS_PUNKT] if not punkt_available() else []
    keep = [n for n, i in enumerate(instruction_ids) if i not in unchecked]
    example = utils.InputExample(key=0, instruction_id_list=[instruction_ids[n] for n in keep], prompt=prompt,
                                 kwargs=[dict(kwargs[n]) for n in keep])
    strict = utils.test_instruction_following_strict(example, response).follow_instruction_list
    loose = utils.test_instruction_following_loose(example, response).follow_instruction_list
    details: dict[str, Any] = {
        "method": METHOD,
        "instructions": [{"id": example.instruction_id_list[n], "strict": strict[n], "loose": loose[n]}
                         for n in range(len(keep))],
        "prompt_level_strict_acc": all(strict),
        "prompt_level_loose_acc": all(loose),
        "inst_level_strict": [sum(strict), len(strict)],
        "inst_level_loose": [sum(loose), len(loose)],
    }
    if unchecked:
        details.update(unchecked=unchecked, reason=NO_PUNKT.format(ids=", ".join(unchecked)))
        return VerifyResult(0.0, None, details, {"failure_category": "scorer_error"})
    followed = f"{sum(strict)}/{len(strict)} instructions followed"
    return VerifyResult(1.0 if all(strict) else 0.0, followed, details)


def ifeval_figures(details: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """IFEval's four run-level figures from the steps' details, in one pass: prompt-level means, instruction-level
    pooled (lm-eval's ``agg_inst_level_acc`` flattens every prompt's instructions); empty when there are none."""
    n = prompt_strict = prompt_loose = followed_strict = followed_loose = inst_strict = inst_loose = 0
    for d in details:
        n += 1
        prompt_strict += bool(d["prompt_level_strict_acc"])
        prompt_loose += bool(d["prompt_level_loose_acc"])
        followed, total = d["inst_level_strict"]
        followed_strict, inst_strict = followed_strict + followed, inst_strict + total
        followed, total = d["inst_level_loose"]
        followed_loose, inst_loose = followed_loose + followed, inst_loose + total
    if n == 0:
        return {}
    return {
        "prompt_level_strict_acc": prompt_strict / n,
        "inst_level_strict_acc": followed_strict / max(1, inst_strict),
        "prompt_level_loose_acc": prompt_loose / n,
        "inst_level_loose_acc": followed_loose / max(1, inst_loose),
    }
