"""``ScoreShift``: why pass@1 moved between two runs, as a notebook widget.

Four charts (the waterfall of transition groups, the A-vs-B scatter, the per-slice bars, the bucket
transitions) over a ``Diagnosis`` computed by ``workbench.analysis.diagnosis.diagnose``; clicking a waterfall
bar (a group of tasks) or a scatter point lists its tasks and opens the first: its attempts in both runs and
a passing response against a failing one.
The widget lays out; every number comes from the diagnosis.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import altair as alt
import ipywidgets as w

from workbench.analysis.diagnosis.evidence import EvidenceSource, build_dives
from workbench.analysis.diagnosis.types import Diagnosis, TaskEvidence, TaskShift
from workbench.analysis.diagnosis.types import ScoreShift as ShiftResult
from workbench.analysis.sources import RunData
from workbench.widgets import charts
from workbench.widgets._html import esc, task_panel
from workbench.widgets._layout import chart_row
from workbench.widgets._sources import RunSource, evidence_of, load
from workbench.widgets.static import StaticFormat, live_chart, widget_bundle

PICKER_MAX = 200
"""Tasks the drill-down's dropdown lists at once (a point of the scatter may stand for thousands)."""


CLICK_HINT = " <i>Click a waterfall bar or a scatter point to open its tasks.</i>"


def _summary(diagnosis: Diagnosis) -> str:
    """The headline: Δ, both sides, the attempt flips; first, a warning per run still being written."""
    shift = diagnosis.shift
    assert shift is not None
    warnings = "".join(f'<div style="color:#b42318"><b>⚠ {esc(w)}</b></div>' for w in diagnosis.warnings)
    a, b = shift.profile_a, shift.profile_b
    flips = shift.attempt_flips
    one_sided = (f"; {len(shift.only_a)} tasks only in A, {len(shift.only_b)} only in B (not paired)"
                 if shift.only_a or shift.only_b else "")
    return warnings + (f"<b>Δ pass@1 = {shift.delta:+.4f}</b> over {shift.n_paired} paired tasks: "
            f"A <code>{esc(a.run_id)}</code> {shift.pass_at_1_a:.4f} → B <code>{esc(b.run_id)}</code> "
            f"{shift.pass_at_1_b:.4f}{one_sided}. Attempt flips: {flips.pass_to_fail} pass→fail, "
            f"{flips.fail_to_pass} fail→pass of {flips.n_pairs} paired attempts.")


