"""GSM8K-style numeric final-answer scoring.

The scorer finds the model's final answer (the last explicit marker such as
``\\boxed{}``, ``#### N``, "The answer is N" or ``Answer: N``; otherwise the last
number in the text), turns it into one canonical string and compares it with the
expected answer as an exact rational number. Values are never compared as floats
or by stripping zeros from strings, so ``10`` never equals ``1`` and ``18.00``
always equals ``18``.

Decisions worth knowing:

* Scientific notation is a number: ``1e3`` is 1000 (exponents of up to three
  digits, so a stray ``2e`` in prose is never a number).
* Fractions ``a/b`` and LaTeX ``\\frac{a}{b}`` are exact rationals; the canonical
  form is a plain decimal when the value has one (``1/2`` -> ``0.5``) and the
  reduced fraction otherwise (``2/6`` -> ``1/3``).
* A trailing ``%`` is ignored (``50%`` scores against ``50``), as are currency
  symbols, thousands separators (``1,000``; ``1{,}000`` and ``1\\,000`` in LaTeX)
  and a trailing sentence period.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from workbench.types import VerifyResult

# Digit runs are capped (300 digits, 99 thousands groups, 3-digit exponents) so a value always
# converts within Python's int/str digit limit; a longer run is not read as a number at all.
_INT = r"[0-9]{1,300}(?![0-9])"
_NONZERO_INT = rf"(?=0*[1-9]){_INT}"
_EXPONENT = r"(?:[eE][-+]?[0-9]{1,3}(?![0-9]))?"
_NUMBER_PATTERN = rf"""
    (?<![^\W_])(?<!/)          # not glued to a letter or digit ("x2", the 3 of "5-3") or after "/"
    (?P<sign>[-−+])?
    (?:[$€£¥]\s?)?
    (?P<sign2>[-−])?            # "$-5"
    (?P<body>
        \\[dt]?frac\{{(?P<fnum>{_INT})\}}\{{(?P<fden>{_NONZERO_INT})\}}
      | (?P<num>{_INT})/(?P<den>{_NONZERO_INT})(?![.,/][0-9])   # not a date 3/4/2020 or 1/2.5
      | (?:[0-9]{{1,3}}(?:(?:,|\{{,\}}|\\,)[0-9]{{3}}){{1,99}}(?![0-9])|{_INT})(?:\.{_INT})?{_EXPONENT}
      | \.{_INT}{_EXPONENT}
    )
