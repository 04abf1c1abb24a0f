"""How numbers, times and answers read in the TUI's tables (short, fixed-width where it helps)."""

from __future__ import annotations

from datetime import datetime

from rich.text import Text


def num(text: str) -> Text:
    """A right-aligned cell (numbers line up)."""
    return Text(text, justify="right")


def rate(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def interval(low: float | None, high: float | None) -> str:
    return "—" if low is None or high is None else f"[{low:.3f}, {high:.3f}]"


def estimate(value: float | None, low: float | None, high: float | None) -> str:
    """``0.517 [0.397, 0.637]``: a headline number always comes with its interval."""
    return "—" if value is None else f"{rate(value)} {interval(low, high)}"


def count(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def millis(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:,.0f} ms" if value >= 10 else f"{value:.1f} ms"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def when(value: datetime | None) -> str:
    """Store timestamps are UTC."""
    return "—" if value is None else value.strftime("%Y-%m-%d %H:%M")


def clip(value: object, limit: int = 40) -> str:
    """One line of at most ``limit`` characters (newlines shown as ⏎)."""
    if value is None:
        return "—"
    text = str(value).replace("\r", "").replace("\n", "⏎").replace("\t", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


QUESTION_CELLS = 24
"""A task's question in a list (first line, clipped): enough to recognise the task, not to push the numbers
off an 80-column table."""
ID_CELLS = 24
"""A run id squeezed into one line beside another (a crumb ``A … → B …``, a table's title)."""


def elide_middle(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters, its middle replaced by ``…``. Run ids share their head (benchmark,
    model) and differ in their tail (date, hash): cutting the middle keeps both ends readable."""
    if len(text) <= limit:
        return text
    if limit <= 1:
        return "…"[:limit]
    kept = limit - 1
    head = kept // 2
    return f"{text[:head]}…{text[len(text) - (kept - head):]}"


def bar(done: int, total: int, width: int = 20) -> str:
    """A text progress bar (a widget per shard would not fit 64 shards in 24 lines)."""
    if total <= 0:
        return "░" * width
    filled = min(width, round(width * done / total))
    return "█" * filled + "░" * (width - filled)


def clock(value: datetime | None) -> str:
    """Time of day with seconds (UTC), for events of one run."""
    return "—" if value is None else value.strftime("%H:%M:%S")
