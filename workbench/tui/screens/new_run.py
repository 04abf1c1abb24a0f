"""Screen 2: start a run in the background, through the same engine the CLI uses, and watch it live.

The form becomes a ``workbench.workers.RunRequest``; ``launch`` starts a detached supervisor that
runs ``nel eval run`` per shard, so the run outlives this app (quit, and watch it again later from
any terminal). A mistake in the form is named on the message line before anything starts.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import ClassVar

from textual import on
from textual.binding import Binding, BindingType
from textual.containers import Grid, Horizontal
from textual.widget import Widget
from textual.widgets import Button, Input, Label, Select

from workbench.environments import benchmark_names
from workbench.errors import UsageError
from workbench.store.layout import resolve_store_path
from workbench.tui.messages import LaunchStarted
from workbench.tui.screens.base import NelScreen
from workbench.workers import MOCK, RunRequest, launch
from workbench.workers.local import observed, read_state

RUN_ID_WAIT_S = 60.0
"""How long to wait for a config file's first run to appear before opening its live view."""

_INTEGER_FIELDS = ("repeats", "max_problems", "max_concurrent", "shards")


class NewRunScreen(NelScreen):
    """A form: a benchmark with a model (``mock`` starts the built-in mock model), or a config file."""

    AUTO_FOCUS = "#bench"
    title_text = "new run"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "start", "Start", priority=True, tooltip="Start the run in the background and watch it"),
        Binding("ctrl+o", "mock", "Use mock", priority=True,
                tooltip="Fill in the built-in mock model (a labelled test model, not a real LLM)"),
    ]

    DEFAULT_CSS = """
    NewRunScreen #form {
        grid-size: 2;
        grid-columns: 18 1fr;
        grid-rows: 1;
        grid-gutter: 0 1;
        height: auto;
        padding: 1 1 0 1;
    }
    NewRunScreen #form Label { color: $text-muted; }
    NewRunScreen #form Input, NewRunScreen #form Select { margin: 0; }
    NewRunScreen #buttons { height: auto; padding: 1 1 0 20; }
    NewRunScreen #buttons Button { margin-right: 2; }
    """

    def crumb(self) -> str:
        return f"nel › runs › new run   {self.nel.store_path}"

    def compose_body(self) -> Iterable[Widget]:
        benchmarks = [(name, name) for name in benchmark_names()]
        with Grid(id="form"):
            yield Label("benchmark")
            yield Select(benchmarks, id="bench", prompt="choose a benchmark", compact=True)
            yield Label("model URL")
            yield Input(placeholder=f"http://HOST:PORT/v1, or {MOCK} (the built-in mock)", id="model_url",
                        compact=True)
            yield Label("model id")
            yield Input(placeholder="the model name sent in each request", id="model_id", compact=True)
            yield Label("or a config file")
            yield Input(placeholder="suite.yaml (instead of the three above)", id="config", compact=True)
            yield Label("repeats")
            yield Input(placeholder="the benchmark's default", id="repeats", type="integer", compact=True)
            yield Label("max problems")
            yield Input(placeholder="all", id="max_problems", type="integer", compact=True)
            yield Label("concurrency")
            yield Input(placeholder="64 requests in flight", id="max_concurrent", type="integer", compact=True)
            yield Label("shards")
            yield Input("1", placeholder="worker processes", id="shards", type="integer", compact=True)
            yield Label("sandbox")
            yield Select([("docker (a container per attempt)", "docker"),
                          ("local (a subprocess: weaker isolation)", "local")],
                         id="sandbox", prompt="none (code and agent benchmarks need one)", compact=True)
            yield Label("mock latency ms")
            yield Input(placeholder="0 (with the mock model only)", id="mock_latency_ms", type="number",
                        compact=True)
        with Horizontal(id="buttons"):
            yield Button("Start (ctrl+s)", id="start", variant="primary", compact=True)
            yield Button("Use mock (ctrl+o)", id="mock", compact=True)

    # ---- the form ---------------------------------------------------------------------------------------
    def _text(self, field: str) -> str:
        return self.query_one(f"#{field}", Input).value.strip()

    def request(self) -> RunRequest:
        """The form as a request; ``UsageError`` names the field that is wrong."""
        store = resolve_store_path(self.nel.store_path)
        select = self.query_one("#bench", Select)
        numbers: dict[str, int | None] = {}
        for field in _INTEGER_FIELDS:
            text = self._text(field)
            try:
                numbers[field] = int(text) if text else None
            except ValueError:
                raise UsageError(f"{field}: {text!r} is not a whole number") from None
        latency_text = self._text("mock_latency_ms")
        try:
            latency = float(latency_text) if latency_text else 0.0
        except ValueError:
            raise UsageError(f"mock_latency_ms: {latency_text!r} is not a number") from None
        model_url = self._text("model_url") or None
        if latency and model_url != MOCK:
            raise UsageError(f"mock_latency_ms: applies to the built-in mock model only (model URL {MOCK})")
        config = self._text("config")
        request = RunRequest(
            store=store, output_dir=store.parent,
            bench=None if select.is_blank() else str(select.value),
            model_url=model_url, model_id=self._text("model_id") or None,
            config=Path(config).expanduser() if config else None,
            repeats=numbers["repeats"], max_problems=numbers["max_problems"],
            max_concurrent=numbers["max_concurrent"], shards=1 if numbers["shards"] is None else numbers["shards"],
            sandbox=None if (box := self.query_one("#sandbox", Select)).is_blank() else str(box.value),
            mock_latency_ms=latency,
        )
        request.validate()
        return request

    # ---- actions ----------------------------------------------------------------------------------------
    def action_mock(self) -> None:
        """Fill the model fields with the built-in mock model (and a benchmark, if none is chosen)."""
        self.query_one("#model_url", Input).value = MOCK
        if not self._text("model_id"):
            self.query_one("#model_id", Input).value = "nel-mock"
        bench = self.query_one("#bench", Select)
        if bench.is_blank():
            bench.value = "gsm8k"

    def action_start(self) -> None:
        try:
            request = self.request()
        except UsageError as exc:
            self.say(str(exc), error=True)
            return
        self.say("starting the run in the background…")
        self.query_one("#start", Button).disabled = True
        self.start("launch", lambda token: _launch(token, request))

    @on(Button.Pressed, "#start")
    def _start_pressed(self) -> None:
        self.action_start()

    @on(Button.Pressed, "#mock")
    def _mock_pressed(self) -> None:
        self.action_mock()

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self.action_start()

    def on_launch_started(self, message: LaunchStarted) -> None:
        if not self.current("launch", message.token):
            return
        from workbench.tui.screens.live import LiveScreen

        self.query_one("#start", Button).disabled = False
        if message.run_id is None:
            state = message.state
            self.say(f"The run did not start: {state.status}: {state.message or 'no run appeared in the store'} "
                     f"(logs in {state.directory})", error=True)
            return
        self.app.switch_screen(LiveScreen(message.run_id))

    def failed(self, group: str, text: str) -> None:
        self.query_one("#start", Button).disabled = False
        self.say(text, error=True)


def _launch(token: int, request: RunRequest) -> LaunchStarted:
    """Start the launch; for a config file, wait until its first run is in the store (or it ended)."""
    state = launch(request)
    deadline = time.monotonic() + RUN_ID_WAIT_S
    while not state.run_ids and time.monotonic() < deadline:
        time.sleep(0.2)
        state = observed(read_state(state.directory))
        if not state.active:
            break
    return LaunchStarted(token, state, state.run_ids[0] if state.run_ids else None)
