"""Which statement of an editor full of SQL to run: the one under the cursor, as SQL IDEs do.

A ``;`` ends a statement unless it is inside a quoted string or identifier or a comment, so the split
follows SQL's quoting rules rather than cutting at every semicolon.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Span:
    start: int
    end: int
    """Exclusive: the index of the ``;`` that ends the statement, or the text's length."""


def statement_spans(text: str) -> list[Span]:
    """Where each statement of ``text`` lies (empty ones included), in order."""
    spans: list[Span] = []
    start, i, n = 0, 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "'\"":
            close = text.find(ch, i + 1)
            while close != -1 and text[close + 1:close + 2] == ch:  # '' and "" escape the quote itself
                close = text.find(ch, close + 2)
            i = n if close == -1 else close + 1
            continue
        if text.startswith("--", i):
            newline = text.find("\n", i)
            i = n if newline == -1 else newline + 1
            continue
        if text.startswith("/*", i):
            close = text.find("*/", i + 2)
            i = n if close == -1 else close + 2
            continue
        if ch == ";":
            spans.append(Span(start, i))
            start = i + 1
        i += 1
    spans.append(Span(start, n))
    return spans


def statement_at(text: str, offset: int) -> str:
    """The statement the cursor at ``offset`` is in, stripped; a cursor after a statement's ``;`` (in the
    blank space before the next one) still means that statement. Empty when the text holds none."""
    spans = [s for s in statement_spans(text) if _code(text[s.start:s.end])]
    if not spans:
        return ""
    chosen = spans[0]
    for span in spans:
        body = text[span.start:span.end]
        if span.start + len(body) - len(body.lstrip()) <= offset:  # where its text starts, blanks before it skipped
            chosen = span
    return text[chosen.start:chosen.end].strip()


def _code(statement: str) -> bool:
    """Whether a statement holds anything but blanks and comments."""
    return bool(_without_comments(statement))


def _without_comments(statement: str) -> str:
    """``statement`` without its comments and surrounding blanks (quoted text kept)."""
    out: list[str] = []
    i, n = 0, len(statement)
    while i < n:
        if statement.startswith("--", i):
            newline = statement.find("\n", i)
            i = n if newline == -1 else newline + 1
        elif statement.startswith("/*", i):
            close = statement.find("*/", i + 2)
            i = n if close == -1 else close + 2
        elif statement[i] in "'\"":
            close = statement.find(statement[i], i + 1)
            end = n if close == -1 else close + 1
            out.append(statement[i:end])
            i = end
        else:
            out.append(statement[i])
            i += 1
    return "".join(out).strip()