"""
_NUMBER = re.compile(_NUMBER_PATTERN, re.VERBOSE)

# Each marker regex starts with a literal, so scanning a response costs little; the
# context a marker needs before it ("answer" at a word or line start) is checked in Python.
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_HASH = re.compile(r"####")
_ANSWER = re.compile(r"answer(?:(?P<is>\s+is\b)|[*_]*\s*:)", re.IGNORECASE)

# After a text marker only markup may come before the number ("The answer is: **$42**");
# a word in between ("the answer is not 5") means the marker does not state a number.
_AFTER_MARKER = re.compile(rf"[\W_]{{0,24}}?(?P<tok>{_NUMBER_PATTERN})", re.VERBOSE)
_BRACE = re.compile(r"[{}]")
_SAFE_WHITESPACE = re.compile(r"(?<=[^$€£¥])[ \n]")
_SEPARATORS = re.compile(r"\{,\}|\\,|,")
_DECORATION = " \t\r\n*_"
_CURRENCY = "$€£¥"
_TAIL_WINDOW = 64
# A box's contents are scanned whole, so trying every one of thousands of nested empty boxes
# would be quadratic; a real answer is among the last few markers.
_MAX_MARKERS_TRIED = 64


@dataclass(frozen=True, slots=True)
class NumericExtraction:
    """The answer found in a response, kept with the text it came from so a wrong extraction is visible."""

    value: str
    """Canonical normalised number (see ``normalize_number``)."""
    raw: str
    """The text matched: the number token, or the contents of ``\\boxed{}``."""
    method: str
    """How it was found: boxed, hash_marker, answer_is, answer_colon or last_number."""


def extract_numeric_answer(text: str) -> NumericExtraction | None:
    """Find the final numeric answer in ``text``, or ``None`` when it holds no number.

    The last explicit marker that is followed by a number wins over any other
    number, because models restate and correct themselves; without one, the last
    number in the text is the answer.
    """
    found = _find_answer(text)
    return None if found is None else NumericExtraction(_canonical(found[0]), found[1], found[2])


def normalize_number(raw: str) -> str | None:
    """Return the canonical form of a number written as ``raw``, or ``None`` if it is not one.

    Equal values get equal strings (``18.00``, ``$18`` and ``18.`` all give ``18``)
    and different values different strings, so the result is safe to compare.
    """
    value = _parse_number(raw)
    return None if value is None else _canonical(value)


def score_numeric(response: str, expected: str, *, abs_tol: float = 0.0, rel_tol: float = 0.0) -> VerifyResult:
    """Score ``response`` 1.0 when its final numeric answer equals ``expected``, else 0.0.

    Equal means exactly equal by default; ``abs_tol`` / ``rel_tol`` accept answers within
    ``max(abs_tol, rel_tol * |expected|)``. ``scoring_details`` always records the method, the
    matched text and both normalised values, so an extraction failure is never silently a wrong answer.
    """
    expected_value = _expected_value(expected)
    normalized_expected = None if expected_value is None else _canonical(expected_value)
    if not response or response.isspace():
        return _no_answer(normalized_expected, "empty response")
    if expected_value is None:
        return _score_as_text(response, expected)
    found = _find_answer(response)
    if found is None:
        return _no_answer(normalized_expected, "no number found in the response")
    value, raw, method = found
    extracted = _canonical(value)
    details: dict[str, object] = {
        "method": method,
        "raw_match": raw,
        "normalized_expected": normalized_expected,
        "normalized_extracted": extracted,
    }
    if abs_tol or rel_tol:
        allowed = max(Fraction(str(abs_tol)), Fraction(str(rel_tol)) * abs(expected_value))
        details["tolerance"] = float(allowed)
        equal = abs(value - expected_value) <= allowed
    else:
        equal = value == expected_value
    return VerifyResult(reward=1.0 if equal else 0.0, extracted_answer=extracted, scoring_details=details)


def _no_answer(normalized_expected: str | None, reason: str) -> VerifyResult:
    details = {
        "method": "none",
        "reason": reason,
        "raw_match": None,
        "normalized_expected": normalized_expected,
        "normalized_extracted": None,
    }
    return VerifyResult(reward=0.0, extracted_answer=None, scoring_details=details)


def _score_as_text(response: str, expected: str) -> VerifyResult:
    """Fallback for a non-numeric expected answer: a numeric scorer cannot judge it, so compare text."""
    got, want = _normalize_text(response), _normalize_text(expected)
    details = {
        "method": "string_equality",
        "reason": "expected answer is not a number; compared whitespace- and case-normalised text",
        "raw_match": response,
        "normalized_expected": want,
        "normalized_extracted": got,
    }
    return VerifyResult(reward=1.0 if got == want else 0.0, extracted_answer=got, scoring_details=details)


def _normalize_text(text: str) -> str:
    return " ".join(text.casefold().split())


_Found = tuple[Fraction, str, str]
"""An answer's exact value, the text it was read from and the method that found it."""


def _find_answer(text: str) -> _Found | None:
    marked = _last_marked_answer(text)
    if marked is not None:
        return marked
    last = _last_number(text)
    return None if last is None else (_match_value(last), last.group(0), "last_number")


def _last_marked_answer(text: str) -> _Found | None:
    markers = sorted(_markers(text), reverse=True)[:_MAX_MARKERS_TRIED]
    closing: dict[int, int] | None = None
    for _start, method, end in markers:
        if method == "boxed":
            if closing is None:  # one pass over the braces serves every box, even unclosed ones
                closing = _closing_braces(text, min(s for s, m, _ in markers if m == "boxed"))
            close = closing.get(end - 1)
            number = None if close is None else _last_number(text[end:close])
            if close is not None and number is not None:
                return _match_value(number), text[end:close].strip(), method
            continue
        after = _AFTER_MARKER.match(text, end)
        if after is not None:
            return _match_value(after), after.group("tok"), method
    return None


def _markers(text: str) -> list[tuple[int, str, int]]:
    """Every explicit marker as (start, method, end); the cheap ``in`` tests skip absent kinds."""
    found: list[tuple[int, str, int]] = []
    if "\\" in text:
        found += [(m.start(), "boxed", m.end()) for m in _BOXED.finditer(text)]
    if "####" in text:
        found += [(m.start(), "hash_marker", m.end()) for m in _HASH.finditer(text)]
    if "answer" in text.lower():
        for m in _ANSWER.finditer(text):
            start = m.start()
            if m.group("is") is not None:
                if start == 0 or not _is_word_char(text[start - 1]):
                    found.append((start, "answer_is", m.end()))
            elif _at_line_or_word_start(text, start):
                found.append((start, "answer_colon", m.end()))
    return found


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def _at_line_or_word_start(text: str, start: int) -> bool:
    """True when only ``*``/``_`` markup separates ``start`` from a line start or whitespace."""
    while start > 0 and text[start - 1] in "*_":
        start -= 1
    return start == 0 or text[start - 1].isspace()


