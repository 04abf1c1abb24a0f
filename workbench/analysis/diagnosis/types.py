"""What a diagnosis returns: plain, typed, frozen results that the report, ``nel diagnose``, the TUI and
the notebook widgets all read. Computation lives in ``profile.py`` (one run), ``shift.py`` (two runs),
``evidence.py`` (attempt texts from the store or an export) and ``findings.py`` (the heuristic rules).

Conventions. A task's pass rate ``p(t)`` is its passing attempts over its attempts; an attempt whose
exchange failed (transport error, timeout) counts as a failure, as everywhere in the workbench. Task ids
are content hashes (``task_id``); ``task_idx`` is the position in the run's benchmark and is shown to
people. Every list of tasks is sorted by a stated key; a list of tasks that moved breaks ties by the
confidence of the change and then the task id, never by position (``attribution.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

TASK_BUCKETS = ("always", "sometimes", "never", "errored", "missing")
"""Task outcome buckets: every attempt passed / some did / none did (attempted at least once) / every attempt
was an error (``is_error_category``: no verdict, so it says nothing about the model) / never attempted (a task
of a shard that never ran included). The ``task_stats`` view and ``nel eval stats`` use the same buckets."""

BUCKETS = ("always", "sometimes", "never", "missing")
"""``TASK_BUCKETS`` but ``errored``, which most runs never see: the rows and columns a bucket-transition table
always has (``errored`` joins them when a paired task is in it, as ``ScoreShift.transitions`` does)."""

TAXONOMY = ("knowledge_gap", "unreliable_knowledge", "behavioural_issue", "task_or_verifier_issue",
            "infrastructure", "data_artifact")
"""BLADE's intervention taxonomy, in snake case; ``TAXONOMY_LABELS`` has the words people read."""

TAXONOMY_LABELS = {
    "knowledge_gap": "knowledge gap", "unreliable_knowledge": "unreliable knowledge",
    "behavioural_issue": "behavioural issue", "task_or_verifier_issue": "task/verifier issue",
    "infrastructure": "infrastructure", "data_artifact": "data artifact",
}


@dataclass(frozen=True, slots=True)
class SliceRow:
    """One value of a metadata column within one run."""

    column: str
    value: str  # "(none)" for tasks without the column
    n_tasks: int  # attempted tasks with this value
    pass_at_1: float
    always_fail_rate: float  # share of these tasks in the ``never`` bucket
    n_attempts: int


@dataclass(frozen=True, slots=True)
class FailureCount:
    category: str  # a failure category, or "wrong" for an answered-but-wrong attempt
    n_attempts: int
    share: float  # of all failed attempts
    n_tasks: int  # tasks with at least one attempt in this category


@dataclass(frozen=True, slots=True)
class CrossTabCell:
    """Failed attempts of one category within one slice value."""

    column: str
    value: str
    category: str
    n_attempts: int


@dataclass(frozen=True, slots=True)
class CostContrast:
    """Passing vs failing attempts on one measure, overall (``slice_value`` None) or within one slice."""

    measure: str  # "total_tokens" | "latency_ms" | "response_chars"
    column: str | None
    slice_value: str | None
    n_pass: int
    n_fail: int
    pass_mean: float  # NaN when there is no such attempt or the measure is unknown
    fail_mean: float
    pass_median: float
    fail_median: float


@dataclass(frozen=True, slots=True)
class ErrorHotspot:
    """A task where errors (transport failures, timeouts) concentrate."""

    task_id: str
    task_idx: int
    n_errors: int
    n_attempts: int
    categories: tuple[str, ...]  # its error categories, most frequent first


@dataclass(frozen=True, slots=True)
class RunProfile:
    """One run, diagnosed (``profile.run_profile``)."""

    run_id: str
    benchmark: str
    model_id: str | None
    metric: str
    source: str  # "store" or the export directory it was read from
    n_repeats: int
    n_tasks: int  # tasks the run lists
    n_attempted: int  # tasks with at least one attempt
    n_missing: int  # tasks with none
    n_attempts: int
    n_completed: int  # attempts whose exchange completed (no transport error)
    n_expected_attempts: int  # n_tasks × n_repeats
    coverage: float  # n_attempts / n_expected_attempts
    pass_at_1: float  # mean of p(t) over attempted tasks
    pass_at_1_low: float  # its 95 % interval, as ``nel eval stats`` computes it (workbench.analysis.run_stats)
    pass_at_1_high: float
    pass_at_k: float  # share of the tasks with k attempts that passed at least once (the oracle ceiling)
    k: int  # the most attempts any task had
    consistency: float  # share of attempted tasks whose every attempt passed
    retry_value: float  # pass_at_k − pass@1, both over the pass_at_k_tasks tasks with k attempts
    pass_at_k_curve: tuple[tuple[int, float, float, float], ...]  # (k, estimate, low, high) for k = 1..n_repeats
    buckets: dict[str, tuple[int, ...]]  # bucket → task_idx, ascending; keys in TASK_BUCKETS order
    pass_histogram: tuple[tuple[int, int], ...]  # (passes, tasks) over attempted tasks, passes ascending
    slice_columns: tuple[str, ...]  # metadata columns profiled (few distinct values: category, difficulty, …)
    slices: tuple[SliceRow, ...]  # grouped by column in slice_columns order, then value by n_tasks desc
    failures: tuple[FailureCount, ...]  # most frequent first
    failure_by_slice: tuple[CrossTabCell, ...]
    cost: tuple[CostContrast, ...]  # overall first, then within each slice value
    error_hotspots: tuple[ErrorHotspot, ...]  # most errors first, at most 20, only tasks with ≥ 1 error
    error_rate: float  # attempts with a transport error / attempts
    pass_at_k_tasks: int = 0  # tasks behind pass_at_k: those with k attempts (fewer than n_attempted if unequal)
    curve_tasks: tuple[int, ...] = ()  # tasks behind each point of pass_at_k_curve (those with ≥ k attempts)

    def bucket_count(self, bucket: str) -> int:
        return len(self.buckets.get(bucket, ()))


