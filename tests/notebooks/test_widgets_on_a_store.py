"""The widgets over real runs in a store: the picker lists them, ScoreShift reads a task's attempts on demand
when it is opened (not only the drivers the diagnosis read), and accepts exported directories too."""

from __future__ import annotations

import pytest
from conftest import BASELINE, CANDIDATE

from workbench.analysis.sources import load_run
from workbench.widgets import RunOverview, RunPicker, ScoreShift

pytestmark = pytest.mark.timeout(120)


def test_run_picker_lists_the_runs_newest_first(store):
    picker = RunPicker(store)
    ids = [v for _, v in picker.dropdown.options]
    assert set(ids) == {BASELINE, CANDIDATE}
    assert picker.value == ids[0] and picker.selected is not None
    assert "pass@1" in picker.dropdown.options[0][0] and BASELINE in picker.table.value
    exported = picker._repr_mimebundle_()["text/html"]  # what `jupyter nbconvert --to html` shows of it
    assert BASELINE in exported and CANDIDATE in exported and "pass@1" in exported
    picked = []
    picker.on_pick(lambda row: picked.append(row.run_id))
    picker.value = ids[1]
    assert picked == [ids[1]]


def test_score_shift_opens_any_task_with_its_attempts(store):
    widget = ScoreShift(BASELINE, CANDIDATE, store=store)
    drivers = {e.task.task_id for e in (*widget.shift.drivers_down, *widget.shift.drivers_up)}
    other = next(t for t in widget.shift.tasks if t.task_id not in drivers and t.attempts_a)
    widget.select_task(other.task_id)
    panel = widget.panel.value
    assert f"Task {other.task_idx_b}" in panel
    assert "no attempt texts" not in panel
    assert f"{other.passes_a}/{other.attempts_a} passed" in panel
    assert f"{other.passes_b}/{other.attempts_b} passed" in panel


def test_score_shift_from_loaded_runs_finds_their_texts(store):
    a, b = load_run(BASELINE, store=store), load_run(CANDIDATE, store=store)
    widget = ScoreShift(a, b)
    moved = next(t for t in widget.shift.tasks if t.passes_a != t.passes_b and t.passes_a + t.passes_b > 0)
    widget.select_task(moved.task_id)
    assert "A pass against a fail" in widget.panel.value and "no attempt texts" not in widget.panel.value


def test_run_overview_of_a_stored_run(store):
    overview = RunOverview(BASELINE, store=store)
    assert overview.profile.run_id == BASELINE and overview.profile.n_tasks == 30


def test_score_shift_over_exported_directories_matches_the_store(store, tmp_path):
    from workbench.export.artifacts import export_run

    for run_id in (BASELINE, CANDIDATE):
        export_run(store, run_id, tmp_path / run_id)
    by_dir = ScoreShift(str(tmp_path / BASELINE), str(tmp_path / CANDIDATE))
    by_id = ScoreShift(BASELINE, CANDIDATE, store=store)
    assert by_dir.shift.delta == pytest.approx(by_id.shift.delta)
    assert by_dir.scatter.points.equals(by_id.scatter.points)
    task = by_dir.shift.tasks[0]
    by_dir.select_task(task.task_id)
    assert "no attempt texts" not in by_dir.panel.value


def test_score_shift_against_a_live_run_warns_that_its_numbers_will_move(store):
    """A run still being written (status ``running``): the summary says so, in the notebook and in exported HTML."""
    import dataclasses

    a, b = load_run(BASELINE, store=store), load_run(CANDIDATE, store=store)
    live = ScoreShift(a, dataclasses.replace(b, status="running"))
    warning = f"the candidate {CANDIDATE} is still running ({b.attempts.height:,} attempts so far)"
    assert warning in live.summary.value
    assert warning in live._repr_mimebundle_()["text/html"]
    assert "still running" not in ScoreShift(a, b, static=None).summary.value


def test_the_diagnosis_report_of_a_live_run_warns_that_its_numbers_will_move(store):
    """What ``nel diagnose`` (and the diagnose notebook) writes about a run still being written."""
    import dataclasses

    from workbench.analysis.diagnosis import diagnose
    from workbench.analysis.diagnosis.report import diagnosis_json, render_markdown

    a, b = load_run(BASELINE, store=store), load_run(CANDIDATE, store=store)
    d = diagnose(a, dataclasses.replace(b, status="running"))
    warning = f"the candidate {CANDIDATE} is still running ({b.attempts.height:,} attempts so far)"
    assert [w for w in d.warnings if w.startswith(warning)]
    head = render_markdown(d).split("## 1.")[0]  # above the first section: read before any number
    assert warning in head
    assert any(w.startswith(warning) for w in diagnosis_json(d)["warnings"])
    alone = diagnose(dataclasses.replace(a, status="running"))
    assert f"run {BASELINE} is still running" in render_markdown(alone)
    assert not diagnose(a, b).warnings and "still running" not in render_markdown(diagnose(a, b))
