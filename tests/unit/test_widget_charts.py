"""The notebook charts (``workbench.widgets.charts``) and their static rendering, from small hand-built
diagnosis results: what each chart draws, checked on the table it draws from."""

from __future__ import annotations

import base64
import math
from dataclasses import replace

import pytest

from workbench.analysis.diagnosis.attribution import attribute_tasks
from workbench.analysis.diagnosis.types import (
    AttemptFlips,
    FailureCount,
    RunProfile,
    ScoreShift,
    SliceRow,
    SliceShift,
    TaskShift,
)
from workbench.stats import wilson_interval
from workbench.widgets import charts, static


def profile(run_id: str = "a", **overrides: object) -> RunProfile:
    fields: dict[str, object] = dict(
        run_id=run_id, benchmark="gsm8k", model_id="m", metric="reward", source="store", n_repeats=4, n_tasks=5,
        n_attempted=5, n_missing=0, n_attempts=20, n_completed=20, n_expected_attempts=20, coverage=1.0,
        pass_at_1=0.5, pass_at_1_low=0.3, pass_at_1_high=0.7, pass_at_k=0.8, k=4, consistency=0.2, retry_value=0.3,
        pass_at_k_curve=((1, 0.5, 0.3, 0.7), (2, 0.65, 0.45, 0.85), (3, 0.75, 0.55, 0.95), (4, 0.8, 0.6, 1.0)),
        buckets={"always": (0,), "sometimes": (1, 2, 3), "never": (4,), "missing": ()},
        pass_histogram=((0, 1), (1, 1), (2, 1), (3, 1), (4, 1)), slice_columns=("category",),
        slices=(SliceRow("category", "x", 3, 0.6, 0.0, 12), SliceRow("category", "y", 2, 0.375, 0.5, 8)),
        failures=(FailureCount("wrong", 8, 0.8, 3), FailureCount("timeout", 2, 0.2, 1)), failure_by_slice=(),
        cost=(), error_hotspots=(), error_rate=0.1,
    )
    fields.update(overrides)
    return RunProfile(**fields)  # type: ignore[arg-type]


def task(i: int, passes_a: int, passes_b: int, n_paired: int, attempts: int = 4, category: str = "x") -> TaskShift:
    p_a, p_b = passes_a / attempts, passes_b / attempts

    def bucket(p: int) -> str:
        return "always" if p == attempts else "never" if p == 0 else "sometimes"

    return TaskShift(task_id=f"t{i}", task_idx_a=i, task_idx_b=i, slices={"category": category}, passes_a=passes_a,
                     attempts_a=attempts, passes_b=passes_b, attempts_b=attempts, p_a=p_a, p_b=p_b,
                     contribution=(p_b - p_a) / n_paired, bucket_a=bucket(passes_a), bucket_b=bucket(passes_b),
                     errors_a=0, errors_b=0)


def shift(outcomes: list[tuple[int, int]], attempts: int = 4) -> ScoreShift:
    """A shift over tasks t0, t1, … with (passes in A, passes in B) each, the diagnosis' conventions kept."""
    n = len(outcomes)
    tasks = sorted((task(i, a, b, n, attempts, "x" if i % 2 else "y") for i, (a, b) in enumerate(outcomes)),
                   key=lambda t: (t.contribution, t.task_idx_b))
    transitions: dict[tuple[str, str], int] = {}
    for t in tasks:
        transitions[(t.bucket_a, t.bucket_b)] = transitions.get((t.bucket_a, t.bucket_b), 0) + 1
    slices = []
    for value in ("x", "y"):
        mine = [t for t in tasks if t.slices["category"] == value]
        slices.append(SliceShift("category", value, len(mine), math.fsum(t.contribution for t in mine),
                                 sum(t.p_a for t in mine) / len(mine), sum(t.p_b for t in mine) / len(mine),
                                 sum(t.p_b < t.p_a for t in mine), sum(t.p_b > t.p_a for t in mine)))
    slices.sort(key=lambda s: s.contribution)
    pass_a = sum(t.p_a for t in tasks) / n
    pass_b = sum(t.p_b for t in tasks) / n
    return ScoreShift(profile_a=profile("a"), profile_b=profile("b"), n_paired=n, only_a=(), only_b=(),
                      pass_at_1_a=pass_a, pass_at_1_b=pass_b, delta=pass_b - pass_a, tasks=tuple(tasks),
                      slices=tuple(slices), transitions=transitions, attempt_flips=AttemptFlips(0, 0, 0, 0, 0),
                      drivers_down=(), drivers_up=(), attribution=attribute_tasks(tasks))


OUTCOMES = [(4, 0), (4, 1), (2, 2), (0, 4), (1, 3), (3, 2), (0, 0), (4, 4), (2, 1), (1, 1)]


