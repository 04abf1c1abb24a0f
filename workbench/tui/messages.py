"""The messages workers post back to their screen: small, typed, one per kind of result.

Each carries the ``token`` of the request that produced it, so a screen can drop a reply that a newer
request (a changed filter, a further keypress) has made stale.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.message import Message

from workbench.analysis.triage import (
    Attempt,
    LiveSnapshot,
    RunHeader,
    RunOverview,
    RunRow,
    SqlResult,
    TaskDetail,
    TaskPage,
    WordDiff,
)

if TYPE_CHECKING:  # the comparison needs polars: not imported until two runs are compared
    from workbench.analysis.diagnosis.types import Diagnosis
    from workbench.analysis.triage.compare import RunFinding, TriageComparison
    from workbench.workers import LaunchState


class Reply(Message, bubble=False):
    """A worker's answer to the screen that started it."""

    def __init__(self, token: int) -> None:
        super().__init__()
        self.token = token


class Said(Reply):
    """A worker's one line to show (what an action did, or why it could not)."""

    def __init__(self, token: int, text: str) -> None:
        super().__init__(token)
        self.text = text


class Failed(Reply):
    """A worker failed; ``text`` says why in one line, ready to show."""

    def __init__(self, token: int, group: str, text: str) -> None:
        super().__init__(token)
        self.group = group
        self.text = text


class RunsLoaded(Reply):
    def __init__(self, token: int, runs: list[RunRow]) -> None:
        super().__init__(token)
        self.runs = runs


class TasksLoaded(Reply):
    """A page of the task list; the first page comes with the run's header (None: the run is gone)."""

    def __init__(self, token: int, page: TaskPage, run: RunHeader | None) -> None:
        super().__init__(token)
        self.page = page
        self.run = run


class OverviewLoaded(Reply):
    """A run's metrics and the buckets, categories and failure categories of its tasks."""

    def __init__(self, token: int, overview: RunOverview) -> None:
        super().__init__(token)
        self.overview = overview


class TaskLoaded(Reply):
    """A task's detail; None when the run or the task is gone from the store."""

    def __init__(self, token: int, detail: TaskDetail | None) -> None:
        super().__init__(token)
        self.detail = detail


class DiffReady(Reply):
    def __init__(self, token: int, left: Attempt, right: Attempt, diff: WordDiff, scoring: list[str]) -> None:
        super().__init__(token)
        self.left = left
        self.right = right
        self.diff = diff
        self.scoring = scoring


class CounterpartFound(Reply):
    """The same task's attempt in another run (None: that run never attempted it)."""

    def __init__(self, token: int, attempt: Attempt, other: Attempt | None, other_run: str) -> None:
        super().__init__(token)
        self.attempt = attempt
        self.other = other
        self.other_run = other_run


class SqlFinished(Reply):
    def __init__(self, token: int, query: str, result: SqlResult, elapsed_s: float) -> None:
        super().__init__(token)
        self.query = query
        self.result = result
        self.elapsed_s = elapsed_s


class LiveUpdated(Reply):
    """A fresh look at a run; ``snapshot`` is None when the run is gone. ``at`` is the poll's clock.
    ``launch`` is its background launch, when it was started as one (its workers can be stopped, resumed), as read
    at ``launch_read_at`` (``time.monotonic()``): a stop that answered meanwhile knows better."""

    def __init__(self, token: int, snapshot: LiveSnapshot | None, at: float,
                 launch: LaunchState | None = None, launch_read_at: float = 0.0) -> None:
        super().__init__(token)
        self.snapshot = snapshot
        self.at = at
        self.launch = launch
        self.launch_read_at = launch_read_at


class LaunchStarted(Reply):
    """A run started in the background; ``run_id`` is None when no run appeared (``state`` says why)."""

    def __init__(self, token: int, state: LaunchState, run_id: str | None) -> None:
        super().__init__(token)
        self.state = state
        self.run_id = run_id


class LaunchChanged(Reply):
    """A stop or resume was asked for; ``state`` is the launch after it, as of ``read_at`` (``time.monotonic()``)."""

    def __init__(self, token: int, state: LaunchState, action: str, read_at: float = 0.0) -> None:
        super().__init__(token)
        self.state = state
        self.action = action
        self.read_at = read_at


class ComparisonLoaded(Reply):
    """Two runs compared: the paired statistics, the flips, and the transition groups that add up to Δ; with
    the questions of the flips the screen shows first (task id → question)."""

    def __init__(self, token: int, result: TriageComparison, questions: dict[str, str | None] | None = None) -> None:
        super().__init__(token)
        self.result = result
        self.questions = questions or {}


class DiagnosisLoaded(Reply):
    """Two runs diagnosed: the diagnosis, and its findings with the run each one's task indices belong to."""

    def __init__(self, token: int, diagnosis: Diagnosis, findings: list[RunFinding]) -> None:
        super().__init__(token)
        self.diagnosis = diagnosis
        self.findings = findings
