"""A run's report in markdown, HTML, CSV, JSON or LaTeX, rendered from its eval bundle alone.

The bundle (``eval-{run_id}.json``, see ``workbench.export.artifacts``) is the only input, so a
report rendered from an exported directory and one rendered from the store are the same text.
Every piece of text that came from data (model names, categories, model responses) is escaped for
the target format: a response holding ``<script>`` or ``\\input`` stays text.
"""

from __future__ import annotations

import csv
import html
import io
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from workbench.analysis.markdown import md_escape

FORMATS = ("markdown", "html", "csv", "json", "latex")
EXTENSIONS = {"markdown": "md", "html": "html", "csv": "csv", "json": "json", "latex": "tex"}
CSV_COLUMNS = ("run_id", "benchmark", "model", "section", "metric", "k", "group", "value", "ci_low", "ci_high",
               "n_tasks", "n_steps")
EXAMPLE_CHARS = 80  # as NeMo Evaluator truncates responses in its reports

Cell = str | int | float | None


@dataclass(frozen=True, slots=True)
class Table:
    """One section of the report; ``align`` has one letter (l or r) per column."""

    title: str
    columns: tuple[str, ...]
    align: str
    rows: Sequence[tuple[str, ...]]
    empty: str = "none"


def render_report(bundle: dict[str, Any], fmt: str) -> str:
    """The report of ``bundle`` in ``fmt`` (one of ``FORMATS``).

    Raises:
        ValueError: for an unknown format.
    """
    renderers: dict[str, Callable[[dict[str, Any]], str]] = {
        "markdown": _markdown, "html": _html, "csv": _csv, "json": _json, "latex": _latex,
    }
    if fmt not in renderers:
        raise ValueError(f"unknown report format {fmt!r}; expected one of: {', '.join(FORMATS)}")
    return renderers[fmt](bundle)


def title(bundle: dict[str, Any]) -> str:
    return f"Evaluation report: {bundle.get('benchmark')} / {bundle.get('model_id') or 'unknown model'}"


