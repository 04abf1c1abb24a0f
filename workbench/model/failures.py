"""Failure categories: why an attempt produced no usable answer.

Transport-level categories come from the HTTP exchange; ``empty_response``,
``refusal`` and ``format_error`` are decided after the response is scored, and
``judge_error`` when a judge scoring the response gave no verdict; ``max_turns_exhausted`` when an
agent (the tool-calling solver) was still calling tools when its turns ran out.
"""

from __future__ import annotations

import re
from typing import get_args

from workbench.types import FailureCategory

FAILURE_CATEGORIES: tuple[FailureCategory, ...] = get_args(FailureCategory)
NO_ANSWER_CATEGORIES: frozenset[FailureCategory] = frozenset((*FAILURE_CATEGORIES[:5], "image_error"))
"""The exchange failed, or never happened (a prompt's image did not decode): no answer came back (so there is
nothing to score again)."""
ERROR_CATEGORIES: frozenset[FailureCategory] = NO_ANSWER_CATEGORIES | {"scorer_error"}
"""Attempts that reached no verdict: the exchange failed (the model gave no answer), or the scorer raised on
the answer. The rest are answers that failed. ``store/views.sql`` has the same list in its
``is_error_category`` macro; a run fails when more than ``--max-error-rate`` of its attempts are errors."""
RETRYABLE_CATEGORIES: frozenset[FailureCategory] = frozenset(("rate_limit", "timeout", "server_error"))
"""Errors a later attempt may not meet (``--resume --retry-errors`` attempts them again): transport and server
failures. A context-window or other 4xx error, or a scorer's, would only repeat."""

_CONTEXT_WINDOW = re.compile(
    r"(?i)(context length|context window|maximum context|too many tokens|prompt is too long|"
    r"input is too long|reduce the length)"
)
_REFUSAL = re.compile(
    r"(?i)\b(I(?:'m| am) sorry,? but I (?:can(?:'|no)t|won't|am unable)|I can(?:'|no)t (?:help|assist|comply)"
    r"|I(?:'m| am) (?:not able|unable) to (?:help|assist|comply)|I must decline)"
)


def classify_http_error(status: int, body: str) -> FailureCategory:
    """Map a final (non-retried or retries-exhausted) HTTP error to a category."""
    if status == 429:
        return "rate_limit"
    if status in (408, 504):
        return "timeout"
    if status >= 500:
        return "server_error"
    if status in (400, 413, 422) and _CONTEXT_WINDOW.search(body):
        return "context_window"
    return "model_error"


def classify_judged(text: str, reward: float) -> FailureCategory | None:
    """Categorise an answer a scorer judged whole, with no extraction step (a BYOB scorer): empty, a
    refusal, or ``None`` — a wrong but well-formed answer is not a format error."""
    if reward > 0:
        return None
    if not text.strip():
        return "empty_response"
    return "refusal" if _REFUSAL.search(text) else None


def classify_answer(text: str, reward: float, extracted: str | None) -> FailureCategory | None:
    """Categorise a response that arrived but did not pass; ``None`` for a plain wrong answer."""
    if reward > 0:
        return None
    if not text.strip():
        return "empty_response"
    if extracted is None:
        return "refusal" if _REFUSAL.search(text) else "format_error"
    return None


def classify_error_text(text: str, *, also: tuple[tuple[str, FailureCategory], ...] = ()) -> FailureCategory:
    """An imported harness's error message as a category (no HTTP status to go on): a timeout, a context window, a
    rate limit, then the harness's own ``also`` (a word in the text, its category), else a server error."""
    text = text.lower()
    if "timeout" in text or "timed out" in text:
        return "timeout"
    if "context" in text and ("length" in text or "window" in text):
        return "context_window"
    if ("rate" in text and "limit" in text) or "429" in text:
        return "rate_limit"
    for needle, category in also:
        if needle in text:
            return category
    return "server_error"
