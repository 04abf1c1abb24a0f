"""Multiple-choice letter scoring: the last explicit answer (A–J) wins.

An explicit answer is one of:

* a marker followed by a letter: "The answer is (D)", "Answer: b", "**Answer:** C",
  "The correct option is B.", "my choice would be E";
* ``\\boxed{C}`` (also ``\\boxed{\\text{C}}``);
* a bold letter: ``**C**`` or ``**(C)**``;
* a response that is nothing but a letter: ``c``, ``(B)``, ``D.``.

Models restate and correct themselves ("A is tempting, but the answer is D"), so the
last explicit answer in the text is the answer. A capital letter in prose is never an
answer by itself: "A train leaves..." names no option. After a marker a lower-case
letter (and the capital "I", a pronoun) must end the phrase — "(b)", "b." or the end of
the text — so "the answer is a bit tricky" names no option either.
"""

from __future__ import annotations

import re

from workbench.types import VerifyResult

LETTERS = "ABCDEFGHIJ"

_LETTER = r"(?P<letter>[A-Ja-j])(?![A-Za-z0-9'’])"
_MARKER = re.compile(
    r"\b(?:answer|option|choice)s?\b[*_]*"
    r"(?:\s+(?:is|would\s+be|should\s+be|must\s+be|will\s+be)\b|\s*[:=])"
    rf"[\s*_:]*(?P<open>[(\[{{]?)\s*{_LETTER}",
    re.IGNORECASE,
)
_BOXED = re.compile(rf"\\boxed\s*\{{\s*(?:\\text(?:bf)?\s*\{{\s*)?\(?{_LETTER}\)?\s*\}}")
_BOLD = re.compile(rf"\*\*\s*\(?{_LETTER}\)?\s*\*\*")
_BARE = re.compile(r"[\s*_(\[]*(?P<letter>[A-Ja-j])[\s*_)\].:]*")
# What may follow a letter that needs an ending ("b", "a", "I"): punctuation, markup or the end.
_ENDS_PHRASE = re.compile(r"[ \t]*(?:$|[\n.,;:!?)\]}*_])")


def extract_choice(text: str) -> tuple[str, str, str] | None:
    """The last explicit answer in ``text`` as (upper-case letter, matched text, method), or ``None``."""
    bare = _BARE.fullmatch(text)
    if bare is not None:
        return bare.group("letter").upper(), text.strip(), "bare_letter"
    best: tuple[int, str, str, str] | None = None
    lowered = text.lower()
    kinds: list[tuple[re.Pattern[str], str]] = []
    if "answer" in lowered or "option" in lowered or "choice" in lowered:
        kinds.append((_MARKER, "answer_marker"))
    if "\\boxed" in text:
        kinds.append((_BOXED, "boxed"))
    if "**" in text:
        kinds.append((_BOLD, "bold"))
    for pattern, method in kinds:
        for match in pattern.finditer(text):
            if method == "answer_marker" and not _stated(text, match):
                continue
            if best is None or match.start() > best[0]:
                best = (match.start(), match.group("letter").upper(), match.group(0), method)
    return None if best is None else best[1:]


def _stated(text: str, match: re.Match[str]) -> bool:
    """Whether a marker's letter is an answer rather than the start of a word of prose."""
    letter = match.group("letter")
    if not (letter.islower() or letter == "I") or match.group("open"):
        return True
    return _ENDS_PHRASE.match(text, match.end()) is not None


def score_multiple_choice(response: str, expected: str) -> VerifyResult:
    """Score 1.0 when the last explicit answer in ``response`` is the letter ``expected``."""
    want = expected.strip().strip("()").upper()
    found = extract_choice(response) if response and not response.isspace() else None
    if found is None:
        reason = "empty response" if not response or response.isspace() else "no option letter found"
        details = {"method": "none", "reason": reason, "raw_match": None, "expected": want}
        return VerifyResult(reward=0.0, extracted_answer=None, scoring_details=details)
    letter, raw, method = found
    details = {"method": method, "raw_match": raw, "expected": want}
    return VerifyResult(reward=1.0 if letter == want else 0.0, extracted_answer=letter, scoring_details=details)
