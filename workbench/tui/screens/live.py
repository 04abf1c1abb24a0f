"""Screen 3: a run as it is written (by this process or any other): progress per shard, steps/s,
tokens/s, running pass@1 with its interval, failures by category and the latest failures. A run
started in the background (the new-run form) also shows its workers, and can be stopped and resumed.

A timer asks for a fresh snapshot twice a second; the read runs in a worker, and a new read starts
only when the last one has answered, so a slow store slows the updates, never the keys.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import ClassVar

from textual import on
from textual.binding import Binding, BindingType
from textual.widget import Widget
from textual.widgets import DataTable, Static

from workbench.analysis.triage import LiveSnapshot, RateMeter, average_rates, live_snapshot
from workbench.store.layout import resolve_store_path, segments_root
from workbench.tui import format as fmt
from workbench.tui.messages import LaunchChanged, LiveUpdated, Said
from workbench.tui.screens.base import NelScreen
from workbench.tui.widgets.table import Cell, NelTable
from workbench.workers import LaunchState, find_launch, resume, stop
from workbench.workers.local import stop_foreground

POLL_S = 0.5
SHARD_COLUMNS = (("shard", "shard"), ("status", "status"), ("bar", "progress"), ("done", "steps"), ("pct", "%"))
FAILURE_COLUMNS = (("when", "UTC"), ("task", "task"), ("repeat", "#"), ("question", "question"),
                   ("outcome", "outcome"), ("extracted", "extracted"), ("expected", "expected"), ("error", "error"))


class LiveScreen(NelScreen):
    """Polls the store while shown; rates use the app's clock (injectable, so tests control them)."""

    AUTO_FOCUS = "#latest"
    title_text = "live run"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("t", "tasks", "Tasks", tooltip="Open the task list of this run"),
        Binding("x", "stop", "Stop", tooltip="Stop the run's background workers (completed steps are kept)"),
        Binding("r", "resume", "Resume",
                tooltip="Start the background workers of a stopped, failed or lost run again (no step is repeated)"),
    ]

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id
        self.meter = RateMeter(window_s=10.0)
        self.snapshot: LiveSnapshot | None = None
        self.launch: LaunchState | None = None
        self.polls = 0
        self._in_flight = False
        self._launch_error = ""
        """A refused stop or resume, kept on the message line until the next one."""
        self._note = ""
        """What the last stop or resume did (or why it could not): kept on the message line across refreshes."""
        self._launch_read_at = 0.0
        """When ``launch`` was read (``time.monotonic()``): a poll that read it before is older news."""

    def crumb(self) -> str:
        return f"nel › runs › {self.run_id} › live"

    def compose_body(self) -> Iterable[Widget]:
        yield Static("reading the run…", id="headline", classes="summary", markup=False)
        yield Static("", id="workers", classes="status", markup=False)
        yield NelTable(id="shards")
        yield Static("", id="failures", classes="summary", markup=False)
        yield Static("latest failures (Enter opens the task)", id="status", markup=False)
        yield NelTable(id="latest")

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#workers").display = False
        self.query_one("#shards", NelTable).set_columns(SHARD_COLUMNS)
        self.query_one("#latest", NelTable).set_columns(FAILURE_COLUMNS)
        self.poll()
        self.set_interval(POLL_S, self.poll)

    def poll(self) -> None:
        """Start a read unless one is still out (or another screen covers this one)."""
        if self._in_flight or (self.polls and not self.is_current):
            return
        self._in_flight = True
        run_id, clock = self.run_id, self.nel.clock

        def job(token: int) -> LiveUpdated:
            # The launch first: a run started from the form has workers before the store exists.
            path = resolve_store_path(self.nel.store_path)
            read_at = time.monotonic()
            launch = find_launch(path, run_id)
            if launch is not None and not (path.exists() or segments_root(path).is_dir()):
                return LiveUpdated(token, None, clock(), launch, read_at)
            return LiveUpdated(token, live_snapshot(self.store(), run_id), clock(), launch, read_at)

        self.start("live", job)

    def on_live_updated(self, message: LiveUpdated) -> None:
        self._in_flight = False
        if not self.current("live", message.token):
            return
        self.polls += 1
        snap = self.snapshot = message.snapshot
        # A poll reads the launch before the store, so a stop or resume can answer in between: its state is newer.
        if message.launch != self.launch and message.launch_read_at >= self._launch_read_at:
            self.launch, self._launch_read_at = message.launch, message.launch_read_at
            self._workers(message.launch)
            self.refresh_bindings()
        if snap is None:
            if self.launch is not None and self.launch.active:
                self.say(f"Starting the background workers of {self.run_id}…")
            elif self.launch is not None:
                self.say(f"The run did not start: {self.launch.message or self.launch.status}", error=True)
            else:
                self.say(f"Run {self.run_id} is not in this store (gone, or not started yet); still looking.",
                         error=True)
            return
        self.say(self._launch_error or self._note, error=bool(self._launch_error))
        self.meter.add(message.at, snap.run.n_steps, snap.run.total_tokens)
        self._headline(snap)
        self._shards(snap)
        failures = "  ".join(f"{name} {n}" for name, n in snap.failures.items()) or "none yet"
        self.query_one("#failures", Static).update(f"failures by category: {failures}")
        self._latest(snap)

    def failed(self, group: str, text: str) -> None:
        if group == "launch":  # a stop or resume refused: shown until the next one, not wiped by the next poll
            self._launch_error = text
            self.say(text, error=True)
            return
        self._in_flight = False
        self.say(f"{text} (retrying)", error=True)

    def _headline(self, snap: LiveSnapshot) -> None:
        run = snap.run
        live = run.status == "running"
        rates = self.meter.rates() if live else average_rates(run)
        speed = (f"{rates[0]:,.1f} steps/s · {rates[1]:,.0f} tokens/s" if rates else "— steps/s · — tokens/s")
        kind = "now" if live else "mean"
        pct = 100 * run.n_steps / run.n_steps_expected if run.n_steps_expected else 0.0
        self.query_one("#headline", Static).update(
            f"{run.status} · {run.n_steps:,}/{run.n_steps_expected:,} steps ({pct:.1f}%) · {speed} ({kind})\n"
            f"pass@1 {fmt.estimate(run.pass_at_1, run.pass_at_1_low, run.pass_at_1_high)} · "
            f"{run.benchmark} · {run.model_id or '—'} · elapsed {fmt.duration(run.duration_s)}")

    def _workers(self, launch: LaunchState | None) -> None:
        """One line on the background launch: its status, processes and how it ended."""
        line = self.query_one("#workers", Static)
        line.display = launch is not None
        if launch is None:
            return
        procs = " · ".join(
            f"shard {w.shard_idx} " + (f"pid {w.pid}" if w.exit_code is None else f"exit {w.exit_code}")
            for w in launch.workers)
        parts = [f"background: {launch.status}", f"supervisor pid {launch.supervisor_pid}" if launch.active else "",
                 procs, launch.message]
        line.update("   ".join(p for p in parts if p))
        line.set_class(launch.status in ("failed", "lost"), "error")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Stop and resume act on a background launch when they apply; on a run started from a terminal, stop
        signals its processes and resume says how (both keys always answer)."""
        if action == "stop":
            return True if self.launch is None or self.launch.active else None
        if action == "resume":
            return True if self.launch is None or not self.launch.active else None
        return True

    def action_stop(self) -> None:
        run_id = self.run_id
        self._note = f"stopping {run_id}…"
        self.say(self._note)
        if self.launch is None:  # started from a terminal: its shards' processes, by the pids the store holds
            self.start("launch", lambda token: Said(token, stop_foreground(self.store().path, run_id)))
            return
        self._change_launch("stop", stop)

    def action_resume(self) -> None:
        run_id = self.run_id
        if self.launch is None:
            self._note = (f"{run_id} was started from a terminal, not from here: resume it there with the same "
                          "command and --resume (its completed steps are skipped)")
            self.say(self._note)
            return
        self._note = f"resuming {run_id}…"
        self.say(self._note)
        self._change_launch("resume", resume)

    def _change_launch(self, action: str, change: Callable[..., LaunchState]) -> None:
        """Stop or resume the launch in a worker; the state it answers is stamped with when it was read."""
        run_id = self.run_id

        def job(token: int) -> LaunchChanged:
            state = change(self.store().path, run_id)
            return LaunchChanged(token, state, action, time.monotonic())

        self.start("launch", job)

    def on_said(self, message: Said) -> None:
        if self.current("launch", message.token):
            self._note = message.text
            self.say(message.text)

    def on_launch_changed(self, message: LaunchChanged) -> None:
        if not self.current("launch", message.token):
            return
        self._launch_error = ""
        self.launch, self._launch_read_at = message.state, message.read_at
        self._workers(message.state)
        self.refresh_bindings()
        state = message.state
        if message.action == "stop":
            self._note = f"{self.run_id}: {state.status}" + (f" ({state.message})" if state.message else "")
        else:
            self._note = f"{self.run_id}: resuming in the background; completed steps are kept"
        self.say(self._note)

    def _shards(self, snap: LiveSnapshot) -> None:
        table = self.query_one("#shards", NelTable)
        rows: list[tuple[Cell, ...]] = [
            (fmt.num(str(s.shard_idx)), s.status, fmt.bar(s.done, s.expected), fmt.num(f"{s.done}/{s.expected}"),
             fmt.num(f"{100 * s.done / s.expected:.0f}%" if s.expected else "—"))
            for s in snap.shards
        ]
        if table.row_count != len(rows):
            table.clear()
            for s, row in zip(snap.shards, rows, strict=True):
                table.add_row(*row, key=str(s.shard_idx))
            return
        for s, row in zip(snap.shards, rows, strict=True):
            for (key, _), value in zip(SHARD_COLUMNS, row, strict=True):
                table.update_cell(str(s.shard_idx), key, value, update_width=True)

    def _latest(self, snap: LiveSnapshot) -> None:
        table = self.query_one("#latest", NelTable)
        keys = [f"{e.task_idx}:{e.repeat}" for e in snap.latest]
        if keys == [str(k.value) for k in table.rows]:
            return
        keep = table.highlighted_key()
        table.clear()
        for key, e in zip(keys, snap.latest, strict=True):
            table.add_row(fmt.clock(e.started_at), fmt.num(str(e.task_idx)), fmt.num(str(e.repeat)),
                          fmt.clip(e.question, 28), e.outcome, fmt.clip(e.extracted_answer, 14),
                          fmt.clip(e.expected_answer, 14), fmt.clip(e.error, 40), key=key)
        table.move_to_key(keep)

    @on(DataTable.RowSelected, "#latest")
    def _open(self, event: DataTable.RowSelected) -> None:
        from workbench.tui.screens.task import TaskScreen

        task_idx = int(str(event.row_key.value).split(":")[0])
        self.app.push_screen(TaskScreen(self.run_id, task_idx))

    @on(DataTable.RowSelected, "#shards")
    def _shard_enter(self) -> None:
        self.action_tasks()

    def action_tasks(self) -> None:
        from workbench.tui.screens.tasks import TasksScreen

        self.app.push_screen(TasksScreen(self.run_id))
