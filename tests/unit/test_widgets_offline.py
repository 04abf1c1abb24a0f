"""What the notebook widgets show where there is no internet and no kernel: charts that carry their own
JavaScript, static HTML an export draws, drill-downs that open whole responses, the baseline on the left, no
empty chart, and a store found from ``notebooks/``. (The real offline JupyterLab and browser:
``tests/notebooks/test_jupyterlab_browser.py``.)"""

from __future__ import annotations

import math
from dataclasses import replace

import altair as alt
import ipywidgets as w
import pytest
from test_widget_charts import OUTCOMES, profile, shift
from test_widgets import attempt, diagnosis, dive, with_driver

from workbench.analysis.diagnosis.types import TaskEvidence
from workbench.errors import UsageError
from workbench.widgets import _html, charts, find_store, static
from workbench.widgets.run_overview import RunOverview
from workbench.widgets.score_shift import ScoreShift

CDN_IMPORT = 'from "https://'


def live_charts(widget: w.Widget) -> list[alt.JupyterChart]:
    found = [widget] if isinstance(widget, alt.JupyterChart) else []
    for child in getattr(widget, "children", ()):
        found += live_charts(child)
    return found


class TestOffline:
    def test_every_chart_of_a_widget_carries_vega_embed_instead_of_importing_it_from_a_cdn(self):
        widget = ScoreShift.from_diagnosis(diagnosis(shift(OUTCOMES)))
        views = live_charts(widget) + live_charts(RunOverview(profile()))
        assert len(views) == 4 + 3
        for view in views:
            assert CDN_IMPORT not in view._esm and "esm.sh" not in view._esm
            assert "vegaEmbed" in view._esm or "embed" in view._esm  # the bundle, not an empty module

    def test_a_plain_chart_displays_as_an_offline_widget_with_static_renderings(self):
        static.enable()
        try:
            bundle = alt.Chart(charts.bucket_histogram_frame(profile())).mark_bar().encode(
                x="passes:O", y="n_tasks:Q")._repr_mimebundle_()
        finally:
            alt.renderers.enable("default")
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        assert "application/vnd.jupyter.widget-view+json" in data
        assert "<svg" in data["text/html"] and data["image/png"]


class TestStaticHtml:
    """``text/html``: what ``jupyter nbconvert --to html`` shows of a widget (no widget runs there)."""

    def test_score_shift_shows_its_summary_and_its_charts_as_inline_svg(self):
        html = ScoreShift.from_diagnosis(diagnosis(shift(OUTCOMES)))._repr_mimebundle_()["text/html"]
        assert "Δ pass@1 = " in html and html.count("<svg") == 1  # one figure of the four charts
        assert "Click a waterfall bar" not in html  # nothing to click in an export

    def test_run_overview_shows_its_summary_charts_and_slice_table(self):
        html = RunOverview(profile())._repr_mimebundle_()["text/html"]
        assert "pass@1 0.5000" in html and "<svg" in html and "<td>x</td>" in html

    def test_no_static_rendering_asked_for_none_given(self):
        bundle = RunOverview(profile(), static=None)._repr_mimebundle_()
        assert "text/html" not in bundle and "image/png" not in bundle


class TestNoEmptyPanel:
    def test_without_slices_the_score_shift_says_so_instead_of_drawing_bare_axes(self):
        widget = ScoreShift.from_diagnosis(diagnosis(replace(shift(OUTCOMES), slices=())))
        assert isinstance(widget.slice_view, w.HTML) and "no slice columns" in widget.slice_view.value
        assert len(live_charts(widget)) == 3
        assert len(charts.score_shift_chart(widget.shift).vconcat[1].hconcat) == 1  # the heatmap alone
        assert "no slice columns" in widget._repr_mimebundle_()["text/html"]

    def test_without_failed_attempts_the_overview_draws_no_failure_chart(self):
        overview = RunOverview(profile(failures=(), slices=()))
        assert len(live_charts(overview)) == 2
        assert "no failed attempt" in overview._repr_mimebundle_()["text/html"]
        assert len(charts.run_overview_chart(overview.profile).vconcat) == 1  # no empty second row


