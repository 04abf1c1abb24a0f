"""Plain-text rendering of results for the terminal (no statistics computed here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.analysis.run_summary import RunSummary
from workbench.types import BenchmarkFigures


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def render_summary(summary: RunSummary, *, store: Path, title: str) -> str:
    s = summary
    lines = [title]
    for k, est in s.pass_at_k.items():
        method = "" if est.method == "t" else f", {est.method}"
        lines.append(
            f"  pass@{k:<3} {est.value:.4f}  95% CI [{est.low:.4f}, {est.high:.4f}]  ({est.n_tasks} tasks{method})"
        )
        if est.note:
            lines.append(f"           {est.note}")
    if s.benchmark_figures is not None:
        lines += render_figures(s.benchmark_figures)
    b = s.buckets
    errored = f", {b['errored']} errored" if "errored" in b else ""
    lines.append(
        f"  tasks    {s.n_tasks_attempted}/{s.n_tasks} attempted: {b['always']} always pass, "
        f"{b['sometimes']} sometimes, {b['never']} never{errored}, {b['missing']} missing"
    )
    lines.append(
        f"  steps    {s.n_steps}/{s.n_steps_expected}: {s.n_pass} passed, {s.n_wrong} wrong answers, "
        f"{sum(s.failures.values())} failed"
    )
    if s.failures:
        parts = [f"{cat} {n} ({_pct(n, s.n_steps)})" for cat, n in sorted(s.failures.items(), key=lambda x: -x[1])]
        lines.append(f"  failures {', '.join(parts)}")
    t = s.tokens
    lines.append(
        f"  tokens   prompt {t['prompt_tokens']:,}, completion {t['completion_tokens']:,}, total {t['total_tokens']:,}"
    )
    lat = s.latency_ms
    lines.append(f"  latency  p50 {lat[50]:.1f} ms, p90 {lat[90]:.1f} ms, p99 {lat[99]:.1f} ms")
    if (gym := s.extra.get("gym_delegation")) is not None:
        lines.append(f"  gym      {render_agreement(gym)}")
    lines.append(f"  store    {store}  (run {s.run_id})")
    return "\n".join(lines)


def render_figures(figures: BenchmarkFigures, indent: str = "  ") -> list[str]:
    """The benchmark's own figures, under its authors' names and saying whose: a heading and one line of them."""
    values = "  ".join(f"{name} {value:.4f}" for name, value in figures.values.items())
    whose = f"{figures.source}'" if figures.source.endswith("s") else f"{figures.source}'s"
    return [f"{indent}{whose} figures over {figures.n_steps} {figures.over}:", f"{indent}  {values}"]


def render_agreement(gym: dict[str, Any]) -> str:
    """A delegated run's rewards: whose they are, and how often nel's scorer and Gym's /verify disagreed."""
    if gym["reward"] == "gym":
        return f"rewards are Gym's (trust_reward): {gym['gym_scored']} attempts scored by its /verify"
    rate = gym["disagreement_rate"]
    shown = "-" if rate is None else f"{rate:.1%}"
    return (f"nel re-verified the Gym agent's answers: disagreement rate {shown} "
            f"({gym['disagree']} of {gym['compared']} attempts)")