class ScoreShift(w.VBox):
    """Two runs compared: waterfall, scatter, slices and transitions, with a drill-down panel.

    ``run_a`` / ``run_b`` are run ids (looked up in ``store``), exported results directories, or ``RunData``;
    ``ScoreShift.from_diagnosis`` takes a diagnosis already computed. Displayed, the widget also carries a
    static image of its charts (``static``: "png", "svg" or None), so a saved notebook shows them anywhere.
    """

    def __init__(
        self,
        run_a: RunSource,
        run_b: RunSource,
        *,
        store: str | Path | None = None,
        metric: str | None = None,
        slices: Sequence[str] | None = None,
        top: int = charts.WATERFALL_TOP,
        static: StaticFormat | None = "png",
    ) -> None:
        from workbench.analysis.diagnosis.api import diagnose

        store_path = Path(store) if store is not None else None
        data_a, data_b = load(run_a, store_path, metric), load(run_b, store_path, metric)
        ev_a, ev_b = evidence_of(run_a, data_a, store_path), evidence_of(run_b, data_b, store_path)
        diagnosis = diagnose(data_a, data_b, evidence_baseline=ev_a, evidence_candidate=ev_b, slices=slices)
        self._setup(diagnosis, (data_a, data_b), (ev_a, ev_b), top, static)

    @classmethod
    def from_diagnosis(
        cls,
        diagnosis: Diagnosis,
        *,
        runs: tuple[RunData, RunData] | None = None,
        evidence: tuple[EvidenceSource | None, EvidenceSource | None] = (None, None),
        top: int = charts.WATERFALL_TOP,
        static: StaticFormat | None = "png",
    ) -> ScoreShift:
        """The widget over a diagnosis of two runs. Without ``runs`` and ``evidence`` only the drivers'
        attempts (already in the diagnosis) can be opened; other tasks show their counts."""
        widget = cls.__new__(cls)
        widget._setup(diagnosis, runs, evidence, top, static)
        return widget

    def _setup(
        self,
        diagnosis: Diagnosis,
        runs: tuple[RunData, RunData] | None,
        evidence: tuple[EvidenceSource | None, EvidenceSource | None],
        top: int,
        static: StaticFormat | None,
    ) -> None:
        if diagnosis.shift is None:
            raise ValueError("this diagnosis has one run; ScoreShift needs two (RunOverview shows one)")
        self.diagnosis = diagnosis
        self.shift: ShiftResult = diagnosis.shift
        self.static_format: StaticFormat | None = static
        self._images: dict[str, dict[str, str]] = {}  # format → image entry: the charts never change
        self.top = top
        self._runs = runs
        self._evidence_sources = evidence
        self._tasks = {t.task_id: t for t in self.shift.tasks}
        self._evidence: dict[str, TaskEvidence] = {e.task.task_id: e for e in
                                                   (*self.shift.drivers_down, *self.shift.drivers_up)}
        self.scatter = charts.scatter_data(self.shift)
        self.waterfall_view = live_chart(charts.waterfall_chart(self.shift, top))
        self.scatter_view = live_chart(charts.scatter_chart(self.shift, self.scatter))
        # No slice column, no chart: an empty frame would draw as bare axes.
        self.slice_view: alt.JupyterChart | w.HTML = (
            live_chart(charts.slice_shift_chart(self.shift)) if self.shift.slices else w.HTML(charts.NO_SLICES))
        self.transition_view = live_chart(charts.transition_heatmap(self.shift))
        self.task_picker = w.Dropdown(description="task", layout=w.Layout(width="60%"))
        self.picker_note = w.HTML()
        self.panel = w.HTML("<i>Click a waterfall bar or a scatter point.</i>")
        self.summary = w.HTML(_summary(diagnosis) + CLICK_HINT)
        super().__init__([
            self.summary,
            chart_row([self.waterfall_view, self.scatter_view]),
            chart_row([self.slice_view, self.transition_view]),
            w.HBox([self.task_picker, self.picker_note]),
            self.panel,
        ])
        self._offer(self._default_tasks(), "the largest movers")
        self.waterfall_view.selections.observe(self._on_group_pick, names=[charts.GROUP_PICK])
        self.scatter_view.selections.observe(self._on_cell_pick, names=[charts.CELL_PICK])
        self.task_picker.observe(self._on_picker, names="value")

    # ---- selection ------------------------------------------------------------------------------------
    def _default_tasks(self) -> list[str]:
        """The first ``top`` tasks of each group that moved the score, in the waterfall's order, then the drivers."""
        ranked = [t.task_id for g in self.shift.attribution.groups if g.contribution != 0 for t in g.tasks[:self.top]]
        drivers = [e.task.task_id for e in (*self.shift.drivers_down, *self.shift.drivers_up)]
        return list(dict.fromkeys([*ranked, *drivers]))

    def _offer(self, task_ids: Sequence[str], what: str) -> None:
        """Fill the task dropdown with ``task_ids`` (at most ``PICKER_MAX``), without opening any."""
        listed = [t for t in task_ids if t in self._tasks][:PICKER_MAX]
        more = len(task_ids) - len(listed)
        with self.task_picker.hold_trait_notifications():
            self.task_picker.options = [(charts.task_label(self._tasks[t]), t) for t in listed]
            self.task_picker.value = None
        self.picker_note.value = f"{len(task_ids)} tasks: {esc(what)}" + (f" ({more} more not listed)" if more else "")

    def select_task(self, task_id: str) -> None:
        """Open ``task_id`` in the drill-down panel: its attempts in both runs and a pass against a fail."""
        task = self._tasks.get(task_id)
        if task is None:
            raise KeyError(f"{task_id}: not a paired task of this comparison")
        if task_id not in dict(self.task_picker.options).values():
            self._offer([task_id, *[v for _, v in self.task_picker.options]], "picked")
        if self.task_picker.value != task_id:
            self.task_picker.value = task_id  # calls back into here through _on_picker
            return
        self.panel.value = task_panel(task, self.task_evidence(task))

    def select_group(self, transition: str) -> None:
        """List the tasks of one transition group (largest change first, then the smallest Fisher p-value,
        then task id) and open the first."""
        group = next((g for g in self.shift.attribution.groups if g.transition == transition), None)
        if group is None:
            raise KeyError(f"{transition}: not a transition group of this comparison")
        ids = [t.task_id for t in group.tasks]
        self._offer(ids, f"{transition}: {group.n_tasks} tasks" + (f", the first {len(ids)} by rank"
                                                                     if len(ids) < group.n_tasks else ""))
        if ids:
            self.select_task(ids[0])

    def select_cell(self, cell: str) -> None:
        """List the tasks of one scatter point (largest drop first) and open the first."""
        members = self.scatter.members.get(cell, ())
        self._offer(members, f"outcome {cell}")
        if members:
            self.select_task(members[0])

    def task_evidence(self, task: TaskShift) -> TaskEvidence | None:
        """The attempts behind ``task``: the diagnosis' own for its drivers, else read on demand (and kept)."""
        if task.task_id in self._evidence:
            return self._evidence[task.task_id]
        ev_a, ev_b = self._evidence_sources
        if self._runs is None or (ev_a is None and ev_b is None):
            return None
        from workbench.analysis.diagnosis.shift import task_evidence as evidence_of

        run_a, run_b = self._runs
        dive_a = build_dives(run_a, ev_a, [task.task_idx_a]).get(task.task_idx_a)
        dive_b = build_dives(run_b, ev_b, [task.task_idx_b]).get(task.task_idx_b)
        if dive_a is None or dive_b is None:
            return None
        found = self._evidence[task.task_id] = evidence_of(task, dive_a, dive_b)
        return found

    def _on_group_pick(self, change: dict[str, Any]) -> None:
        picked = [p.get("group") for p in change["new"].value]
        if picked and picked[0]:
            self.select_group(str(picked[0]))

    def _on_cell_pick(self, change: dict[str, Any]) -> None:
        picked = [p.get("cell") for p in change["new"].value]
        if picked and picked[0]:
            self.select_cell(str(picked[0]))

    def _on_picker(self, change: dict[str, Any]) -> None:
        if change["new"] is not None:
            self.select_task(str(change["new"]))

    # ---- static rendering -----------------------------------------------------------------------------
    def static_chart(self) -> alt.VConcatChart:
        """The four charts as one figure: what the saved notebook shows without a kernel."""
        return charts.score_shift_chart(self.shift, self.top, self.scatter)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        return widget_bundle(super()._repr_mimebundle_(**kwargs), self.static_chart, self.static_format,
                             self._images, before=[_summary(self.diagnosis)],
                             after=[] if self.shift.slices else [charts.NO_SLICES])