class TestDrillDown:
    def test_a_long_response_opens_whole_on_a_click_escaped(self):
        text = "<b>step</b> " * 40 + "the answer is 41"
        cell = _html.on_demand(text)
        assert cell.startswith("<details><summary>") and "the answer is 41</pre>" in cell
        assert "<b>" not in cell and "&lt;b&gt;step&lt;/b&gt;" in cell

    def test_a_short_response_is_shown_as_it_is(self):
        assert _html.on_demand("42") == "42" and "<details>" not in _html.on_demand("a <i>")

    def test_a_runaway_response_opens_up_to_full_chars_and_says_how_much_is_left(self):
        cell = _html.on_demand("x" * (_html.FULL_CHARS + 1234))
        assert "1,234 more characters not shown" in cell and "x" * (_html.FULL_CHARS + 1) not in cell

    def test_the_panel_of_a_driver_holds_its_whole_responses(self):
        long = "so the answer is 42 " + "because " * 50
        s = with_driver(shift(OUTCOMES))
        ev = s.drivers_down[0]
        a = tuple(replace(e, response=long) for e in ev.dive_a.evidence)
        ev = replace(ev, dive_a=replace(ev.dive_a, evidence=a))
        widget = ScoreShift.from_diagnosis(diagnosis(replace(s, drivers_down=(ev,))))
        widget.select_task(ev.task.task_id)
        assert f">{long}</pre>" in widget.panel.value


class TestDiffSides:
    def test_the_baseline_stays_on_the_left_when_it_is_the_side_that_failed(self):
        t = next(t for t in shift(OUTCOMES).tasks if t.passes_b > t.passes_a)
        fail_a = attempt("a", t, 0, False, "so the answer is 41")
        pass_b = attempt("b", t, 0, True, "so the answer is 42")
        ev = TaskEvidence(task=t, dive_a=dive("a", t, 0, (fail_a,)), dive_b=dive("b", t, 1, (pass_b,)),
                          representative_pass=pass_b, representative_fail=fail_a, diff_markdown="")
        html = _html.diff_html(ev.representative_pass, ev.representative_fail, "a")
        head = html[html.index("<thead>"):html.index("</thead>")]
        assert head.index("A · fail: a task") < head.index("B · pass: b task")
        body = html[html.index("<tbody>"):]
        assert body.index("41") < body.index("42")  # A's words in the left column

    def test_a_baseline_that_passed_is_on_the_left_too(self):
        html = _html.diff_html(attempt("a", shift(OUTCOMES).tasks[0], 0, True, "42"),
                               attempt("b", shift(OUTCOMES).tasks[0], 0, False, "41"), "a")
        assert html.index("A · pass") < html.index("B · fail")


class TestScatterAxes:
    def test_the_largest_point_at_0_or_1_stays_clear_of_the_axes(self):
        spec = charts.scatter_chart(shift(OUTCOMES)).to_dict()
        scales = [layer["encoding"]["x"].get("scale", {}) for layer in spec["layer"]
                  if "x" in layer.get("encoding", {})]
        padded = [s for s in scales if s.get("domain") == [0, 1]]
        assert padded and all(s["padding"] >= math.sqrt(charts.POINT_AREA_MAX / math.pi) for s in padded)


class TestFindStore:
    """``explore.ipynb`` opened from ``notebooks/`` finds the store ``make demo`` wrote in the checkout."""

    def test_nel_store_wins(self, tmp_path, monkeypatch):
        (tmp_path / "mine.duckdb").touch()
        monkeypatch.setenv("NEL_STORE", str(tmp_path / "mine.duckdb"))
        assert find_store(start=tmp_path) == tmp_path / "mine.duckdb"

    def test_the_demo_store_in_a_parent_directory_is_found(self, tmp_path, monkeypatch):
        monkeypatch.delenv("NEL_STORE", raising=False)
        (tmp_path / "nel-demo").mkdir()
        (tmp_path / "nel-demo" / "nel.duckdb").touch()
        (tmp_path / "notebooks").mkdir()
        assert find_store(start=tmp_path / "notebooks") == tmp_path / "nel-demo" / "nel.duckdb"

    def test_no_store_is_one_line_naming_where_it_looked(self, tmp_path, monkeypatch):
        monkeypatch.delenv("NEL_STORE", raising=False)
        with pytest.raises(UsageError, match=r"nel-demo/nel.duckdb is in neither .* NEL_STORE is not set"):
            find_store(start=tmp_path)
        monkeypatch.setenv("NEL_STORE", str(tmp_path / "gone.duckdb"))
        with pytest.raises(UsageError, match=r"NEL_STORE=.*gone\.duckdb: no store there"):
            find_store(start=tmp_path)

    def test_a_notebook_that_makes_its_runs_gets_a_store_in_the_checkout(self, tmp_path, monkeypatch):
        monkeypatch.delenv("NEL_STORE", raising=False)
        (tmp_path / "pyproject.toml").touch()
        (tmp_path / "notebooks").mkdir()
        assert find_store(must_exist=False, start=tmp_path / "notebooks") == tmp_path / "nel-demo" / "nel.duckdb"

