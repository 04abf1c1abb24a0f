"""`render_report`: every format from the eval bundle alone, with data escaped for each target."""

from __future__ import annotations

import copy
import csv
import io
import re

import orjson
import pytest

from workbench.export.report import CSV_COLUMNS, FORMATS, md_escape, render_report, tex_escape

EVIL = "<script>alert('x')</script> & 100% $5 #1 a_b {c} ~d ^e \\f | g"


def _est(value, low, high, n=40):
    return {"value": value, "low": low, "high": high, "n_tasks": n, "se": 0.01, "confidence": 0.95}


@pytest.fixture
def bundle():
    return {
        "format": "nel-eval-bundle", "format_version": 1, "run_id": "gsm8k-1", "benchmark": "gsm8k",
        "model_id": "org/model_v2 & friends", "model_url": "http://h/v1", "protocol": "chat_completions",
        "status": "complete", "created_at": "2026-01-01T00:00:00Z", "finished_at": "2026-01-01T00:01:00Z",
        "n_tasks": 40, "n_repeats": 2, "n_tasks_attempted": 40, "n_steps": 80, "n_steps_expected": 80, "n_pass": 50,
        "n_wrong": 20, "n_failed": 10, "n_errors": 4, "primary_metric": "correct", "metrics": ["correct", "f1"],
        "pass_at_k": {"1": _est(0.625, 0.5312, 0.7188), "2": _est(0.75, 0.6123, 0.8877)},
        "scores": {
            "correct": {"mean_reward": 0.625, "mean_reward_low": 0.53, "mean_reward_high": 0.72, "pass_rate": 0.625,
                        "n_tasks": 40, "n_steps": 80},
            "f1": {"mean_reward": 0.7, "mean_reward_low": 0.6, "mean_reward_high": 0.8, "pass_rate": 0.4,
                   "n_tasks": 40, "n_steps": 80},
        },
        "categories": {
            "algebra | <b>": {"n_tasks": 20, "n_steps": 40, "mean_reward": 0.7,
                              "pass_at_k": {"1": _est(0.7, 0.6, 0.8, 20), "2": _est(0.8, 0.7, 0.9, 20)}},
            "geometry": {"n_tasks": 20, "n_steps": 40, "mean_reward": 0.55,
                         "pass_at_k": {"1": _est(0.55, 0.4, 0.7, 20), "2": _est(None, None, None, 0)}},
        },
        "runtime_stats": {
            "run_id": "gsm8k-1", "n_steps": 80, "wall_time_s": 4.0, "steps_per_s": 20.0, "latency_p50_ms": 12.5,
            "latency_p90_ms": 30.0, "latency_p99_ms": 90.25, "completion_tokens": 8000, "prompt_tokens": 4000,
            "total_tokens": 12000, "completion_tokens_per_s": 2000.0, "mean_request_completion_tokens_per_s": 150.0,
            "finish_reasons": {"stop": 70, "length": 6, "none": 4}, "n_errors": 4, "error_rate": 0.05,
            "n_retries": 3, "latency_breakdown_ms": {"model_ms": {"mean": 10.0, "p50": 9.0}},
        },
        "failure_analysis": {
            "run_id": "gsm8k-1", "n_steps": 80, "n_failed": 10, "failure_rate": 0.125,
            "categories": [
                {"category": "format_error", "kind": "answer", "count": 6, "percent": 7.5, "exemplars": [
                    {"task_id": "t3", "problem_idx": 3, "repeat": 1, "model_response": EVIL, "error": None}]},
                {"category": "server_error", "kind": "error", "count": 4, "percent": 5.0, "exemplars": [
                    {"task_id": "t9", "problem_idx": 9, "repeat": 0, "model_response": "", "error": "HTTP 500"}]},
            ],
            "wrong_answers": {"count": 20, "percent": 25.0, "exemplars": [
                {"task_id": "t1", "problem_idx": 1, "repeat": 0, "model_response": "The answer is 7."}]},
        },
    }


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_renders_the_headline_numbers(bundle, fmt):
    text = render_report(bundle, fmt)
    assert "0.625" in text and "gsm8k" in text and text.endswith("\n")
    assert render_report(copy.deepcopy(bundle), fmt) == text  # deterministic


def test_an_unknown_format_is_refused(bundle):
    with pytest.raises(ValueError, match="unknown report format 'pdf'"):
        render_report(bundle, "pdf")


