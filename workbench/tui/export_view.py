"""The export dialog: pick a format and a path, write the rows (``workbench.export.table_file``).

The path starts as ``<store folder>/exports/<name>.<suffix>`` and follows the format; Enter writes. A path that
cannot be written is said on the dialog's last line (naming it), and the dialog stays open to fix it; done, it
closes with the one line the screen shows.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, cast

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, RadioButton, RadioSet, Static

from workbench.errors import NelError
from workbench.export.table_file import SUFFIXES, Format, Table, write_table

if TYPE_CHECKING:
    from workbench.analysis.compare import Flips
    from workbench.tui.screens.base import NelScreen

LABELS: dict[Format, str] = {"markdown": "Markdown", "json": "JSON", "csv": "CSV", "parquet": "Parquet"}


def default_path(folder: Path, table: Table, fmt: Format) -> Path:
    """Where an export goes unless the user says otherwise: beside the store, in ``exports/``."""
    return folder / "exports" / f"{table.name}{SUFFIXES[fmt]}"


class ExportDialog(ModalScreen[str | None]):
    """Export ``table``: dismissed with "wrote … to PATH", or None when cancelled (Escape)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    ExportDialog { align: center middle; }
    ExportDialog > Vertical { width: 80; max-width: 100%; height: auto; border: thick $primary; padding: 0 1;
                              background: $surface; }
    ExportDialog RadioSet { layout: horizontal; width: 100%; }
    ExportDialog #export-error { color: $text-error; height: auto; }
    """

    def __init__(self, table: Table, folder: Path, fmt: Format = "markdown") -> None:
        super().__init__()
        self.table = table
        self.folder = folder
        self.format: Format = fmt

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f"Export {self.table.what}", markup=False)
            with RadioSet(id="export-format"):
                for fmt, label in LABELS.items():
                    yield RadioButton(label, value=fmt == self.format, id=f"format-{fmt}")
            yield Input(str(default_path(self.folder, self.table, self.format)), id="export-path")
            yield Static("Enter writes · Escape cancels · shift+tab to the formats (←/→, Enter)", classes="status",
                         markup=False)
            yield Static("", id="export-error", markup=False)

    def on_mount(self) -> None:
        self.query_one("#export-path", Input).focus()

    @on(RadioSet.Changed, "#export-format")
    def _format(self, event: RadioSet.Changed) -> None:
        fmt = cast(Format, str(event.pressed.id).removeprefix("format-"))
        path_input = self.query_one("#export-path", Input)
        path = Path(path_input.value)
        if path.suffix in SUFFIXES.values():  # the user's own suffix stays theirs
            path_input.value = str(path.with_suffix(SUFFIXES[fmt]))
        self.format = fmt

    @on(Input.Submitted, "#export-path")
    def _write(self) -> None:
        self.write()

    def write(self) -> bool:
        """Write the file; True when it was written (the dialog closes), else the error shows."""
        raw = self.query_one("#export-path", Input).value.strip()
        if not raw:
            self.query_one("#export-error", Static).update("export: give a path to write to.")
            return False
        try:
            path = write_table(self.table, Path(raw), self.format)
        except NelError as exc:
            self.query_one("#export-error", Static).update(str(exc))
            return False
        except Exception as exc:  # polars refusing a value: still one line, naming the file
            self.query_one("#export-error", Static).update(f"cannot write {raw}: {type(exc).__name__}: {exc}")
            return False
        self.dismiss(f"Wrote {self.table.what} as {LABELS[self.format]} to {path}")
        return True

    def action_cancel(self) -> None:
        self.dismiss(None)


def export_later(screen: NelScreen, build: Callable[[], Table]) -> None:
    """Build the table in a thread (it may read the store), then open the dialog; a failure is the screen's one
    error line. ``screen.say`` shows the line the dialog closes with."""
    from workbench.tui.screens.base import describe

    app = screen.app

    def job() -> None:
        try:
            table = build()
        except Exception as exc:
            app.call_from_thread(screen.say, describe(exc), error=True)
            return
        dialog = ExportDialog(table, screen.nel.store_path.parent)
        app.call_from_thread(app.push_screen, dialog, lambda line: screen.say(line) if line else None)

    screen.run_worker(job, thread=True, group="export", exit_on_error=False, name="export")


def flips_table(flips: Flips, questions: dict[str, str | None], baseline: str, candidate: str) -> Table:
    """A comparison's flip list (regressions, then improvements) with each task's question."""
    rows = [[kind, x.task_idx, x.task_id, questions.get(x.task_id), x.category, x.baseline_score,
             x.candidate_score, x.delta, x.baseline_passes, x.baseline_attempts, x.baseline_errors,
             x.candidate_passes, x.candidate_attempts, x.candidate_errors]
            for kind, items in (("regression", flips.regressions), ("improvement", flips.improvements))
            for x in items]
    columns = ["flip", "task_idx", "task_id", "question", "category", "baseline_score", "candidate_score", "delta",
               "baseline_passes", "baseline_attempts", "baseline_errors", "candidate_passes", "candidate_attempts",
               "candidate_errors"]
    return Table(name=f"flips-{baseline}-vs-{candidate}", what=f"{len(rows)} flips of {baseline} → {candidate}",
                 columns=columns, rows=rows)
