"""Short answers with several accepted forms (TriviaQA's aliases): any alias, normalised, is right.

The expected answer stays readable: the aliases joined by `` | ``, the canonical one first
("Sunset Boulevard | Sunset Blvd"). The response's answer is the text after its last
"Answer:" / "the answer is" marker, else its first non-empty line; both sides are normalised
as the TriviaQA authors' evaluation script does (lower case, punctuation and the articles
a/an/the removed, underscores and runs of white space made one space) and compared exactly.
An answer written as several forms joined by `` | `` (the expected string itself, which
``nel validate`` sends) is right only when every form it lists is an alias.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable

from workbench.types import VerifyResult

SEPARATOR = " | "

_PUNCTUATION = frozenset(string.punctuation + "‘’´`")
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
_MARKER = re.compile(r"\b(?:answer\s*(?:is\b|:)|answer\s+would\s+be\b)[\s*_:]*(?P<rest>[^\n]*)", re.IGNORECASE)


def join_aliases(aliases: Iterable[str]) -> str:
    """The expected-answer string for ``aliases`` (first kept first, duplicates dropped)."""
    return SEPARATOR.join(dict.fromkeys(a.strip() for a in aliases if a.strip()))


def split_aliases(expected: str) -> list[str]:
    """The aliases an expected-answer string holds, canonical first."""
    return [a.strip() for a in expected.split(SEPARATOR.strip()) if a.strip()]


def normalize(text: str) -> str:
    """TriviaQA's answer normalisation: case, punctuation, articles and white space do not count."""
    text = text.lower().replace("_", " ")
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def extract_answer(response: str) -> str | None:
    """The answer a response gives: after its last answer marker, else its first non-empty line."""
    markers = [m for m in _MARKER.finditer(response) if m.group("rest").strip()]
    if markers:
        return markers[-1].group("rest").strip()
    for line in response.splitlines():
        if line.strip():
            return line.strip()
    return None


def score_aliases(response: str, expected: str) -> VerifyResult:
    """Score 1.0 when the response's answer equals one of the aliases in ``expected``, after normalisation."""
    aliases = split_aliases(expected)
    answer = extract_answer(response) if response else None
    details: dict[str, object] = {"method": "alias_exact_match", "n_aliases": len(aliases)}
    if answer is None:
        details["reason"] = "empty response"
        return VerifyResult(reward=0.0, extracted_answer=None, scoring_details=details)
    accepted = {normalize(alias): alias for alias in aliases}
    forms = [normalize(form) for form in split_aliases(answer)] or [normalize(answer)]
    matched = [accepted.get(form) for form in forms]
    right = all(alias is not None for alias in matched)
    details.update(normalized_answer=" | ".join(forms), matched_alias=matched[0] if right else None)
    return VerifyResult(reward=1.0 if right else 0.0, extracted_answer=answer, scoring_details=details)