class TestWaterfall:
    """The waterfall of transition groups: one bar per group that moved the score, drops first, the total last."""

    def test_bars_add_up_to_the_delta(self):
        s = shift(OUTCOMES)
        frame = charts.waterfall_frame(s)
        steps = frame.filter(frame["kind"] != "total")
        assert math.isclose(steps["contribution"].sum(), s.delta, abs_tol=1e-12)
        assert math.isclose(steps["end"][-1], s.delta, abs_tol=1e-12)
        assert steps["start"].to_list()[1:] == steps["end"].to_list()[:-1], "each bar starts where the last ended"
        total = frame.row(-1, named=True)
        assert (total["label"], total["start"], total["end"]) == ("Δ pass@1", 0.0, s.delta)

    def test_one_bar_per_group_labelled_with_its_count_coloured_by_its_sign(self):
        frame = charts.waterfall_frame(shift(OUTCOMES))
        assert frame["label"].to_list() == ["always→never (1)", "always→sometimes (1)", "sometimes→sometimes ▼ (2)",
                                            "never→always (1)", "sometimes→sometimes ▲ (1)", "Δ pass@1"]
        assert frame["kind"].to_list() == ["regressed"] * 3 + ["improved"] * 2 + ["total"]
        assert frame["share"].to_list()[:3] == ["-10.00 pp", "-7.50 pp", "-5.00 pp"]

    def test_a_bars_tooltip_names_its_categories_and_first_tasks(self):
        frame = charts.waterfall_frame(shift(OUTCOMES), top=1)
        assert frame.filter(frame["group"] == "sometimes→sometimes ▼")["detail"].item() == "x 1, y 1; first: #5"

    def test_unchanged_groups_draw_nothing(self):
        frame = charts.waterfall_frame(shift([(4, 4), (0, 0), (2, 2)]))
        assert frame["kind"].to_list() == ["total"]

    def test_bars_are_selectable_by_group(self):
        spec = charts.waterfall_chart(shift(OUTCOMES)).to_dict()
        params = spec.get("params", []) + [p for layer in spec["layer"] for p in layer.get("params", [])]
        assert [p["name"] for p in params] == [charts.GROUP_PICK]
        assert params[0]["select"]["fields"] == ["group"]
        assert "6 tasks in 5 transition groups" in str(spec["title"])


class TestScatter:
    """Pass rates A vs B with Wilson intervals; one point per distinct outcome, binned when too many."""

    def test_one_point_per_outcome_with_its_wilson_interval(self):
        s = shift([*OUTCOMES, (4, 0), (4, 0)])
        data = charts.scatter_data(s)
        assert not data.binned
        assert data.points["n_tasks"].sum() == s.n_paired
        drop = data.points.filter(data.points["cell"] == "4/4 → 0/4").row(0, named=True)
        assert drop["n_tasks"] == 3 and drop["direction"] == "regressed"
        low, high = wilson_interval(4, 4)
        assert (drop["low_a"], drop["high_a"]) == pytest.approx((low, high))
        assert (drop["p_a"], drop["p_b"]) == (1.0, 0.0)
        assert set(data.members["4/4 → 0/4"]) == {"t0", "t10", "t11"}

    def test_points_on_the_diagonal_are_unchanged(self):
        points = charts.scatter_data(shift(OUTCOMES)).points
        on_diagonal = points.filter(points["p_a"] == points["p_b"])
        assert set(on_diagonal["direction"]) == {"unchanged"}
        assert set(points.filter(points["p_b"] > points["p_a"])["direction"]) == {"improved"}

    def test_the_diagonal_is_drawn_from_corner_to_corner(self):
        spec = charts.scatter_chart(shift(OUTCOMES)).to_dict()
        datasets = spec["datasets"]
        diagonal = next(v for v in datasets.values() if v and set(v[0]) == {"a", "b"})
        assert diagonal == [{"a": 0.0, "b": 0.0}, {"a": 1.0, "b": 1.0}]

    def test_many_distinct_outcomes_are_binned_and_every_task_kept(self):
        outcomes = [(a, b) for a in range(21) for b in range(0, 21, 2)]
        s = shift(outcomes, attempts=20)
        data = charts.scatter_data(s, max_points=50)
        assert data.binned
        assert data.points.height <= (1 / charts.SCATTER_BIN + 1) ** 2
        assert data.points["n_tasks"].sum() == s.n_paired
        assert sum(len(m) for m in data.members.values()) == s.n_paired

    def test_members_are_listed_largest_drop_first(self):
        s = shift([(4, 0), (2, 0), (4, 0)], attempts=4)
        data = charts.scatter_data(s, max_points=1)  # binned: 1.0 → 0.0 and 0.5 → 0.0 stay apart
        assert data.members["1.0 → 0.0"] == ("t0", "t2")