# ---- number formatting -----------------------------------------------------------------------------
def _f(value: Any, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _int(value: Any) -> str:
    return "-" if value is None else f"{int(value):,}"


def _ci(low: Any, high: Any) -> str:
    return "-" if low is None or high is None else f"[{low:.4f}, {high:.4f}]"


def _pct(value: Any) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _clip(text: str | None, limit: int = EXAMPLE_CHARS) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---- the sections, as plain text cells -------------------------------------------------------------
def tables(bundle: dict[str, Any]) -> list[Table]:
    """The report's sections, shared by the markdown, HTML and LaTeX renderers."""
    b = bundle
    overview = Table("Run", ("field", "value"), "ll", [
        ("run", str(b.get("run_id"))),
        ("benchmark", str(b.get("benchmark"))),
        ("model", str(b.get("model_id"))),
        ("status", str(b.get("status"))),
        ("tasks x repeats", f"{_int(b.get('n_tasks'))} x {_int(b.get('n_repeats'))}"),
        ("steps", f"{_int(b.get('n_steps'))} of {_int(b.get('n_steps_expected'))}"),
        ("outcomes", f"{_int(b.get('n_pass'))} passed, {_int(b.get('n_wrong'))} wrong, "
                     f"{_int(b.get('n_failed'))} failed ({_int(b.get('n_errors'))} errors)"),
        ("created", str(b.get("created_at"))),
        ("finished", str(b.get("finished_at"))),
    ])
    pass_at_k = Table("pass@k (95% confidence intervals)", ("k", "pass@k", "95% CI", "tasks"), "lrlr", [
        (f"pass@{k}", _f(e.get("value")), _ci(e.get("low"), e.get("high")) + _method(e), _int(e.get("n_tasks")))
        for k, e in _by_k(b.get("pass_at_k"))
    ])
    primary = b.get("primary_metric")
    scores = Table("Scores by metric", ("metric", "mean reward", "95% CI", "pass rate", "tasks", "steps"), "lrlrrr", [
        (f"{name} (primary)" if name == primary else name, _f(s.get("mean_reward")),
         _ci(s.get("mean_reward_low"), s.get("mean_reward_high")), _f(s.get("pass_rate")), _int(s.get("n_tasks")),
         _int(s.get("n_steps")))
        for name, s in (b.get("scores") or {}).items()
    ])
    categories = Table("Scores by category", ("category", "tasks", "steps", "pass@1", "95% CI", "mean reward"),
                       "lrrrlr", [_category_row(name, c) for name, c in (b.get("categories") or {}).items()],
                       empty="no categories in this benchmark's data")
    figures = _figures_table(b.get("benchmark_figures"))
    return [overview, pass_at_k, *([figures] if figures else []), scores, categories,
            _runtime_table(b.get("runtime_stats") or {}), _failure_table(b.get("failure_analysis") or {})]


def _whose(source: str) -> str:
    return f"{source}'" if source.endswith("s") else f"{source}'s"


def _figures_table(f: dict[str, Any] | None) -> Table | None:
    """The figures the benchmark's authors report (SimpleQA's, IFEval's), under their names; None: it has none."""
    if not f:
        return None
    return Table(f"{_whose(str(f.get('source')))} figures (over {_int(f.get('n_steps'))} {f.get('over')})",
                 ("figure", "value"), "lr", [(str(name), _f(value)) for name, value in (f.get("values") or {}).items()])


def _method(e: dict[str, Any]) -> str:
    """" (wilson)" when an interval is not the plain t one (workbench.stats.bounds), so a reader knows what it is."""
    method = e.get("method")
    return f" ({method})" if method and method not in ("t", "none") and e.get("low") is not None else ""


def _by_k(pass_at_k: dict[str, Any] | None) -> list[tuple[int, dict[str, Any]]]:
    return sorted(((int(k), v) for k, v in (pass_at_k or {}).items()), key=lambda kv: kv[0])


def _category_row(name: str, c: dict[str, Any]) -> tuple[str, ...]:
    p1 = (c.get("pass_at_k") or {}).get("1") or {}
    return (name, _int(c.get("n_tasks")), _int(c.get("n_steps")), _f(p1.get("value")),
            _ci(p1.get("low"), p1.get("high")), _f(c.get("mean_reward")))


def _runtime_table(r: dict[str, Any]) -> Table:
    finish = ", ".join(f"{reason} {n:,}" for reason, n in (r.get("finish_reasons") or {}).items())
    return Table("Runtime", ("statistic", "value"), "ll", [
        ("latency p50 / p90 / p99", f"{_f(r.get('latency_p50_ms'), 1)} / {_f(r.get('latency_p90_ms'), 1)} / "
                                    f"{_f(r.get('latency_p99_ms'), 1)} ms"),
        ("wall time", f"{_f(r.get('wall_time_s'), 1)} s ({_f(r.get('steps_per_s'), 1)} steps/s)"),
        ("tokens", f"prompt {_int(r.get('prompt_tokens'))}, completion {_int(r.get('completion_tokens'))}, "
                   f"total {_int(r.get('total_tokens'))}"),
        ("completion tokens/s", f"{_f(r.get('completion_tokens_per_s'), 1)} over the run, "
                                f"{_f(r.get('mean_request_completion_tokens_per_s'), 1)} per request (mean)"),
        ("finish reasons", finish or "-"),
        ("errors", f"{_int(r.get('n_errors'))} ({_pct(_times100(r.get('error_rate')))}), "
                   f"{_int(r.get('n_retries'))} retries"),
    ])


def _times100(rate: Any) -> float | None:
    return None if rate is None else 100.0 * rate


def _failure_table(f: dict[str, Any]) -> Table:
    groups = list(f.get("categories") or [])
    wrong = f.get("wrong_answers") or {}
    if wrong.get("count"):
        groups.append({**wrong, "category": "wrong answer"})
    rows: list[tuple[str, ...]] = []
    for g in groups:
        first = (g.get("exemplars") or [{}])[0]
        example = first.get("model_response") or first.get("error") or ""
        where = f"problem {first.get('problem_idx')}, repeat {first.get('repeat')}: " if first else ""
        rows.append((str(g.get("category")), _int(g.get("count")), _pct(g.get("percent")),
                     where + _clip(example) if first else ""))
    return Table("Failures", ("category", "steps", "share", "example"), "lrrl", rows, empty="no failures")


# ---- markdown --------------------------------------------------------------------------------------
def _markdown(bundle: dict[str, Any]) -> str:
    out = [f"# {md_escape(title(bundle))}", ""]
    for t in tables(bundle):
        out += [f"## {md_escape(t.title)}", ""]
        if not t.rows:
            out += [f"_{md_escape(t.empty)}_", ""]
            continue
        out.append("| " + " | ".join(md_escape(c) for c in t.columns) + " |")
        out.append("|" + "|".join("---:" if a == "r" else "---" for a in t.align) + "|")
        out += ["| " + " | ".join(md_escape(c) for c in row) + " |" for row in t.rows]
        out.append("")
    return "\n".join(out)


# ---- HTML ------------------------------------------------------------------------------------------
_CSS = (
    "body{font-family:system-ui,sans-serif;margin:2rem;color:#222}"
    "table{border-collapse:collapse;margin:0 0 1.5rem}"
    "th,td{border:1px solid #ccc;padding:.3rem .6rem;text-align:left;vertical-align:top}"
    "th{background:#f3f3f3}td.r{text-align:right;font-variant-numeric:tabular-nums}"
    "p.empty{color:#666;font-style:italic}"
)


def _h(text: str) -> str:
    return html.escape(text, quote=True)


def _html(bundle: dict[str, Any]) -> str:
    """A self-contained page: inline CSS, no scripts, no external resources, every text escaped."""
    head = _h(title(bundle))
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           f"<title>{head}</title>", f"<style>{_CSS}</style>", "</head>", "<body>", f"<h1>{head}</h1>"]
    for t in tables(bundle):
        out.append(f"<h2>{_h(t.title)}</h2>")
        if not t.rows:
            out.append(f'<p class="empty">{_h(t.empty)}</p>')
            continue
        out.append("<table>")
        out.append("<tr>" + "".join(f"<th>{_h(c)}</th>" for c in t.columns) + "</tr>")
        for row in t.rows:
            cells = "".join(f'<td class="r">{_h(c)}</td>' if a == "r" else f"<td>{_h(c)}</td>"
                            for c, a in zip(row, t.align, strict=True))
            out.append(f"<tr>{cells}</tr>")
        out.append("</table>")
    out += ["</body>", "</html>", ""]
    return "\n".join(out)


