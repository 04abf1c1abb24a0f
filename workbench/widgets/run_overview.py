"""``RunOverview``: one run at a glance in a notebook: pass@k with intervals, the bucket histogram, the
failure categories and the slice table, all read from the run's ``RunProfile``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import altair as alt
import ipywidgets as w

from workbench.analysis.diagnosis.types import RunDiagnosis, RunProfile
from workbench.widgets import charts
from workbench.widgets._html import esc, table
from workbench.widgets._layout import chart_row
from workbench.widgets._sources import RunSource, load
from workbench.widgets.static import StaticFormat, live_chart, widget_bundle


def _summary(p: RunProfile) -> str:
    return (f"<b><code>{esc(p.run_id)}</code></b> {esc(p.benchmark)} · {esc(p.model_id or '?')} · metric "
            f"{esc(p.metric)}: <b>pass@1 {p.pass_at_1:.4f}</b> [{p.pass_at_1_low:.4f}, {p.pass_at_1_high:.4f}], "
            f"pass@{p.k} {p.pass_at_k:.4f}, consistency {p.consistency:.4f}; {p.n_attempted} of {p.n_tasks} tasks "
            f"attempted ({p.n_attempts} attempts, coverage {p.coverage:.1%}), error rate {p.error_rate:.2%}")


def slice_table_html(profile: RunProfile) -> str:
    rows = [(s.column, s.value, s.n_tasks, f"{s.pass_at_1:.4f}", f"{s.always_fail_rate:.1%}", s.n_attempts)
            for s in profile.slices]
    return "<h5>Slices</h5>" + table(("column", "value", "tasks", "pass@1", "never pass", "attempts"), rows,
                                     empty="no slice columns (tasks carry no category-like metadata)")


class RunOverview(w.VBox):
    """One run: pass@k curve, bucket histogram, failure categories, slice table.

    ``run`` is a run id (in ``store``), an exported results directory, ``RunData``, or an already computed
    ``RunProfile`` / ``RunDiagnosis``. Displayed, it also carries a static image of its charts.
    """

    def __init__(
        self,
        run: RunSource | RunProfile | RunDiagnosis,
        *,
        store: str | Path | None = None,
        metric: str | None = None,
        slices: Sequence[str] | None = None,
        static: StaticFormat | None = "png",
    ) -> None:
        if isinstance(run, RunDiagnosis):
            profile = run.profile
        elif isinstance(run, RunProfile):
            profile = run
        else:
            from workbench.analysis.diagnosis.profile import run_profile

            profile = run_profile(load(run, Path(store) if store is not None else None, metric), slices=slices)
        self.profile = profile
        self.static_format: StaticFormat | None = static
        self._images: dict[str, dict[str, str]] = {}  # format → image entry: the charts never change
        self.slice_table = w.HTML(slice_table_html(profile))
        # No failed attempt, no failure chart: a sentence instead of bare axes.
        failures = live_chart(charts.failure_chart(profile)) if profile.failures else w.HTML(charts.NO_FAILURES)
        super().__init__([
            w.HTML(_summary(profile)),
            chart_row([live_chart(charts.pass_at_k_chart(profile)), live_chart(charts.bucket_histogram(profile))]),
            chart_row([failures, self.slice_table]),
        ])

    def static_chart(self) -> alt.VConcatChart:
        return charts.run_overview_chart(self.profile)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        return widget_bundle(super()._repr_mimebundle_(**kwargs), self.static_chart, self.static_format,
                             self._images, before=[_summary(self.profile)],
                             after=[*([] if self.profile.failures else [charts.NO_FAILURES]),
                                    slice_table_html(self.profile)])
