"""Word-level side-by-side diff of two texts (or of two conversations turn by turn), with the first point of
divergence (difflib)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import Literal

SpanKind = Literal["same", "removed", "added"]


@dataclass(frozen=True, slots=True)
class Span:
    text: str
    kind: SpanKind


@dataclass(frozen=True, slots=True)
class DiffRow:
    """One aligned row of a side-by-side diff; a side with no line here is an empty tuple."""

    left: tuple[Span, ...]
    right: tuple[Span, ...]
    changed: bool


@dataclass(frozen=True, slots=True)
class WordDiff:
    rows: list[DiffRow]
    first_divergence: int | None
    """Row of the first difference (None: the texts are equal)."""
    changed_rows: list[int] = field(default_factory=list)
    """The first row of each run of changed rows (the stops of next/previous change)."""


_TOKEN = re.compile(r"\n|[^\S\n]+|\w+|[^\w\s]")
_MAX_WORD_DIFF_TOKENS = 2_000  # SequenceMatcher is quadratic: a larger block is diffed line pair by line pair


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def _split_lines(spans: list[Span]) -> list[tuple[Span, ...]]:
    lines: list[list[Span]] = [[]]
    for span in spans:
        parts = span.text.split("\n")
        for i, part in enumerate(parts):
            if i:
                lines.append([])
            if part:
                lines[-1].append(Span(part, span.kind))
    return [tuple(line) for line in lines]


def _merge(spans: list[Span]) -> list[Span]:
    merged: list[Span] = []
    for span in spans:
        if merged and merged[-1].kind == span.kind:
            merged[-1] = Span(merged[-1].text + span.text, span.kind)
        else:
            merged.append(span)
    return merged


def _word_block(a_lines: list[str], b_lines: list[str]) -> Iterator[DiffRow]:
    a_tok, b_tok = _tokens("\n".join(a_lines)), _tokens("\n".join(b_lines))
    if len(a_tok) > _MAX_WORD_DIFF_TOKENS or len(b_tok) > _MAX_WORD_DIFF_TOKENS:
        if len(a_lines) == 1 and len(b_lines) == 1:  # one huge line each: mark them whole
            yield DiffRow((Span(a_lines[0], "removed"),) if a_lines[0] else (),
                          (Span(b_lines[0], "added"),) if b_lines[0] else (), True)
            return
        # A long rewritten block: pair its lines in order and compare each pair word by word, which
        # stays linear in the block's length (a whole-block word diff would take seconds).
        for a_line, b_line in zip_longest(a_lines, b_lines):
            if a_line is None or b_line is None:
                line = a_line if b_line is None else b_line
                span = (Span(line, "removed" if b_line is None else "added"),) if line else ()
                yield DiffRow(span if b_line is None else (), span if a_line is None else (), True)
            else:
                yield from _word_block([a_line], [b_line])
        return
    a_spans: list[Span] = []
    b_spans: list[Span] = []
    matcher = difflib.SequenceMatcher(None, a_tok, b_tok, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        same = op == "equal"
        a_spans.append(Span("".join(a_tok[i1:i2]), "same" if same else "removed"))
        b_spans.append(Span("".join(b_tok[j1:j2]), "same" if same else "added"))
    left, right = _split_lines(_merge(a_spans)), _split_lines(_merge(b_spans))
    for lrow, rrow in zip_longest(left, right, fillvalue=()):
        yield DiffRow(lrow, rrow, True)


def word_diff(a: str, b: str) -> WordDiff:
    """Side-by-side word diff of two texts: lines are aligned first (unchanged lines pair up), then the
    lines that differ are compared word by word, so a changed word is marked, not its whole line."""
    a_lines, b_lines = a.split("\n"), b.split("\n")
    rows: list[DiffRow] = []
    changed_rows: list[int] = []
    matcher = difflib.SequenceMatcher(None, a_lines, b_lines, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            rows += [DiffRow((Span(line, "same"),) if line else (), (Span(line, "same"),) if line else (), False)
                     for line in a_lines[i1:i2]]
            continue
        changed_rows.append(len(rows))
        rows += _word_block(a_lines[i1:i2], b_lines[j1:j2])
    return WordDiff(rows, changed_rows[0] if changed_rows else None, changed_rows)


def turn_diff(a: Sequence[tuple[str, str]], b: Sequence[tuple[str, str]]) -> WordDiff:
    """Side-by-side diff of two conversations cut into turns (``attempts.turns``): turn i of one against
    turn i of the other, each under a heading row, so scaffolding repeated in both (the prompt, the same
    tool outputs) lines up and only the turns that changed show as changed. A turn only one side took is
    all removed (or added)."""
    rows: list[DiffRow] = []
    changed_rows: list[int] = []
    for left, right in zip_longest(a, b):
        label = (left or right)[0]  # type: ignore[index]  # zip_longest: never both None
        heading = (Span(f"═══ {label} ═══", "same"),)
        rows.append(DiffRow(heading, heading, False))
        if left is None or right is None:  # one side has no such turn: every line of the other is the change
            text = (left or right)[1]  # type: ignore[index]
            kind: SpanKind = "removed" if right is None else "added"
            spans = [(Span(line, kind),) if line else () for line in text.split("\n")]
            changed_rows.append(len(rows))
            rows += [DiffRow(s if right is None else (), s if left is None else (), True) for s in spans]
            continue
        part = word_diff(left[1], right[1])
        changed_rows += [len(rows) + r for r in part.changed_rows]
        rows += part.rows
    return WordDiff(rows, changed_rows[0] if changed_rows else None, changed_rows)