class TestMarkdown:
    """Markdown: tables that stay tables whatever the data holds."""

    def test_pass_at_k_table_has_one_row_per_k_with_its_interval(self, bundle):
        text = render_report(bundle, "markdown")
        assert "| pass@1 | 0.6250 | [0.5312, 0.7188] | 40 |" in text
        assert "| pass@2 | 0.7500 | [0.6123, 0.8877] | 40 |" in text

    def test_shows_every_section(self, bundle):
        text = render_report(bundle, "markdown")
        for heading in ("## Run", "## pass@k", "## Scores by metric", "## Scores by category", "## Runtime",
                        "## Failures"):
            assert heading in text
        assert "| correct (primary) | 0.6250 |" in text and "| 40 x 2 |" in text
        assert "12.5 / 30.0 / 90.2 ms" in text and "stop 70, length 6, none 4" in text

    def test_data_cannot_break_a_row_or_inject_html(self, bundle):
        text = render_report(bundle, "markdown")
        row = next(line for line in text.splitlines() if line.startswith("| algebra"))
        assert row.count(" | ") == 5 and "\\|" in row and "<b>" not in row
        assert "<script>" not in text and "&lt;script&gt;" in text

    def test_escape_keeps_words_with_underscores_readable(self):
        assert md_escape("format_error") == "format_error"
        assert md_escape("_emph_ *b* [l](u) a|b") == "\\_emph\\_ \\*b\\* [l]\\(u) a\\|b"


class TestHtml:
    """HTML: one self-contained page where every text is escaped."""

    def test_a_response_holding_a_script_stays_text(self, bundle):
        text = render_report(bundle, "html")
        assert "<script" not in text.lower()
        assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in text
        assert "org/model_v2 &amp; friends" in text and "algebra | &lt;b&gt;" in text

    def test_is_self_contained(self, bundle):
        text = render_report(bundle, "html")
        assert text.startswith("<!DOCTYPE html>") and "<style>" in text
        assert not re.search(r"<link|\bsrc=|@import|url\(", text)

    def test_pass_at_k_rows(self, bundle):
        text = render_report(bundle, "html")
        assert '<td>pass@1</td><td class="r">0.6250</td><td>[0.5312, 0.7188]</td>' in text


class TestLatex:
    """LaTeX: a compilable document with every special character escaped."""

    def test_escapes_each_special_character_once(self):
        assert tex_escape("& % $ # _ { } ~ ^ \\") == (
            r"\& \% \$ \# \_ \{ \} \textasciitilde{} \textasciicircum{} \textbackslash{}")
        assert tex_escape("<a|b>") == r"\textless{}a\textbar{}b\textgreater{}"

    def test_document_escapes_the_data(self, bundle):
        text = render_report(bundle, "latex")
        assert r"org/model\_v2 \& friends" in text and "model_v2" not in text
        assert r"\textless{}script\textgreater{}" in text and "<script>" not in text
        assert r"\begin{document}" in text and text.rstrip().endswith(r"\end{document}")

    def test_only_column_separators_are_bare_ampersands(self, bundle):
        text = render_report(bundle, "latex")
        row = next(line for line in text.splitlines() if line.startswith("format"))
        assert len(re.findall(r"(?<!\\)&", row)) == 3  # four columns
        assert r"\& 100\% \$5 \#1" in row


class TestCsv:
    """CSV: one row per number, with columns that say what it is."""

    def _rows(self, bundle):
        return list(csv.DictReader(io.StringIO(render_report(bundle, "csv"))))

    def test_header_and_pass_at_k_rows(self, bundle):
        rows = self._rows(bundle)
        assert tuple(rows[0]) == CSV_COLUMNS
        p = [r for r in rows if r["section"] == "pass_at_k"]
        assert [(r["k"], r["value"], r["ci_low"], r["ci_high"]) for r in p] == [
            ("1", "0.625", "0.5312", "0.7188"), ("2", "0.75", "0.6123", "0.8877")]
        assert {r["run_id"] for r in rows} == {"gsm8k-1"}

    def test_metric_category_runtime_and_failure_rows(self, bundle):
        rows = self._rows(bundle)
        assert {r["metric"] for r in rows if r["section"] == "score"} == {
            "correct.mean_reward", "correct.pass_rate", "f1.mean_reward", "f1.pass_rate"}
        cat = [(r["group"], r["k"], r["value"]) for r in rows if r["section"] == "category"]
        assert ("algebra | <b>", "1", "0.7") in cat and ("geometry", "2", "") in cat
        assert any(r["section"] == "runtime" and r["metric"] == "latency_p99_ms" and r["value"] == "90.25"
                   for r in rows)
        failures = {(r["group"], r["metric"]): r["value"] for r in rows if r["section"] == "failure"}
        assert failures[("format_error", "count")] == "6" and failures[("wrong_answer", "percent")] == "25.0"


def test_json_report_is_the_data_behind_the_tables(bundle):
    data = orjson.loads(render_report(bundle, "json"))
    assert [p["k"] for p in data["pass_at_k"]] == [1, 2]
    assert data["pass_at_k"][0]["low"] == 0.5312 and data["run"]["n_repeats"] == 2
    assert [f["category"] for f in data["failures"]] == ["format_error", "server_error"]
    assert data["categories"][1]["pass_at_k"][1]["value"] is None


def test_missing_numbers_render_as_a_dash(bundle):
    bundle["pass_at_k"]["1"] = _est(None, None, None, 0)
    bundle["categories"] = {}
    text = render_report(bundle, "markdown")
    assert "| pass@1 | - | - | 0 |" in text and "no categories" in text
