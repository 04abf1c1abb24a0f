"""A benchmark's own run-level figures (``EvalEnvironment.benchmark_figures``): declared by the environment's class,
folded over the run's steps' scoring details streamed from the store, carried into the summary and the bundle."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from factories import open_shard, run_header, step_row

from workbench import open_store
from workbench.analysis import figures
from workbench.analysis.figures import run_figures
from workbench.cli.render import render_summary
from workbench.environments.base import EvalEnvironment
from workbench.environments.ifeval import IFEvalEnvironment
from workbench.environments.registry import environment_class
from workbench.environments.simpleqa import SimpleQAEnvironment
from workbench.export.artifacts import build_eval_bundle, run_summary
from workbench.scoring.ifeval import ifeval_figures
from workbench.scoring.simpleqa import simpleqa_figures
from workbench.store import ingest
from workbench.types import BenchmarkFigures


def _store(path: Path, benchmark: str, details: list[dict[str, Any] | None], n_repeats: int = 2) -> Path:
    """A finished run of ``benchmark`` whose steps (task i // n_repeats, repeat i % n_repeats) carry ``details``."""
    n_tasks = -(-len(details) // n_repeats)
    w = open_shard(path, run_header("r", benchmark=benchmark, n_tasks=n_tasks, n_repeats=n_repeats))
    for i, d in enumerate(details):
        w.append(step_row("r", i // n_repeats, i % n_repeats, reward=float(bool(d and d.get("grade") == "CORRECT")),
                          passed=bool(d and d.get("grade") == "CORRECT"), latency_ms=1.0,
                          scoring_details=None if d is None else orjson.dumps(d).decode()))
    w.finish("complete")
    ingest(path)
    return path


def _graded(grade: str) -> dict[str, Any]:
    return {"method": "llm_judge", "grader": "simpleqa_grader", "grade": grade, "verdict": grade}


def test_the_environments_declare_their_figures_on_the_class_found_without_loading_data() -> None:
    assert environment_class("simpleqa") is SimpleQAEnvironment and environment_class("ifeval") is IFEvalEnvironment
    assert SimpleQAEnvironment.figures_source == "OpenAI simple-evals" and IFEvalEnvironment.figures_source == "lm-eval"
    mmlu = environment_class("mmlu")
    assert mmlu is not None and mmlu.figures_source is None
    assert environment_class("gym://localhost:1/x") is None and environment_class("no-such-benchmark") is None
    untouched = iter([{"grade": "CORRECT"}])
    assert EvalEnvironment.benchmark_figures(untouched) is None and next(untouched)  # the default reads nothing


def test_simpleqa_figures_are_over_every_graded_attempt_repeats_pooled(tmp_path: Path) -> None:
    grades = ["CORRECT", "CORRECT", "INCORRECT", "NOT_ATTEMPTED", "CORRECT", "INCORRECT"]
    ungraded: list[dict[str, Any] | None] = [
        {"method": "llm_judge", "verdict": None, "reason": "the judge's reply gives no grade"},
        {"method": "none", "reason": "no response: timeout"}, None,
        {"method": "llm_judge", "verdict": None, "reason": "empty response: not sent to the judge"}]
    store = open_store(_store(tmp_path / "nel.duckdb", "simpleqa", [*map(_graded, grades), *ungraded]))
    expected = BenchmarkFigures("OpenAI simple-evals", simpleqa_figures(grades), 6,
                                "graded attempts, every repeat pooled")
    assert run_figures(store, "r", "simpleqa") == expected
    summary = run_summary(store, store.run("r"))
    assert summary.benchmark_figures == expected
    assert build_eval_bundle(store, "r")["benchmark_figures"] == {
        "source": "OpenAI simple-evals", "values": simpleqa_figures(grades), "n_steps": 6,
        "over": "graded attempts, every repeat pooled"}
    printed = render_summary(summary, store=tmp_path, title="run r")
    assert "  OpenAI simple-evals' figures over 6 graded attempts, every repeat pooled:\n    correct 0.5000  " \
           "incorrect 0.3333  not_attempted 0.1667  correct_given_attempted 0.6000  f1 0.5455" in printed


def test_ifeval_figures_leave_out_attempts_with_unchecked_instructions_or_no_verdict(tmp_path: Path) -> None:
    scored = [{"method": "ifeval", "prompt_level_strict_acc": s, "prompt_level_loose_acc": lo,
               "inst_level_strict": list(ist), "inst_level_loose": list(il)}
              for s, lo, ist, il in ((True, True, (2, 2), (2, 2)), (False, True, (1, 3), (3, 3)),
                                     (False, False, (0, 1), (0, 1)))]
    unchecked = {**scored[0], "unchecked": ["length_constraints:number_sentences"], "reason": "no punkt"}
    store = open_store(_store(tmp_path / "nel.duckdb", "ifeval",
                              [*scored, unchecked, {"method": "too_long", "reason": "long"}]))
    got = run_figures(store, "r", "ifeval")
    assert got == BenchmarkFigures("lm-eval", ifeval_figures(scored), 3, "scored attempts, every repeat pooled")
    assert got.values == {"prompt_level_strict_acc": 1 / 3, "inst_level_strict_acc": 3 / 6,
                          "prompt_level_loose_acc": 2 / 3, "inst_level_loose_acc": 5 / 6}


def test_a_benchmark_without_figures_has_none_and_its_steps_are_not_read(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store(_store(tmp_path / "nel.duckdb", "mmlu", [_graded("CORRECT")]))

    def read(*_: object) -> None:
        raise AssertionError("the steps were read for a benchmark without figures")

    monkeypatch.setattr(figures, "fold_step_details", read)
    assert run_figures(store, "r", "mmlu") is None and run_figures(store, "r", "b") is None
    assert run_summary(store, store.run("r")).benchmark_figures is None
    assert build_eval_bundle(store, "r")["benchmark_figures"] is None


def test_no_graded_step_means_no_figures(tmp_path: Path) -> None:
    store = open_store(_store(tmp_path / "nel.duckdb", "simpleqa", [{"method": "none"}, None]))
    assert run_figures(store, "r", "simpleqa") is None


def test_the_report_shows_the_figures_whose_they_are_in_every_format(tmp_path: Path) -> None:
    from workbench.export.report import csv_rows, render_report, report_data

    store = open_store(_store(tmp_path / "nel.duckdb", "simpleqa", [_graded("CORRECT"), _graded("NOT_ATTEMPTED")]))
    bundle = build_eval_bundle(store, "r")
    markdown = render_report(bundle, "markdown")
    assert "## OpenAI simple-evals' figures (over 2 graded attempts, every repeat pooled)" in markdown
    assert "| f1 | 0.6667 |" in markdown and "| not_attempted | 0.5000 |" in markdown
    rows = [r for r in csv_rows(bundle) if r["section"] == "benchmark_figure"]
    assert [(r["metric"], r["value"], r["group"]) for r in rows] == [
        (name, value, "OpenAI simple-evals") for name, value in simpleqa_figures(["CORRECT", "NOT_ATTEMPTED"]).items()]
    assert report_data(bundle)["benchmark_figures"] == bundle["benchmark_figures"]
