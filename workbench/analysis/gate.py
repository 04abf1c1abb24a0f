"""A release gate: a policy applied to two sets of exported runs, benchmark by benchmark (``nel gate``).

Each benchmark the policy lists gets PASS / BREACH / INSUFFICIENT_EVIDENCE / MISSING from the paired
interval of its metric against its tolerance (the same pairing and interval as ``nel compare``); the tiers
turn those into GO / NO-GO / INCONCLUSIVE. ``docs/compare.md`` states the rules; ``benchmark_status`` and
``decide`` implement them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.analysis.compare import (
    CATEGORY,
    CategoryDelta,
    MetricDelta,
    category_deltas,
    category_reason,
    collapsed_categories,
    json_native,
    metric_delta,
    no_spread,
    pair_tasks,
    task_scores,
)
from workbench.analysis.sources import RunData, load_run
from workbench.errors import UsageError
from workbench.spec.loader import Located, load_config_tree
from workbench.stats.paired import tasks_to_resolve
from workbench.types import GateDecision, GateStatus

TIERS = ("critical", "supporting", "advisory")
DIRECTIONS = ("higher_is_better", "lower_is_better")
STATUSES = tuple(GateStatus)
DECISIONS = tuple(GateDecision)
RULE_KEYS = ("tier", "max_drop", "max_relative_drop", "metric", "direction")
TOP_KEYS = ("name", "defaults", "benchmarks", "supporting_breaches_for_no_go")
DEFAULT_SUPPORTING_BREACHES = 2


# ---- the policy ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class BenchmarkRule:
    """One benchmark of a policy. At least one of ``max_drop`` (absolute) and ``max_relative_drop``
    (a share of the baseline's score) is set; with both, the stricter applies."""

    benchmark: str
    tier: str
    max_drop: float | None = None
    max_relative_drop: float | None = None
    metric: str | None = None  # None: the run's primary metric
    direction: str = "higher_is_better"

    def tolerance(self, baseline: float) -> float:
        """The largest tolerated drop, in the metric's units, for a baseline score of ``baseline``."""
        limits = [self.max_drop] if self.max_drop is not None else []
        if self.max_relative_drop is not None and not math.isnan(baseline):
            limits.append(self.max_relative_drop * abs(baseline))
        return min(limits) if limits else math.nan


@dataclass(frozen=True, slots=True)
class Policy:
    rules: tuple[BenchmarkRule, ...]
    name: str | None = None
    supporting_breaches_for_no_go: int = DEFAULT_SUPPORTING_BREACHES
    file: str | None = None


def load_policy(path: Path) -> Policy:
    """Read and validate a policy file; every mistake names ``file:line: dot.path``.

    Raises:
        UsageError: an unreadable file, invalid YAML, an unknown key, a wrong type, an unknown tier or
            direction, a drop outside [0, 1], a benchmark without any tolerance.
    """
    return parse_policy(load_config_tree(path))


def parse_policy(located: Located) -> Policy:
    """Validate a located policy tree (see ``load_policy``)."""
    tree = located.tree
    _only(located, tree, "", TOP_KEYS)
    name = _optional(located, tree, "name", _string)
    limit = _optional(located, tree, "supporting_breaches_for_no_go", _count) or DEFAULT_SUPPORTING_BREACHES
    defaults: dict[str, Any] = {}
    if tree.get("defaults") is not None:
        defaults = _rule_fields(located, _mapping(located, tree["defaults"], "defaults"), "defaults")
    raw = tree.get("benchmarks")
    if raw is None:
        raise located.error("benchmarks", "missing: list the benchmarks to gate, e.g. benchmarks: {gsm8k: "
                                          "{tier: critical, max_drop: 0.02}}")
    benchmarks = _mapping(located, raw, "benchmarks")
    if not benchmarks:
        raise located.error("benchmarks", "no benchmark listed")
    rules = []
    for bench, spec in benchmarks.items():
        path = f"benchmarks.{bench}"
        fields = {**defaults, **_rule_fields(located, _mapping(located, spec, path), path)}
        if "tier" not in fields:
            raise located.error(path, f"missing 'tier' (one of {', '.join(TIERS)})")
        if fields.get("max_drop") is None and fields.get("max_relative_drop") is None:
            raise located.error(path, "set max_drop or max_relative_drop (here or under defaults)")
        rules.append(BenchmarkRule(benchmark=str(bench), **fields))
    return Policy(rules=tuple(rules), name=name, supporting_breaches_for_no_go=limit, file=str(located.file))


def _rule_fields(located: Located, spec: dict[str, Any], path: str) -> dict[str, Any]:
    _only(located, spec, path, RULE_KEYS)
    checks: dict[str, Callable[[Located, Any, str], Any]] = {
        "tier": _choice(TIERS), "direction": _choice(DIRECTIONS), "metric": _string,
        "max_drop": _fraction, "max_relative_drop": _fraction,
    }
    return {key: checks[key](located, value, f"{path}.{key}") for key, value in spec.items() if value is not None}


def _only(located: Located, table: Mapping[str, Any], path: str, allowed: tuple[str, ...]) -> None:
    for key in table:
        if key not in allowed:
            raise located.error(f"{path}.{key}" if path else str(key),
                                f"unknown key; expected one of: {', '.join(allowed)}")


def _optional(located: Located, table: Mapping[str, Any], key: str,
              check: Callable[[Located, Any, str], Any]) -> Any:
    return None if table.get(key) is None else check(located, table[key], key)


def _mapping(located: Located, value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise located.error(path, f"expected a mapping, got {_kind(value)}")
    return value


def _string(located: Located, value: Any, path: str) -> str:
    if not isinstance(value, str) or not value:
        raise located.error(path, f"expected a non-empty string, got {_kind(value)}")
    return value


def _fraction(located: Located, value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise located.error(path, f"expected a number, got {_kind(value)}")
    if not 0.0 <= value <= 1.0:
        raise located.error(path, f"{value} is outside [0, 1]")
    return float(value)


def _count(located: Located, value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise located.error(path, f"expected a whole number of at least 1, got {value!r}")
    return value


def _choice(options: tuple[str, ...]) -> Callable[[Located, Any, str], str]:
    def check(located: Located, value: Any, path: str) -> str:
        if value not in options:
            raise located.error(path, f"expected one of {', '.join(options)}, got {value!r}")
        return str(value)

    return check


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    names = {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean"}
    return names.get(type(value), f"a {type(value).__name__}")


# ---- exported runs -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ExportedRun:
    bundle: Path
    run_id: str
    benchmark: str
    created_at: str


def find_runs(root: Path) -> dict[str, list[ExportedRun]]:
    """Every exported run below ``root`` (``eval-*.json`` found recursively), by benchmark, newest first.

    Raises:
        UsageError: when ``root`` is not a directory.
    """
    from workbench.store.queries.exported import read_bundle

    if not root.is_dir():
        raise UsageError(f"{root}: not a directory (nel gate takes two directories of exported runs)")
    found: dict[str, list[ExportedRun]] = {}
    for bundle in sorted(root.rglob("eval-*.json")):
        data = read_bundle(bundle)
        run = ExportedRun(bundle=bundle, run_id=str(data.get("run_id")), benchmark=str(data.get("benchmark")),
                          created_at=str(data.get("created_at") or ""))
        found.setdefault(run.benchmark, []).append(run)
    for runs in found.values():
        runs.sort(key=lambda r: (r.created_at, str(r.bundle)), reverse=True)
    return found


# ---- one benchmark -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class BenchmarkResult:
    """One benchmark's status. ``delta``, ``low`` and ``high`` are candidate − baseline in the metric's
    own units (the decision interval of ``nel compare``); ``tolerance`` is the largest tolerated drop;
    ``collapsed`` the categories that collapsed (``compare.collapsed_categories``), whatever the status."""

    rule: BenchmarkRule
    status: GateStatus
    reason: str
    metric: str | None = None
    baseline_run: str | None = None
    candidate_run: str | None = None
    score: MetricDelta | None = None
    tolerance: float = math.nan
    notes: tuple[str, ...] = ()
    collapsed: tuple[CategoryDelta, ...] = ()
    tasks_needed: int | None = None  # tasks_to_resolve: what would settle an INSUFFICIENT_EVIDENCE status

    @property
    def delta(self) -> float:
        return self.score.delta if self.score else math.nan


def benchmark_status(rule: BenchmarkRule, score: MetricDelta) -> tuple[GateStatus, float, str]:
    """``(status, tolerance, reason)`` from the paired delta. With ``g`` the change in the good direction
    (``d``, or ``−d`` when lower is better), ``[glo, ghi]`` its interval and ``m`` the tolerance:
    BREACH when ``ghi < 0`` and ``g < −m`` (a significant drop beyond tolerance); PASS when ``glo ≥ −m``
    (the interval rules out a drop beyond tolerance); otherwise INSUFFICIENT_EVIDENCE. No paired task:
    MISSING."""
    if score.n_tasks == 0:
        return GateStatus.MISSING, math.nan, "no task was attempted in both runs"
    m = rule.tolerance(score.baseline)
    lower = rule.direction == "lower_is_better"
    g, glo, ghi = ((-score.delta, -score.decision_high, -score.decision_low) if lower
                   else (score.delta, score.decision_low, score.decision_high))
    word = "rose" if (score.delta > 0) else "fell" if score.delta < 0 else "held"
    told = (f"{score.metric} {word} {score.baseline:.4f} → {score.candidate:.4f} (change {score.delta:+.4f}, "
            f"95 % interval {score.decision_low:+.4f} to {score.decision_high:+.4f}, {score.n_tasks} tasks); "
            f"tolerated drop {m:.4f}{' (lower is better)' if lower else ''}")
    if ghi < 0 and g < -m:
        return GateStatus.BREACH, m, f"{told}: a significant drop beyond tolerance"
    if glo >= -m:
        return GateStatus.PASS, m, f"{told}: a drop beyond tolerance is ruled out"
    return (GateStatus.INSUFFICIENT_EVIDENCE, m,
            f"{told}: a drop beyond tolerance cannot be ruled out ({_power(score, g, m)})")


def _power(score: MetricDelta, g: float, m: float) -> str:
    """The minimum detectable effect (or why it is undefined) and the tasks that would settle the status if the
    true change ``g`` (in the good direction) were the observed one (``tasks_to_resolve``)."""
    if score.n_tasks < 2 or math.isnan(score.sd):
        return "too few paired tasks to tell"
    if math.isnan(score.mde):
        return f"the paired differences have no spread, {no_spread(score)}: the minimum detectable effect is undefined"
    more = f"detectable at 80 % power: drops of {score.mde:.4f} or more"
    needed = tasks_to_resolve(g, m, score.sd)
    if needed is not None:
        more += (f"; about {needed:,} tasks would resolve it against {m:.4f} at 80 % power, if the true change "
                 f"were the observed {g:+.4f}")
    return more


def evaluate_benchmark(rule: BenchmarkRule, baseline: RunData, candidate: RunData, *, seed: int = 0,
                       n_resamples: int = 10_000, notes: tuple[str, ...] = ()) -> BenchmarkResult:
    """Pair the two runs of one benchmark and judge the rule's metric."""
    b, c = task_scores(baseline), task_scores(candidate)
    paired = pair_tasks(b, c)
    tolerance = rule.tolerance(float(paired["score_b"].to_numpy().mean()) if len(paired) else math.nan)
    score = metric_delta(baseline.metric, paired, b, c, max_drop=0.0 if math.isnan(tolerance) else tolerance,
                         seed=seed, n_resamples=n_resamples)
    status, tolerance, reason = benchmark_status(rule, score)
    g = -score.delta if rule.direction == "lower_is_better" else score.delta
    needed = tasks_to_resolve(g, tolerance, score.sd) if status == GateStatus.INSUFFICIENT_EVIDENCE else None
    collapsed: tuple[CategoryDelta, ...] = ()
    if CATEGORY in paired.columns and rule.direction == "higher_is_better" and not math.isnan(tolerance):
        collapsed = collapsed_categories(category_deltas(paired), tolerance)
    return BenchmarkResult(rule=rule, status=status, reason=reason, metric=baseline.metric,
                           baseline_run=baseline.run_id, candidate_run=candidate.run_id, score=score,
                           tolerance=tolerance, notes=notes, collapsed=collapsed, tasks_needed=needed)


# ---- the whole gate ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class GateResult:
    decision: GateDecision
    reasons: tuple[str, ...]
    benchmarks: tuple[BenchmarkResult, ...]
    policy: Policy
    unlisted: tuple[str, ...] = field(default=())  # benchmarks found in the directories but not in the policy

    def to_dict(self) -> dict[str, Any]:
        """JSON-native; ``None`` for an undefined number."""
        return json_native({
            "format": "nel-gate", "version": 1, "decision": self.decision, "reasons": list(self.reasons),
            "policy": {"file": self.policy.file, "name": self.policy.name,
                       "supporting_breaches_for_no_go": self.policy.supporting_breaches_for_no_go},
            "benchmarks": [_result_dict(r) for r in self.benchmarks],
            "unlisted_benchmarks": list(self.unlisted),
        })


def decide(results: tuple[BenchmarkResult, ...], policy: Policy) -> tuple[GateDecision, tuple[str, ...]]:
    """GO / NO-GO / INCONCLUSIVE with the reasons.

    NO-GO: a critical benchmark breached or missing, or at least ``supporting_breaches_for_no_go``
    supporting benchmarks breached. Else INCONCLUSIVE: a critical benchmark without sufficient evidence.
    Else GO. Fewer supporting breaches, supporting benchmarks without evidence or missing, and every
    advisory benchmark are reasons only: they never block.
    """
    reasons = []
    critical_fail = [r for r in results
                     if r.rule.tier == "critical" and r.status in (GateStatus.BREACH, GateStatus.MISSING)]
    critical_unsure = [r for r in results
                       if r.rule.tier == "critical" and r.status == GateStatus.INSUFFICIENT_EVIDENCE]
    supporting_breach = [r for r in results if r.rule.tier == "supporting" and r.status == GateStatus.BREACH]
    limit = policy.supporting_breaches_for_no_go
    for r in results:
        if r.status != GateStatus.PASS:
            reasons.append(f"{r.rule.tier} {r.rule.benchmark}: {r.status}: {r.reason}")
        reasons += [f"{r.rule.tier} {r.rule.benchmark}: {category_reason(d, r.tolerance)}" for d in r.collapsed]
    if critical_fail or len(supporting_breach) >= limit:
        decision = GateDecision.NO_GO
        if len(supporting_breach) >= limit:
            reasons.append(f"{len(supporting_breach)} supporting benchmarks breached (NO-GO from {limit})")
    elif critical_unsure:
        decision = GateDecision.INCONCLUSIVE
    else:
        decision = GateDecision.GO
        if supporting_breach:
            reasons.append(f"{len(supporting_breach)} supporting benchmark breached: a reason, not a NO-GO "
                           f"(that takes {limit})")
    if not reasons:
        reasons.append("every benchmark passed")
    return decision, tuple(reasons)


def run_gate(baseline_dir: Path, candidate_dir: Path, policy: Policy, *, seed: int = 0,
             n_resamples: int = 10_000) -> GateResult:
    """Apply ``policy`` to the exported runs below two directories (matched by benchmark name; where a
    directory holds several runs of a benchmark, its newest is used and a note says so).

    Raises:
        UsageError: a directory that is not there, or a bundle that cannot be read.
    """
    base_runs, cand_runs = find_runs(baseline_dir), find_runs(candidate_dir)
    results = []
    for rule in policy.rules:
        base, base_note = _newest(base_runs, rule.benchmark, "baseline")
        cand, cand_note = _newest(cand_runs, rule.benchmark, "candidate")
        notes = tuple(n for n in (base_note, cand_note) if n)
        if base is None or cand is None:
            where = " or ".join(side for side, run in (("baseline", base), ("candidate", cand)) if run is None)
            results.append(BenchmarkResult(rule=rule, status=GateStatus.MISSING, notes=notes,
                                           reason=f"no exported run of {rule.benchmark} in the {where} directory"))
            continue
        try:
            base_data = load_run(str(base.bundle), metric=rule.metric)
            cand_data = load_run(str(cand.bundle), metric=rule.metric or base_data.metric)
        except UsageError as exc:
            results.append(BenchmarkResult(rule=rule, status=GateStatus.MISSING, reason=str(exc), notes=notes))
            continue
        results.append(evaluate_benchmark(rule, base_data, cand_data, seed=seed, n_resamples=n_resamples,
                                          notes=notes))
    decision, reasons = decide(tuple(results), policy)
    listed = {r.benchmark for r in policy.rules}
    unlisted = tuple(sorted((set(base_runs) | set(cand_runs)) - listed))
    return GateResult(decision=decision, reasons=reasons, benchmarks=tuple(results), policy=policy, unlisted=unlisted)


def _newest(runs: dict[str, list[ExportedRun]], benchmark: str, side: str) -> tuple[ExportedRun | None, str | None]:
    found = runs.get(benchmark, [])
    if not found:
        return None, None
    note = None
    if len(found) > 1:
        note = (f"{side}: {len(found)} runs of {benchmark}; used the newest, {found[0].run_id} "
                f"(created {found[0].created_at})")
    return found[0], note


def _result_dict(r: BenchmarkResult) -> dict[str, Any]:
    s = r.score
    out: dict[str, Any] = {
        "benchmark": r.rule.benchmark, "tier": r.rule.tier, "status": r.status, "reason": r.reason,
        "metric": r.metric, "direction": r.rule.direction, "max_drop": r.rule.max_drop,
        "max_relative_drop": r.rule.max_relative_drop, "tolerance": r.tolerance,
        "baseline_run": r.baseline_run, "candidate_run": r.candidate_run, "notes": list(r.notes),
    }
    if s is not None:
        out.update({
            "n_tasks": s.n_tasks, "baseline": s.baseline, "candidate": s.candidate, "delta": s.delta,
            "ci_low": s.decision_low, "ci_high": s.decision_high, "t_low": s.low, "t_high": s.high,
            "p_values": {t.name: t.p_value for t in s.tests}, "mde": s.mde, "tasks_needed": r.tasks_needed,
        })
    return out