@dataclass(slots=True)
class TaskShift:
    """One task in two runs and its contribution to Δpass@1. Not frozen, unlike its neighbours: a diagnosis
    builds one per paired task (50,000 of them in 0.06 s instead of 0.15 s); treat it as read-only. ``slices``
    dicts are shared by the tasks of one slice value."""

    task_id: str
    task_idx_a: int
    task_idx_b: int
    slices: dict[str, str]  # its value of each profiled slice column
    passes_a: int
    attempts_a: int
    passes_b: int
    attempts_b: int
    p_a: float
    p_b: float
    contribution: float  # (p_b − p_a) / n_paired: these add up to ScoreShift.delta exactly
    bucket_a: str
    bucket_b: str
    errors_a: int
    errors_b: int
    p_value: float = 1.0  # two-sided Fisher exact test of the two pass counts: how sure it is that p changed


@dataclass(frozen=True, slots=True)
class SliceShift:
    column: str
    value: str
    n_tasks: int  # paired tasks with this value
    contribution: float  # sum of its tasks' contributions
    pass_at_1_a: float  # over these paired tasks
    pass_at_1_b: float
    n_regressed: int
    n_improved: int


@dataclass(frozen=True, slots=True)
class AttemptFlips:
    """Attempts paired by repeat index within each paired task (repeat r of A with repeat r of B)."""

    n_pairs: int
    pass_to_fail: int
    fail_to_pass: int
    pass_to_pass: int
    fail_to_fail: int


@dataclass(frozen=True, slots=True)
class AttemptEvidence:
    """One attempt, as a reader checks a claim against it."""

    run_id: str
    task_idx: int
    repeat: int
    passed: bool
    extracted_answer: str | None
    expected_answer: str | None
    failure_category: str | None
    error: str | None
    response: str  # the final response text (may be long)


@dataclass(frozen=True, slots=True)
class AnswerCount:
    """One distinct extracted answer of a task's attempts."""

    answer: str | None  # None: nothing could be extracted
    n_attempts: int
    passed: bool


@dataclass(frozen=True, slots=True)
class TaskDive:
    """One task of one run, read closely: its attempts, its distinct answers, and a pass against a fail."""

    run_id: str
    task_id: str
    task_idx: int
    passes: int
    attempts: int
    expected_answer: str | None
    answers: tuple[AnswerCount, ...]  # most frequent first
    evidence: tuple[AttemptEvidence, ...]  # every attempt, repeat ascending
    representative_pass: AttemptEvidence | None
    representative_fail: AttemptEvidence | None
    diff_markdown: str  # a word-level diff of the pass and the fail, ready for a report ("" without both)


@dataclass(frozen=True, slots=True)
class TaskEvidence:
    """Why one task moved between two runs: its dive on each side, and a pass against a fail across them
    (the side that passed more gives the pass)."""

    task: TaskShift
    dive_a: TaskDive
    dive_b: TaskDive
    representative_pass: AttemptEvidence | None
    representative_fail: AttemptEvidence | None
    diff_markdown: str


@dataclass(frozen=True, slots=True)
class Finding:
    """A heuristic reading of the evidence, in BLADE's taxonomy; never presented as a certainty."""

    category: str  # one of TAXONOMY
    title: str  # one line
    detail: str  # the claim, with counts
    task_idx: tuple[int, ...]  # the tasks that support it (run B's indices for a shift, else the run's)
    rule: str  # the documented rule that fired (see docs/diagnose.md)
    suggestion: str  # the suggested intervention


