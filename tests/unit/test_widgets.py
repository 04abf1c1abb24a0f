"""The notebook widgets over hand-built diagnoses: ScoreShift builds, a click on a chart (as the front end
reports it) opens the task, the panel is escaped; RunOverview builds; both carry a static image."""

from __future__ import annotations

import base64

import pytest
from test_widget_charts import OUTCOMES, profile, shift

from workbench.analysis.diagnosis.types import (
    AttemptEvidence,
    Diagnosis,
    RunDiagnosis,
    TaskDive,
    TaskEvidence,
    TaskShift,
)
from workbench.analysis.diagnosis.types import (
    ScoreShift as ShiftResult,
)
from workbench.widgets import charts
from workbench.widgets.run_overview import RunOverview
from workbench.widgets.score_shift import PICKER_MAX, ScoreShift


def attempt(run_id: str, t: TaskShift, repeat: int, passed: bool, response: str) -> AttemptEvidence:
    return AttemptEvidence(run_id=run_id, task_idx=t.task_idx_a, repeat=repeat, passed=passed,
                           extracted_answer="42" if passed else "41", expected_answer="42",
                           failure_category=None if passed else "wrong_answer", error=None, response=response)


def dive(run_id: str, t: TaskShift, passes: int, evidence: tuple[AttemptEvidence, ...]) -> TaskDive:
    return TaskDive(run_id=run_id, task_id=t.task_id, task_idx=t.task_idx_a, passes=passes, attempts=len(evidence),
                    expected_answer="42", answers=(), evidence=evidence,
                    representative_pass=next((e for e in evidence if e.passed), None),
                    representative_fail=next((e for e in evidence if not e.passed), None), diff_markdown="")


def with_driver(s: ShiftResult) -> ShiftResult:
    """``s`` with its largest drop (t0: 4/4 → 0/4) as a driver with texts, one of them holding markup."""
    t = s.tasks[0]
    ev_a = tuple(attempt("a", t, r, True, "so the answer is 42") for r in range(4))
    ev_b = tuple(attempt("b", t, r, False, "<script>alert(1)</script> so the answer is 41") for r in range(4))
    evidence = TaskEvidence(task=t, dive_a=dive("a", t, 4, ev_a), dive_b=dive("b", t, 0, ev_b),
                            representative_pass=ev_a[0], representative_fail=ev_b[0], diff_markdown="")
    return ShiftResult(**{**{f: getattr(s, f) for f in ShiftResult.__slots__},  # type: ignore[attr-defined]
                          "drivers_down": (evidence,)})


def diagnosis(s: ShiftResult) -> Diagnosis:
    return Diagnosis(baseline=RunDiagnosis(s.profile_a, (), ()), candidate=RunDiagnosis(s.profile_b, (), ()),
                     shift=s, findings=(), artifacts=(), settings={})


def click(view, name: str, field: str, value: str) -> None:
    """What the front end sends when a point of a JupyterChart is clicked."""
    view._vl_selections = {name: {"value": {"vlPoint": {"or": [{field: value}]}}, "store": []}}


@pytest.fixture
def widget() -> ScoreShift:
    return ScoreShift.from_diagnosis(diagnosis(with_driver(shift(OUTCOMES))))


class TestScoreShift:
    """ScoreShift over a diagnosis: charts, drill-down, static image."""

    def test_builds_its_four_charts_and_a_summary(self, widget):
        assert widget.waterfall_view.spec and widget.scatter_view.spec
        assert widget.slice_view.spec and widget.transition_view.spec
        assert "Δ pass@1 = " in widget.children[0].value
        # the waterfall's groups in order, drops first: always→never, always→sometimes, sometimes ▼ (t5 and t8
        # alike: task id decides), then never→always and sometimes ▲
        assert [v for _, v in widget.task_picker.options] == ["t0", "t1", "t5", "t8", "t3", "t4"]

    def test_clicking_a_waterfall_bar_lists_its_groups_tasks_by_rank(self, widget):
        click(widget.waterfall_view, charts.GROUP_PICK, "group", "sometimes→sometimes ▼")
        assert [v for _, v in widget.task_picker.options] == ["t5", "t8"]
        assert "sometimes→sometimes ▼: 2 tasks" in widget.picker_note.value
        assert widget.task_picker.value == "t5" and "Task 5" in widget.panel.value

    def test_an_unknown_group_is_an_error(self, widget):
        with pytest.raises(KeyError, match="not a transition group"):
            widget.select_group("always→errored")

    def test_clicking_a_waterfall_bar_opens_the_task_with_its_attempts_and_a_diff(self, widget):
        click(widget.waterfall_view, charts.GROUP_PICK, "group", "always→never")
        panel = widget.panel.value
        assert widget.task_picker.value == "t0"
        assert "Task 0" in panel and "Attempts in A" in panel and "Attempts in B" in panel
        assert "so the answer is 42" in panel and "so the answer is 41" in panel
        assert "nel-removed" in panel and "nel-added" in panel, "the changed words are marked"
        assert "<script>" not in panel and "&lt;script&gt;" in panel, "model output is escaped"

    def test_clicking_a_scatter_point_lists_its_tasks_and_opens_the_first(self, widget):
        click(widget.scatter_view, charts.CELL_PICK, "cell", "4/4 → 1/4")
        assert [v for _, v in widget.task_picker.options] == ["t1"]
        assert widget.task_picker.value == "t1"
        assert "Task 1" in widget.panel.value
        assert "no attempt texts" in widget.panel.value  # not a driver, and no evidence source to read from

    def test_picking_from_the_dropdown_opens_the_task(self, widget):
        widget.task_picker.value = "t3"
        assert "Task 3" in widget.panel.value

    def test_a_large_point_lists_at_most_picker_max_tasks(self):
        w = ScoreShift.from_diagnosis(diagnosis(shift([(4, 0)] * (PICKER_MAX + 5))))
        w.select_cell("4/4 → 0/4")
        assert len(w.task_picker.options) == PICKER_MAX
        assert f"{PICKER_MAX + 5} tasks" in w.picker_note.value and "5 more not listed" in w.picker_note.value

    def test_an_unknown_task_is_an_error(self, widget):
        with pytest.raises(KeyError, match="not a paired task"):
            widget.select_task("nope")

    def test_displays_with_a_static_image_beside_the_widget(self, widget):
        bundle = widget._repr_mimebundle_()
        assert "application/vnd.jupyter.widget-view+json" in bundle
        assert base64.b64decode(bundle["image/png"]).startswith(b"\x89PNG")
        no_image = ScoreShift.from_diagnosis(diagnosis(shift(OUTCOMES)), static=None)._repr_mimebundle_()
        assert "image/png" not in no_image

    def test_a_single_run_diagnosis_is_refused(self):
        one = Diagnosis(baseline=RunDiagnosis(profile(), (), ()), candidate=None, shift=None, findings=(),
                        artifacts=(), settings={})
        with pytest.raises(ValueError, match="RunOverview"):
            ScoreShift.from_diagnosis(one)


class TestRunOverview:
    def test_builds_from_a_profile_with_its_slice_table_and_an_image(self):
        w = RunOverview(profile())
        assert "pass@1 0.5000" in w.children[0].value
        assert "category" in w.slice_table.value and "<td>x</td>" in w.slice_table.value
        assert "image/png" in w._repr_mimebundle_()
