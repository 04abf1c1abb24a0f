"""Screen 2: start a run in the background, through the same engine the CLI uses, and watch it live.

The form becomes a ``workbench.workers.RunRequest``; ``launch`` starts a detached supervisor that
runs ``nel eval run`` per shard, so the run outlives this app (quit, and watch it again later from
any terminal). A mistake in the form is named on the message line before anything starts.
"""

from __future__ import annotations

import time
from argparse import ArgumentTypeError
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from textual import on
from textual.binding import Binding, BindingType
from textual.containers import Grid, Horizontal
from textual.widget import Widget
from textual.widgets import Button, Input, Label, Select

from workbench.environments import benchmark_names
from workbench.errors import UsageError
from workbench.spec.flags import FlagField, form_fields
from workbench.store.layout import resolve_store_path
from workbench.tui.messages import LaunchStarted
from workbench.tui.screens.base import NelScreen
from workbench.tui.screens.confirm import ConfirmScreen
from workbench.workers import MOCK, RunRequest, launch
from workbench.workers.local import check_benchmark, observed, read_state

CONFIRM_STEPS = 1_000
"""A run of more steps than this (problems × repeats, summed over a config file's benchmarks) is started only once
the user confirms it."""

RUN_ID_WAIT_S = 60.0
"""How long to wait for a config file's first run to appear before opening its live view."""

_NAMED = ("bench", "model_id", "repeats", "max_problems", "max_concurrent", "sandbox", "run_id")
"""The spec fields a ``RunRequest`` has a field of its own for; any other field of the form goes in its values."""


def _spec_widget(field: FlagField) -> Iterable[Widget]:
    """A field of the run specification on the form (``Flag.form``): its label and its input."""
    yield Label(field.flag.label or field.dest)
    if field.dest == "bench":
        yield Select([(name, name) for name in benchmark_names()], id="bench", prompt="choose a benchmark",
                     compact=True)
    elif field.dest == "sandbox":
        yield Select([("docker (a container per attempt)", "docker"), ("local (a subprocess: weaker isolation)",
                                                                       "local")],
                     id="sandbox", prompt="none (code and agent benchmarks need one)", compact=True)
    elif field.dest == "model_url":
        yield Input(placeholder=f"{field.flag.placeholder}, or {MOCK} (the built-in mock)", id="model_url",
                    compact=True)
    elif field.choices is not None:
        yield Select([(c, c) for c in field.choices], id=field.dest, prompt="default", compact=True)
    else:
        yield Input(placeholder=field.flag.placeholder, id=field.dest, type=field.kind, compact=True)