def _closing_braces(text: str, start: int) -> dict[int, int]:
    """Map the index of each ``{`` from ``start`` on to the index of the ``}`` that closes it."""
    closing: dict[int, int] = {}
    open_at: list[int] = []
    for brace in _BRACE.finditer(text, start):
        if brace.group() == "{":
            open_at.append(brace.start())
        elif open_at:
            closing[open_at.pop()] = brace.start()
    return closing


def _last_number(text: str) -> re.Match[str] | None:
    """The last number in ``text``, scanning only a tail of it when the tail holds one.

    A scan may start at any whitespace not right after a currency symbol: no number
    spans such a position, so the matches after it are exactly those of a full scan.
    """
    if not any(digit in text for digit in "0123456789"):
        return None  # no digit, no number: skip the scan (a long reply of symbols costs nothing)
    window = _TAIL_WINDOW
    while True:
        start = _safe_scan_start(text, len(text) - window)
        last = None
        for last in _NUMBER.finditer(text, start):  # noqa: B007 - we want the final match
            pass
        if last is not None or start == 0:
            return last
        window *= 8


def _safe_scan_start(text: str, at_most: int) -> int:
    """The last whitespace at or before ``at_most`` that is not right after a currency symbol (0 if none).

    A few steps back in Python find it in ordinary text; past them, one scan in C does, so "$ $ $ ..." (every
    space after a currency sign) costs linear time: a fresh pair of rfinds per step made it O(n^2), 374 s of CPU
    for 7 MB."""
    for _ in range(64):
        if at_most <= 0:
            return 0
        space = max(text.rfind(" ", 0, at_most + 1), text.rfind("\n", 0, at_most + 1))
        if space <= 0:
            return 0
        if text[space - 1] not in _CURRENCY:
            return space
        at_most = space - 1
    last = 0
    for last_match in _SAFE_WHITESPACE.finditer(text, 0, max(at_most + 1, 0)):
        last = last_match.start()
    return last


def _match_value(match: re.Match[str]) -> Fraction:
    """The exact value of a ``_NUMBER`` match (also valid for ``_AFTER_MARKER`` matches)."""
    if match.group("fnum") is not None:
        value = Fraction(int(match.group("fnum")), int(match.group("fden")))
    elif match.group("num") is not None:
        value = Fraction(int(match.group("num")), int(match.group("den")))
    else:
        body = match.group("body")
        if "," in body:
            body = _SEPARATORS.sub("", body)
        value = Fraction(int(body)) if body.isdigit() else Fraction(body)
    sign = match.group("sign")
    negative = (sign is not None and sign != "+") or match.group("sign2") is not None
    return -value if negative else value


def _parse_number(raw: str) -> Fraction | None:
    """Exact value of a string that is a number and nothing else (decoration aside)."""
    text = raw.strip(_DECORATION)
    if text.endswith("."):
        text = text[:-1]
    if text.endswith("%"):
        text = text[:-1].removesuffix("\\").rstrip()
    match = _NUMBER.fullmatch(text)
    return None if match is None else _match_value(match)


@lru_cache(maxsize=16384)
def _expected_value(expected: str) -> Fraction | None:
    """Cached: the same expected answers recur for every repeat of a task."""
    return _parse_number(expected)


def _canonical(value: Fraction) -> str:
    """One string per value: an integer, a terminating decimal without trailing zeros, or ``p/q``."""
    numerator, denominator = value.numerator, value.denominator
    if denominator == 1:
        return str(numerator)
    twos = fives = 0
    rest = denominator
    while rest % 2 == 0:
        rest //= 2
        twos += 1
    while rest % 5 == 0:
        rest //= 5
        fives += 1
    if rest != 1:
        return f"{numerator}/{denominator}"
    scale = max(twos, fives)  # the fewest decimal places that hold the value exactly
    digits = str(abs(numerator) * 10**scale // denominator).rjust(scale + 1, "0")
    sign = "-" if numerator < 0 else ""
    return f"{sign}{digits[:-scale]}.{digits[-scale:]}"