# ---- LaTeX -----------------------------------------------------------------------------------------
_TEX = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
    "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"\textless{}", ">": r"\textgreater{}",
    "|": r"\textbar{}",
}
_TEX_SPECIAL = re.compile("|".join(re.escape(c) for c in _TEX))


def tex_escape(text: str) -> str:
    """Text safe in LaTeX: every special character (one pass, so escapes are never escaped again)."""
    return _TEX_SPECIAL.sub(lambda m: _TEX[m.group()], " ".join(text.split()))


def _latex(bundle: dict[str, Any]) -> str:
    """A standalone document (article + booktabs) whose tables can also be copied into a paper."""
    out = [r"\documentclass{article}", r"\usepackage[T1]{fontenc}", r"\usepackage[utf8]{inputenc}",
           r"\usepackage{booktabs}", r"\begin{document}", rf"\section*{{{tex_escape(title(bundle))}}}"]
    for t in tables(bundle):
        out.append(rf"\subsection*{{{tex_escape(t.title)}}}")
        if not t.rows:
            out += [rf"\emph{{{tex_escape(t.empty)}}}", ""]
            continue
        out += [r"\begin{tabular}{" + t.align + "}", r"\toprule",
                " & ".join(tex_escape(c) for c in t.columns) + r" \\", r"\midrule"]
        out += [" & ".join(tex_escape(c) for c in row) + r" \\" for row in t.rows]
        out += [r"\bottomrule", r"\end{tabular}", ""]
    out += [r"\end{document}", ""]
    return "\n".join(out)