_OWN_FIELDS: dict[int, Callable[[], Iterable[Widget]]] = {
    4: lambda: (Label("or a config file"),
                Input(placeholder="suite.yaml (instead of the three above)", id="config", compact=True)),
    8: lambda: (Label("shards"), Input("1", placeholder="worker processes", id="shards", type="integer",
                                       compact=True)),
    10: lambda: (Label("mock latency ms"), Input(placeholder="0 (with the mock model only)", id="mock_latency_ms",
                                                 type="number", compact=True)),
}
"""What the form asks beyond the run specification (where it goes, how many workers), by position."""


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
        with Grid(id="form"):
            fields = {f.flag.form: f for f in form_fields()}
            for position in range(1, max([*fields, *_OWN_FIELDS]) + 1):
                if position in fields:
                    yield from _spec_widget(fields[position])
                elif position in _OWN_FIELDS:
                    yield from _OWN_FIELDS[position]()
        with Horizontal(id="buttons"):
            yield Button("Start (ctrl+s)", id="start", variant="primary", compact=True)
            yield Button("Use mock (ctrl+o)", id="mock", compact=True)

    # ---- the form ---------------------------------------------------------------------------------------
    def _text(self, field: str) -> str:
        return self.query_one(f"#{field}", Input).value.strip()

    def _value(self, field: FlagField) -> Any:
        """What a spec field of the form holds (None: left empty); ``UsageError`` names a bad one."""
        widget = self.query_one(f"#{field.dest}")
        if isinstance(widget, Select):
            return None if widget.is_blank() else str(widget.value)
        text = self._text(field.dest)
        if not text:
            return None
        try:
            return field.convert(text)
        except ArgumentTypeError as exc:
            raise UsageError(f"{field.dest}: {exc}") from None

    def request(self) -> RunRequest:
        """The form as a request; ``UsageError`` names the field that is wrong."""
        store = resolve_store_path(self.nel.store_path)
        values = {f.dest: self._value(f) for f in form_fields()}
        shards_text = self._text("shards")
        try:
            shards = int(shards_text) if shards_text else 1
        except ValueError:
            raise UsageError(f"shards: {shards_text!r} is not a whole number") from None
        latency_text = self._text("mock_latency_ms")
        try:
            latency = float(latency_text) if latency_text else 0.0
        except ValueError:
            raise UsageError(f"mock_latency_ms: {latency_text!r} is not a number") from None
        model_url = values.pop("model_url")
        if latency and model_url != MOCK:
            raise UsageError(f"mock_latency_ms: applies to the built-in mock model only (model URL {MOCK})")
        config = self._text("config")
        named = {name: values.pop(name) for name in _NAMED}
        request = RunRequest(
            store=store, output_dir=store.parent, model_url=model_url,
            config=Path(config).expanduser() if config else None, shards=shards, mock_latency_ms=latency,
            values={k: v for k, v in values.items() if v is not None}, **named,
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
        try:
            plan = planned_steps(request)
            if plan is not None and plan.steps > CONFIRM_STEPS and request.bench is not None:
                check_benchmark(request.bench, request.sandbox)  # what the launch would refuse, before asking
        except UsageError as exc:  # a config file's mistake (file:line), a problem range outside the benchmark
            self.say(str(exc), error=True)
            return
        if plan is not None and plan.steps > CONFIRM_STEPS:
            question = f"This run makes {plan.describe()}. Start it?"

            def answered(yes: bool | None) -> None:
                if yes:
                    self._launch(request)
                else:
                    self.say("Not started: lower max problems or repeats, or start it again to confirm.")

            self.app.push_screen(ConfirmScreen(question, yes="Start"), answered)
            return
        self._launch(request)

    def _launch(self, request: RunRequest) -> None:
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

    @on(Input.Changed)
    @on(Select.Changed)
    def _edited(self) -> None:
        """A field fixed clears its error at once (or shows the next one): the message never tells of the past."""
        message = self.query_one("#message")
        if not (message.display and message.has_class("error")):
            return
        try:
            self.request()
        except UsageError as exc:
            self.say(str(exc), error=True)
        else:
            self.say("")

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


@dataclass(frozen=True, slots=True)
class Plan:
    """The model calls a run will make, as far as they are known before it starts."""

    steps: int
    """Problems × repeats, summed over the benchmarks whose size is known."""
    parts: tuple[str, ...]
    """Each such benchmark: "1,319 problems × 4 repeats of gsm8k"."""
    unknown: tuple[str, ...] = ()
    """Benchmarks whose size is not known without loading their data (another dataset, a BYOB file, gym://)."""
    source: str | None = None
    """The config file's name, for a config file's run."""

    def describe(self) -> str:
        """ "5,276 model calls (1,319 problems × 4 repeats of gsm8k)", "at least …" when some size is unknown."""
        parts = "; ".join(self.parts)
        unknown = f"; and {', '.join(self.unknown)}, of a size not known before it loads" if self.unknown else ""
        where = f"{self.source}: " if self.source else ""
        return f"{'at least ' if self.unknown else ''}{self.steps:,} model calls ({where}{parts}{unknown})"


def planned_steps(request: RunRequest) -> Plan | None:
    """The model calls a form's run will make, from each benchmark's size (``nel list``'s, without loading its
    data), its problem range, max problems and repeats (else the benchmark's default), as the engine counts them;
    for a config file, summed over its benchmarks. None when no size is known: a benchmark of a hub dataset not
    yet fetched, another dataset, a BYOB file or a gym:// environment, counted only once it loads.

    Raises:
        UsageError: a config file's mistake (by file:line), a problem range outside the benchmark.
    """
    if request.config is not None:
        from workbench.spec import load_config

        spec, _ = load_config(request.config)
        known: list[tuple[int, str]] = []
        unknown: list[str] = []
        for bench in spec.benchmarks:
            size = None if bench.dataset else _benchmark_size(bench.name, bench.repeats, bench.max_problems,
                                                              bench.problem_range)
            if size is None:
                unknown.append(bench.name + (f" (dataset {bench.dataset})" if bench.dataset else ""))
            else:
                known.append(size)
        if not known:
            return None
        return Plan(sum(n for n, _ in known), tuple(part for _, part in known), tuple(unknown),
                    request.config.name)
    if request.bench is None:
        return None
    size = _benchmark_size(request.bench, request.repeats, request.max_problems, None)
    return None if size is None else Plan(size[0], (size[1],))


def _benchmark_size(name: str, repeats: int | None, max_problems: int | None,
                    problem_range: tuple[int, int] | None) -> tuple[int, str] | None:
    """``(steps, "N problems × R repeats of NAME")`` of one benchmark, or None when its size is not known."""
    from workbench.engine.plan import problem_bounds
    from workbench.environments.registry import describe_benchmark

    if "://" in name:  # a remote environment: asking its size means reaching it
        return None
    try:
        info = describe_benchmark(name)
    except (UsageError, KeyError):
        return None
    size = info.get("size")
    if not isinstance(size, int):
        return None
    start, end = problem_bounds(size, max_problems, problem_range)
    problems, n_repeats = end - start, repeats or int(info.get("default_repeats") or 1)
    return problems * n_repeats, f"{problems:,} problems × {n_repeats} repeats of {name}"


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
