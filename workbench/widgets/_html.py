"""HTML fragments the widgets lay out: tables and the side-by-side diff. Every value is escaped (responses
are model output: they may hold markup), and long texts are clipped so a panel stays readable, the whole
response one click away (``<details>``: no JavaScript, so it opens in an HTML export too)."""

from __future__ import annotations

import html
from collections.abc import Sequence

from workbench.analysis.diagnosis.evidence import DIFF_INPUT_CHARS
from workbench.analysis.diagnosis.types import AttemptEvidence, TaskDive, TaskEvidence, TaskShift
from workbench.analysis.triage.diff import Span, word_diff

CELL_CHARS = 120
FULL_CHARS = 50_000
"""Characters of a response its "show all" opens (a runaway generation can be megabytes)."""
STYLE = ("<style>.nel-table{border-collapse:collapse;font-size:12px}.nel-table td,.nel-table th{border:1px solid #ddd;"
         "padding:2px 6px;text-align:left;vertical-align:top}.nel-diff td{white-space:pre-wrap;font-family:monospace;"
         "width:50%}.nel-removed{background:#ffd7d5}.nel-added{background:#ccffd8}</style>")


def esc(value: object) -> str:
    return html.escape("" if value is None else str(value))


def clip(text: str | None, limit: int = CELL_CHARS) -> str:
    text = "" if text is None else text.replace("\n", " ⏎ ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Markup(str):
    """HTML built here from escaped parts: ``table`` puts it in as it is."""


def on_demand(text: str | None, limit: int = CELL_CHARS) -> Markup:
    """The start of ``text``; when that is not all of it, the whole (up to ``FULL_CHARS``) opens on a click."""
    short = clip(text, limit)
    if text is None or text == short:
        return Markup(esc(short))
    more = len(text) - FULL_CHARS
    rest = f"\n… {more:,} more characters not shown" if more > 0 else ""
    return Markup(f"<details><summary>{esc(short)}</summary><pre style='white-space:pre-wrap;max-height:480px;"
                  f"overflow:auto;margin:2px 0'>{esc(text[:FULL_CHARS])}{esc(rest)}</pre></details>")


def _cell(value: object) -> str:
    return value if isinstance(value, Markup) else esc(value)


def table(head: Sequence[str], rows: Sequence[Sequence[object]], *, empty: str = "none") -> str:
    """A plain HTML table; every cell escaped (``Markup`` cells are escaped already)."""
    if not rows:
        return f"<p><i>{esc(empty)}</i></p>"
    th = "".join(f"<th>{esc(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{_cell(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"{STYLE}<table class='nel-table'><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def attempts_table(dive: TaskDive) -> str:
    """One row per attempt: verdict, extracted answer, failure category, the start of the response (click it
    for the whole)."""
    rows = [(e.repeat, "pass" if e.passed else "fail", clip(e.extracted_answer, 40), e.failure_category or "",
             on_demand(e.error, 60), on_demand(e.response)) for e in dive.evidence]
    title = (f"<b>{esc(dive.run_id)}</b> task {dive.task_idx}: {dive.passes}/{dive.attempts} passed, "
             f"expected {esc(clip(dive.expected_answer, 40))}")
    return f"<div>{title}</div>" + table(("repeat", "verdict", "answer", "category", "error", "response"), rows,
                                         empty="no attempt texts (the numbers came without an evidence source)")


def _spans(spans: Sequence[Span]) -> str:
    return "".join(esc(s.text) if s.kind == "same" else f"<span class='nel-{s.kind}'>{esc(s.text)}</span>"
                   for s in spans)


def _label(e: AttemptEvidence) -> str:
    return f"{e.run_id} task {e.task_idx} attempt {e.repeat}: answer {clip(e.extracted_answer, 40) or '(none)'}"


def diff_html(passing: AttemptEvidence | None, failing: AttemptEvidence | None, baseline: str | None = None) -> str:
    """A passing and a failing response side by side, changed words highlighted (``word_diff``). The attempt
    of run ``baseline`` (A) is on the left whether it passed or failed, as everywhere else in the comparison."""
    if passing is None or failing is None:
        return "<p><i>no pass/fail pair to compare: every attempt passed, or every attempt failed</i></p>"
    swap = baseline is not None and failing.run_id == baseline != passing.run_id
    left, right = (failing, passing) if swap else (passing, failing)
    diff = word_diff(left.response[:DIFF_INPUT_CHARS], right.response[:DIFF_INPUT_CHARS])
    rows = "".join(f"<tr><td>{_spans(r.left)}</td><td>{_spans(r.right)}</td></tr>" for r in diff.rows)

    def side(e: AttemptEvidence) -> str:
        run = "" if baseline is None else "A · " if e.run_id == baseline else "B · "
        return f"{run}{'pass' if e is passing else 'fail'}: {_label(e)}"

    head = f"<tr><th>{esc(side(left))}</th><th>{esc(side(right))}</th></tr>"
    clipped = max(len(passing.response), len(failing.response)) > DIFF_INPUT_CHARS
    note = f"<p><i>responses clipped to their first {DIFF_INPUT_CHARS:,} characters</i></p>" if clipped else ""
    return (f"{STYLE}<table class='nel-table nel-diff' style='width:100%'><thead>{head}</thead><tbody>{rows}</tbody>"
            f"</table>{note}")


def task_header(task: TaskShift) -> str:
    slices = ", ".join(f"{k} = {v}" for k, v in task.slices.items())
    return (f"<h4 style='margin:4px 0'>Task {task.task_idx_b} <code>{esc(task.task_id[:16])}</code></h4>"
            f"<div>A {task.passes_a}/{task.attempts_a} ({task.bucket_a}) → B {task.passes_b}/{task.attempts_b} "
            f"({task.bucket_b}); contribution {task.contribution:+.4f}; errors {task.errors_a} → {task.errors_b}"
            f"{'; ' + esc(slices) if slices else ''}</div>")


def task_panel(task: TaskShift, evidence: TaskEvidence | None) -> str:
    """The drill-down: the task's counts, its attempts in each run, and a pass against a fail."""
    if evidence is None:
        return task_header(task) + ("<p><i>no attempt texts: load the runs from a store or an export "
                                    "to see them</i></p>")
    return (task_header(task) + "<h5>Attempts in A</h5>" + attempts_table(evidence.dive_a)
            + "<h5>Attempts in B</h5>" + attempts_table(evidence.dive_b)
            + "<h5>A pass against a fail</h5>"
            + diff_html(evidence.representative_pass, evidence.representative_fail, evidence.dive_a.run_id))
