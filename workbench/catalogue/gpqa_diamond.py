"""GPQA Diamond (Idavidrein/gpqa, config gpqa_diamond): the right answer and three wrong ones, in columns.

Upstream keeps the correct answer in its own column, so the options must be shuffled to be shown. The
order is seeded from the question's own text (not a global random stream and not the row position),
so every run of every harness that uses this converter sees the same letters, and a reordered or
extended upstream file changes nothing for the questions it kept.
"""

from __future__ import annotations

from typing import Any

from workbench.catalogue.choices import content_seed, mcq_row, shuffled

WRONG = ("Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")


def convert(row: dict[str, Any]) -> dict[str, Any]:
    """One upstream row (``Question``, ``Correct Answer``, ``Incorrect Answer 1..3``, ``High-level domain``,
    ``Subdomain``, ``Record ID``) → its frozen row with the options in their seeded order."""
    question = str(row["Question"]).strip()
    options = [str(row["Correct Answer"]).strip(), *(str(row[c]).strip() for c in WRONG)]
    order, correct = shuffled(options, 0, content_seed(question, *options))
    return mcq_row(question, order, correct, category=row["High-level domain"], subdomain=row.get("Subdomain"),
                   record_id=row.get("Record ID"))