@dataclass(frozen=True, slots=True)
class RankedTask:
    """A paired task as attribution ranks it within its group (``attribution.attribute``)."""

    task_id: str
    task_idx_a: int
    task_idx_b: int
    category: str | None  # its category, None when the runs have none
    passes_a: int
    attempts_a: int
    passes_b: int
    attempts_b: int
    p_a: float  # the per-task measure whose mean is the headline (pass rate, or mean score)
    p_b: float
    contribution: float  # (p_b − p_a) / n_paired
    p_value: float  # two-sided Fisher exact test of passes_a/attempts_a against passes_b/attempts_b

    @property
    def change(self) -> float:
        return self.p_b - self.p_a


@dataclass(frozen=True, slots=True)
class CategoryShare:
    """The tasks of one shift group that share a category."""

    category: str
    n_tasks: int
    contribution: float  # the sum of their contributions


@dataclass(frozen=True, slots=True)
class ShiftGroup:
    """Paired tasks whose contributions are alike: the same outcome transition (``always→never``, …) and the
    same direction of change. The groups of a comparison partition its paired tasks, so their
    contributions add up to Δ."""

    transition: str  # "always→never"; same-outcome groups that moved carry ▼ / ▲ ("sometimes→sometimes ▼")
    outcome_a: str  # always / sometimes / never / errored (every attempt an error)
    outcome_b: str
    direction: str  # "down", "up" or "same": the sign of its tasks' change
    n_tasks: int
    contribution: float  # the sum of its tasks' contributions
    categories: tuple[CategoryShare, ...]  # largest |contribution| first, then more tasks, then name; () without
    tasks: tuple[RankedTask, ...]  # its first tasks by rank: largest |change|, then smallest p-value, then task id

    @property
    def moved(self) -> bool:
        return self.direction != "same"


@dataclass(frozen=True, slots=True)
class Attribution:
    """Which kinds of tasks drove Δ: the groups, drops first (most negative), then gains (largest), then
    the groups that did not move; their contributions add up to ``delta``."""

    n_paired: int
    delta: float  # the sum of every group's contribution: the headline Δ over the paired tasks
    groups: tuple[ShiftGroup, ...]

    @property
    def n_moved(self) -> int:
        return sum(g.n_tasks for g in self.groups if g.moved)


@dataclass(frozen=True, slots=True)
class ScoreShift:
    """Two runs paired on task identity (``shift.score_shift``).

    ``delta`` is pass@1 of B minus pass@1 of A over the paired tasks, and equals the sum of the paired
    tasks' contributions exactly (up to float rounding). Tasks attempted on one side only are not paired:
    they are listed in ``only_a`` / ``only_b`` and reported, never silently dropped; each side's own
    headline pass@1 (``profile_a.pass_at_1``) still counts them. Unequal repeats are fine: every task's
    p(t) is its own passes over its own attempts.
    """

    profile_a: RunProfile
    profile_b: RunProfile
    n_paired: int
    only_a: tuple[int, ...]  # task_idx in A of tasks attempted in A only
    only_b: tuple[int, ...]
    pass_at_1_a: float  # over the paired tasks
    pass_at_1_b: float
    delta: float
    tasks: tuple[TaskShift, ...]  # every paired task, contribution ascending, then Fisher p-value, then task id
    slices: tuple[SliceShift, ...]  # per slice column, most negative contribution first
    transitions: dict[tuple[str, str], int]  # (bucket in A, bucket in B) → paired tasks
    attempt_flips: AttemptFlips
    drivers_down: tuple[TaskEvidence, ...]  # the tasks that pulled the score down most, with evidence
    drivers_up: tuple[TaskEvidence, ...]
    attribution: Attribution  # the paired tasks grouped by outcome transition, each group's tasks ranked


@dataclass(frozen=True, slots=True)
class RunDiagnosis:
    """One run: its profile and close reads of its sometimes-pass and never-pass tasks."""

    profile: RunProfile
    sometimes: tuple[TaskDive, ...]  # the most informative first (pass rate nearest 0.5, then task_idx)
    never: tuple[TaskDive, ...]  # never-pass tasks, those whose attempts agree on one wrong answer first


@dataclass(frozen=True, slots=True)
class Artifact:
    """An input of the diagnosis, for the report's inventory."""

    run_id: str
    source: str  # the store file, or the export directory
    n_tasks: int
    n_attempts: int


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """What ``diagnose`` returns and ``report.render_markdown`` writes: one run, or a baseline and a
    candidate with their shift; the findings cover both runs and the shift."""

    baseline: RunDiagnosis
    candidate: RunDiagnosis | None
    shift: ScoreShift | None
    findings: tuple[Finding, ...]
    artifacts: tuple[Artifact, ...]
    settings: dict[str, object]  # what shaped the numbers (metric, slice columns, drivers shown, seed, version)
    warnings: tuple[str, ...] = ()
    """What makes the numbers provisional, one sentence each: a run still being written (its numbers will move)."""