class TestSlicesAndTransitions:
    def test_slice_bars_keep_the_diagnosis_order_and_say_what_was_left_out(self):
        s = shift(OUTCOMES)
        frame, left_out = charts.slice_shift_frame(s)
        assert frame["label"].to_list() == [f"category = {x.value}" for x in s.slices]
        assert left_out == 0
        frame, left_out = charts.slice_shift_frame(s, max_bars=1)
        assert frame.height == 1 and left_out == 1
        assert "1 more values not drawn" in charts.slice_shift_chart(s, max_bars=1).to_dict()["title"]

    def test_heatmap_has_every_cell_zeros_included(self):
        s = shift(OUTCOMES)
        frame = charts.transition_frame(s)
        assert frame.height == 9  # always / sometimes / never on each side; no missing bucket among paired tasks
        cells = {(r["bucket_a"], r["bucket_b"]): r["n_tasks"] for r in frame.iter_rows(named=True)}
        assert cells[("always", "never")] == 1  # t0
        assert cells[("never", "always")] == 1  # t3
        assert cells[("never", "sometimes")] == 0
        assert sum(cells.values()) == s.n_paired


class TestRunCharts:
    def test_pass_at_k_curve_and_its_band(self):
        p = profile()
        frame = charts.pass_at_k_frame(p)
        assert frame.rows() == list(p.pass_at_k_curve)
        layers = charts.pass_at_k_chart(p).to_dict()["layer"]
        assert [layer["mark"]["type"] for layer in layers] == ["area", "line"]

    def test_histogram_colours_passes_by_bucket(self):
        frame = charts.bucket_histogram_frame(profile())
        assert frame["bucket"].to_list() == ["never", "sometimes", "sometimes", "sometimes", "always"]

    def test_failures_most_frequent_first_and_slice_table(self):
        p = profile()
        assert charts.failure_frame(p)["category"].to_list() == ["wrong", "timeout"]
        assert charts.slice_frame(p)["value"].to_list() == ["x", "y"]

    def test_static_figure_draws_the_slices_when_there_are_some(self):
        spec = charts.run_overview_chart(profile()).to_dict()
        assert "pass@1 by slice" in str(spec)
        assert "pass@1 by slice" not in str(charts.run_overview_chart(profile(slices=())).to_dict())

    def test_empty_profile_still_charts(self):
        p = profile(failures=(), slices=(), pass_histogram=())
        assert "no failed attempt" in charts.failure_chart(p).to_dict()["title"]
        charts.run_overview_chart(p).to_dict()


class TestStatic:
    """Static rendering: the image a saved notebook keeps."""

    def test_png_and_svg(self):
        chart = charts.score_shift_chart(shift(OUTCOMES))
        assert static.to_png(chart).startswith(b"\x89PNG")
        assert "<svg" in static.to_svg(chart)

    def test_static_chart_bundle_is_an_image(self):
        bundle = static.StaticChart(charts.waterfall_chart(shift(OUTCOMES)))._repr_mimebundle_()
        assert base64.b64decode(bundle[static.PNG]).startswith(b"\x89PNG")
        svg = static.show_static(charts.transition_heatmap(shift(OUTCOMES)), fmt="svg")._repr_mimebundle_()
        assert svg[static.SVG].lstrip().startswith("<svg")

    def test_renderer_carries_the_spec_and_an_image(self):
        import altair as alt

        before = alt.renderers.active
        try:
            static.enable()
            bundle = alt.renderers.get()(charts.pass_at_k_chart(profile()).to_dict())  # type: ignore[misc]
            assert static.PNG in bundle and static.VEGALITE in bundle
        finally:
            alt.renderers.enable(before)

    def test_widget_bundle_adds_an_image_or_nothing(self):
        drawn = []

        def chart():
            drawn.append(1)
            return charts.pass_at_k_chart(profile())

        assert static.widget_bundle({"text/plain": "x"}, chart, None) == {"text/plain": "x"}
        assert static.PNG in static.widget_bundle({"text/plain": "x"}, chart, "png")
        cache: dict[str, dict[str, str]] = {}
        first = static.widget_bundle({}, chart, "svg", cache)
        assert static.widget_bundle({}, chart, "svg", cache) == first
        assert len(drawn) == 2, "rendered once per format with a cache"


def test_task_label_reads_counts_and_contribution():
    t = replace(task(7, 4, 1, 10), task_idx_b=9)
    assert charts.task_label(t) == "task 9: 4/4 → 1/4 (-0.0750)"