# ---- CSV and JSON ----------------------------------------------------------------------------------
def csv_rows(bundle: dict[str, Any]) -> list[dict[str, Cell]]:
    """One row per number: pass@k, per-metric score, per-category pass@k, runtime statistic, failure count
    and share. ``group`` is the category (benchmark or failure category) a row belongs to."""
    b = bundle
    rows: list[dict[str, Cell]] = []

    def add(section: str, metric: str, value: Any, *, k: int | None = None, group: str | None = None,
            low: Any = None, high: Any = None, n_tasks: Any = None, n_steps: Any = None) -> None:
        rows.append({"run_id": b.get("run_id"), "benchmark": b.get("benchmark"), "model": b.get("model_id"),
                     "section": section, "metric": metric, "k": k, "group": group, "value": value, "ci_low": low,
                     "ci_high": high, "n_tasks": n_tasks, "n_steps": n_steps})

    for k, e in _by_k(b.get("pass_at_k")):
        add("pass_at_k", f"pass@{k}", e.get("value"), k=k, low=e.get("low"), high=e.get("high"),
            n_tasks=e.get("n_tasks"))
    figures = b.get("benchmark_figures") or {}
    for name, value in (figures.get("values") or {}).items():
        add("benchmark_figure", name, value, group=figures.get("source"), n_steps=figures.get("n_steps"))
    for name, s in (b.get("scores") or {}).items():
        add("score", f"{name}.mean_reward", s.get("mean_reward"), low=s.get("mean_reward_low"),
            high=s.get("mean_reward_high"), n_tasks=s.get("n_tasks"), n_steps=s.get("n_steps"))
        add("score", f"{name}.pass_rate", s.get("pass_rate"), n_tasks=s.get("n_tasks"), n_steps=s.get("n_steps"))
    for name, c in (b.get("categories") or {}).items():
        for k, e in _by_k(c.get("pass_at_k")):
            add("category", f"pass@{k}", e.get("value"), k=k, group=name, low=e.get("low"), high=e.get("high"),
                n_tasks=e.get("n_tasks"), n_steps=c.get("n_steps"))
    runtime = b.get("runtime_stats") or {}
    for key, value in runtime.items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            add("runtime", key, value, n_steps=runtime.get("n_steps"))
    for reason, n in (runtime.get("finish_reasons") or {}).items():
        add("finish_reason", "count", n, group=reason, n_steps=runtime.get("n_steps"))
    failures = b.get("failure_analysis") or {}
    wrong = failures.get("wrong_answers") or {}
    for g in [*(failures.get("categories") or []), {**wrong, "category": "wrong_answer"}]:
        if g.get("count"):
            add("failure", "count", g.get("count"), group=g.get("category"), n_steps=failures.get("n_steps"))
            add("failure", "percent", g.get("percent"), group=g.get("category"), n_steps=failures.get("n_steps"))
    return rows


def _csv(bundle: dict[str, Any]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(csv_rows(bundle))
    return buf.getvalue()


def report_data(bundle: dict[str, Any]) -> dict[str, Any]:
    """The report as data: what the other formats show, with numbers left unformatted."""
    b = bundle
    keys = ("run_id", "benchmark", "model_id", "model_url", "protocol", "status", "n_tasks", "n_repeats",
            "n_tasks_attempted", "n_steps", "n_steps_expected", "n_pass", "n_wrong", "n_failed", "n_errors",
            "created_at", "finished_at", "primary_metric")
    failures = b.get("failure_analysis") or {}
    return {
        "title": title(b),
        "run": {k: b.get(k) for k in keys},
        "pass_at_k": [{"k": k, **e} for k, e in _by_k(b.get("pass_at_k"))],
        "benchmark_figures": b.get("benchmark_figures"),
        "scores": [{"metric": name, **s} for name, s in (b.get("scores") or {}).items()],
        "categories": [
            {"category": name, "n_tasks": c.get("n_tasks"), "n_steps": c.get("n_steps"),
             "mean_reward": c.get("mean_reward"), "pass_at_k": [{"k": k, **e} for k, e in _by_k(c.get("pass_at_k"))]}
            for name, c in (b.get("categories") or {}).items()
        ],
        "runtime": b.get("runtime_stats") or {},
        "failures": [
            {key: g.get(key) for key in ("category", "kind", "count", "percent")}
            for g in failures.get("categories") or []
        ],
        "wrong_answers": {key: (failures.get("wrong_answers") or {}).get(key) for key in ("count", "percent")},
    }


def _json(bundle: dict[str, Any]) -> str:
    return orjson.dumps(report_data(bundle), option=orjson.OPT_INDENT_2).decode() + "\n"
