"""``RunPicker``: choose a run of a store in a notebook (source, benchmark, model, status, pass@1 at a glance)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import ipywidgets as w

from workbench.analysis.triage import RunRow, runs_table
from workbench.store.reader import Store
from workbench.widgets._html import table
from workbench.widgets.static import html_bundle

TABLE_ROWS = 30
"""Runs the table under the dropdown lists (newest first); the dropdown holds them all."""


def _pass(row: RunRow) -> str:
    if row.pass_at_1 is None:
        return "–"
    if row.pass_at_1_low is None or row.pass_at_1_high is None:
        return f"{row.pass_at_1:.4f}"
    return f"{row.pass_at_1:.4f} [{row.pass_at_1_low:.4f}, {row.pass_at_1_high:.4f}]"


def run_label(row: RunRow) -> str:
    """How a run reads in the dropdown: its source (nel, gym, lm-eval, inspect) in brackets after its id."""
    return f"{row.run_id} [{row.source}] · {row.benchmark} · {row.model_id or '?'} · {row.status} · pass@1 {_pass(row)}"


class RunPicker(w.VBox):
    """A dropdown over the store's runs (newest first) above a table of them.

    ``value`` is the chosen run id (None for an empty store); ``on_pick(callback)`` calls back with the
    run's row whenever the choice changes. The rows come from ``workbench.analysis.triage.runs_table``
    (the ``run_metrics`` view): the same numbers ``nel eval stats`` and the TUI show.
    """

    def __init__(self, store: Store | str | Path, *, description: str = "run") -> None:
        self.store = store if isinstance(store, Store) else Store(store)
        self.rows: list[RunRow] = []
        self.dropdown = w.Dropdown(description=description, layout=w.Layout(width="95%"))
        self.table = w.HTML()
        super().__init__([self.dropdown, self.table])
        self.refresh()

    def refresh(self) -> None:
        """Read the store's runs again (a run may have been added or finished since)."""
        self.rows = runs_table(self.store)
        current = self.dropdown.value
        self.dropdown.options = [(run_label(r), r.run_id) for r in self.rows]
        ids = [r.run_id for r in self.rows]
        self.dropdown.value = current if current in ids else (ids[0] if ids else None)
        shown = self.rows[:TABLE_ROWS]
        more = len(self.rows) - len(shown)
        self.table.value = table(
            ("run", "source", "benchmark", "model", "status", "tasks × repeats", "pass@1 [95 % CI]"),
            [(r.run_id, r.source, r.benchmark, r.model_id or "", r.status, f"{r.n_tasks} × {r.n_repeats}", _pass(r))
             for r in shown],
            empty=f"no runs in {self.store.path}",
        ) + (f"<p><i>{more} older runs in the dropdown only</i></p>" if more > 0 else "")

    @property
    def value(self) -> str | None:
        """The chosen run id."""
        return self.dropdown.value  # type: ignore[no-any-return]

    @value.setter
    def value(self, run_id: str) -> None:
        self.dropdown.value = run_id

    @property
    def selected(self) -> RunRow | None:
        """The chosen run's row."""
        return next((r for r in self.rows if r.run_id == self.value), None)

    def on_pick(self, callback: Callable[[RunRow], None]) -> None:
        """Call ``callback(row)`` whenever another run is chosen."""

        def changed(change: dict[str, object]) -> None:
            row = self.selected
            if row is not None:
                callback(row)

        self.dropdown.observe(changed, names="value")

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        """The live picker, and its table as ``text/html`` for an HTML export (where no widget runs)."""
        return {**super()._repr_mimebundle_(**kwargs), **html_bundle([self.table.value])}
