"""``POST /aggregate_metrics``: NeMo Gym's end-of-run metrics over the rollouts a collection verified here.

Gym's rollout collection ends by posting every verify response (``reward``, ``_ng_task_index``,
``_ng_rollout_index``, ``extracted_answer``, ``response.usage``) to the resources server and writes the
answer as ``<output>_aggregate_metrics.json``; a training pipeline treats a failure there as a failed run.
The answer has Gym's shape (``AggregateMetrics``) and Gym's key names (those of its
``compute_aggregate_metrics`` with ``compute_pass_majority_metrics``, as ``math_with_judge`` configures
it: ``mean/reward``, ``pass@k/accuracy``, ``pass@1[avg-of-k]/accuracy``, ``majority@k/accuracy``,
``…/no_answer``, ``…/std_dev_across_runs``), so Gym's tools read it unchanged; the numbers come from
this project's statistics (the unbiased pass@k of ``workbench.stats.passk``, Student-t intervals),
computed over whole arrays so that 100,000 rollouts take well under a second. Beside Gym's keys,
``nel/pass@1`` carries the interval this project reports with every headline number.

Everything here is pure: ``aggregate`` takes the parsed rows and returns a plain dict; the app does I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from workbench.serve.gym_format import FormatError
from workbench.stats.intervals import mean_with_ci
from workbench.stats.passk import pass_at_k_per_task
from workbench.stats.quantiles import t_quantile

TASK_KEY = "_ng_task_index"
ROLLOUT_KEY = "_ng_rollout_index"
ANSWER_KEY = "extracted_answer"
MASK_KEY = "mask_sample"
SCORE = "accuracy"
NO_ANSWER = "no_answer"
_SKIPPED = frozenset({"reward", "response", MASK_KEY})
_NUMBERS = (int, float, bool)

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]


class AggregateError(FormatError):
    """A verify response that cannot be aggregated here; ``field`` is its path in the request body (a 422)."""


@dataclass(frozen=True, slots=True)
class Rollouts:
    """The rows as columns: one entry per scored rollout, in the order the client sent them."""

    task: Ints
    rollout: Ints
    columns: dict[str, Floats]  # "reward" and every other numeric field (usage counts included); NaN if absent
    answers: list[Any] | None  # extracted answers, when the rows carry them (enables majority@k and no_answer)
    task_ids: dict[int, str]  # nel's task id of each task index, when the rows carry one
    masked: int


def read_rollouts(rows: Any, benchmark: str, known_task_ids: Callable[[], frozenset[str]]) -> Rollouts:
    """Check and columnise the request's ``verify_responses``.

    A row from another benchmark (its ``eval_type``/``benchmark`` names another one, or its ``task_id`` is
    not one of this benchmark's) is refused, naming the field: its reward would be averaged into numbers
    that claim to measure this benchmark."""
    if not isinstance(rows, list):
        raise AggregateError("verify_responses", "expected a list of verify responses")
    task: list[int] = []
    rollout: list[int] = []
    reward: list[float] = []
    numeric: dict[str, tuple[list[int], list[float]]] = {}  # other numeric fields: (row numbers, values)
    answers: list[Any] = []
    has_answers = False
    task_ids: dict[int, str] = {}
    ids: frozenset[str] | None = None
    masked = 0
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise AggregateError(f"verify_responses[{i}]", "expected a verify response object")
        for key in ("eval_type", "benchmark"):
            named = row.get(key)
            if named is not None and named != benchmark:
                raise AggregateError(f"verify_responses[{i}].{key}",
                                     f"this rollout is from benchmark {named!r}; this server serves {benchmark!r}: "
                                     "aggregate it where it was verified")
        if row.get(MASK_KEY):  # Gym's convention: its reward measures nothing; counted, not averaged
            masked += 1
            continue
        index = _index(row, TASK_KEY, i)
        task_id = row.get("task_id")
        if task_id is not None:
            ids = known_task_ids() if ids is None else ids
            if task_id not in ids:
                raise AggregateError(f"verify_responses[{i}].task_id",
                                     f"task {task_id!r} is not a problem of {benchmark!r}")
            task_ids.setdefault(index, str(task_id))
        value = row.get("reward")
        if not isinstance(value, int | float) or not math.isfinite(value):
            raise AggregateError(f"verify_responses[{i}].reward", f"expected a finite number, got {value!r}")
        n = len(task)
        task.append(index)
        rollout.append(_index(row, ROLLOUT_KEY, i))
        reward.append(float(value))
        if ANSWER_KEY in row:
            has_answers = True
        answers.append(row.get(ANSWER_KEY))
        response = row.get("response")
        usage = response.get("usage") if isinstance(response, dict) else None
        for fields in (row, usage) if isinstance(usage, dict) else (row,):
            for key, field in fields.items():
                if type(field) in _NUMBERS and key not in _SKIPPED and key[:1] != "_":
                    column = numeric.get(key)
                    if column is None:
                        column = numeric[key] = ([], [])
                    column[0].append(n)
                    column[1].append(float(field))
    columns = {"reward": np.asarray(reward, dtype=np.float64)}
    for key, (where, values) in numeric.items():
        filled = columns[key] = np.full(len(task), np.nan)
        filled[np.asarray(where, dtype=np.int64)] = values  # a usage count replaces a same-named row field
    return Rollouts(np.asarray(task, dtype=np.int64), np.asarray(rollout, dtype=np.int64), columns,
                    answers if has_answers else None, task_ids, masked)


def _index(row: Mapping[str, Any], key: str, i: int) -> int:
    value = row.get(key, 0)
    if type(value) is not int:
        raise AggregateError(f"verify_responses[{i}].{key}", f"expected an integer index, got {value!r}")
    return value


def aggregate(data: Rollouts) -> dict[str, Any]:
    """Gym's ``AggregateMetrics`` body for ``data`` (empty lists and dicts when nothing was scored)."""
    if data.task.size == 0:
        coverage = {"coverage/masked_rollouts": data.masked} if data.masked else {}
        return {"group_level_metrics": [], "agent_metrics": coverage, "key_metrics": coverage,
                "repeat_level_metrics": []}
    # grouped by task, and within a task by rollout index: "the first k attempts" (pass@1[avg-of-k],
    # majority@k) are the k lowest repeat numbers, whatever order the client sent them in
    order = np.lexsort((data.rollout, data.task))
    task = data.task[order]
    starts = np.flatnonzero(np.r_[True, task[1:] != task[:-1]])
    position = np.arange(task.size) - np.repeat(starts, np.diff(np.r_[starts, task.size]))
    scores = {SCORE: data.columns["reward"][order]}
    answers = None if data.answers is None else [data.answers[i] for i in order.tolist()]
    if answers is not None:
        scores[NO_ANSWER] = np.array([a is None for a in answers], dtype=np.float64)

    agent: dict[str, Any] = {}
    for name, column in data.columns.items():
        agent.update(_describe(column, name, ddof=1))
    agent.update(_pass_metrics(scores, answers, starts, position))
    agent.update(_nel_headline(scores[SCORE], starts))
    agent.update(_repeat_aggregates(repeats := _repeat_level(data)))
    agent["num_repeats"] = int(np.unique(data.rollout).size)
    if data.masked:
        agent["coverage/masked_rollouts"] = data.masked
    return {"group_level_metrics": _group_level(data, order, starts), "agent_metrics": agent,
            "key_metrics": key_metrics(agent), "repeat_level_metrics": repeats}


def key_metrics(agent: Mapping[str, Any]) -> dict[str, Any]:
    """The headline subset: Gym's default (every ``mean/*``), the highest-k pass and majority metrics as its
    ``math_with_judge`` picks them, and nel's pass@1 with its interval."""
    key = {name: value for name, value in agent.items() if name.startswith(("mean/", "nel/pass@1"))}
    key.update(_highest_k(agent, "pass@1[avg-of-", "]", ()))
    key.update(_highest_k(agent, "pass@", "", (NO_ANSWER,)))
    key.update(_highest_k(agent, "majority@", "", (NO_ANSWER,)))
    return key


def _highest_k(agent: Mapping[str, Any], prefix: str, close: str, excluded: Sequence[str]) -> dict[str, Any]:
    found: dict[int, dict[str, Any]] = {}
    for name, value in agent.items():
        head, _, score = name.partition("/")
        if not head.startswith(prefix) or not head.endswith(close) or "/" in score or score in excluded:
            continue
        k = head[len(prefix): len(head) - len(close)]
        if k.isdigit():
            found.setdefault(int(k), {})[name] = value
    return found[max(found)] if found else {}


def _pass_metrics(scores: dict[str, Floats], answers: list[Any] | None, starts: Ints,
                  position: Ints) -> dict[str, Any]:
    """pass@k (unbiased, over all of a task's attempts), pass@1[avg-of-k] and majority@k for k = 1..max, in %."""
    sizes = np.diff(np.r_[starts, position.size])
    max_k = int(sizes.max())
    group = np.repeat(np.arange(starts.size), sizes)
    codes = answer_codes(answers)
    out: dict[str, Any] = {}
    per_run: dict[str, list[float]] = {}
    for name, values in scores.items():
        binary = np.minimum.reduceat(((values == 0) | (values == 1)).astype(np.int8), starts).astype(bool)
        passes = np.add.reduceat(values == 1, starts)
        per_run[name] = [100.0 * float(values[position == j].mean()) for j in range(max_k)]
        for k in range(1, max_k + 1):
            first_k = position < k
            best = np.maximum.reduceat(np.where(first_k, values, -np.inf), starts)  # a continuous reward
            per_task = np.where(binary, pass_at_k_per_task(sizes, np.where(binary, passes, 0), k),
                                np.where(sizes >= k, best, np.nan))
            out[f"pass@{k}/{name}"] = 100.0 * float(np.nanmean(per_task)) if np.any(sizes >= k) else math.nan
            averages = np.add.reduceat(np.where(first_k, values, 0.0), starts) / np.minimum(sizes, k)
            out[f"pass@1[avg-of-{k}]/{name}"] = 100.0 * float(averages.mean())
        for k, value in _majority(values, codes, group, position, starts.size, max_k).items():
            out[f"majority@{k}/{name}"] = value
    out = {k: v for k, v in out.items() if not (isinstance(v, float) and math.isnan(v))}
    out["per_sample_aggregate"] = per_run
    for k in range(2, max_k + 1):
        for name, runs in per_run.items():
            spread = float(np.std(runs[:k], ddof=1))
            out[f"pass@1[avg-of-{k}]/{name}/std_dev_across_runs"] = spread
            out[f"pass@1[avg-of-{k}]/{name}/std_err_across_runs"] = spread / math.sqrt(k)
    return out


def _majority(values: Floats, codes: Ints | None, group: Ints, position: Ints, n_tasks: int,
              max_k: int) -> dict[int, float]:
    """majority@k: the score of the most frequent (answer, score) among the first k answered attempts; a tie
    scores the mean of the tied; a task with no answer among them scores 0. ``codes`` number the answers
    (-1: none); ``group`` is each rollout's task number."""
    if codes is None:
        return {}
    levels, score_code = np.unique(values, return_inverse=True)
    pair = codes * levels.size + score_code
    width = int(pair.max()) + 1 if pair.size else 1
    out: dict[int, float] = {}
    for k in range(1, max_k + 1):
        chosen = (codes >= 0) & (position < k)
        keys, counts = np.unique(group[chosen] * width + pair[chosen], return_counts=True)
        task_of = keys // width
        top = np.zeros(n_tasks, dtype=np.int64)
        np.maximum.at(top, task_of, counts)
        tied = counts == top[task_of]
        scores = levels[(keys % width) % levels.size]
        total = np.bincount(task_of[tied], weights=scores[tied], minlength=n_tasks)
        ties = np.bincount(task_of[tied], minlength=n_tasks)
        out[k] = 100.0 * float(np.mean(np.where(ties > 0, total / np.maximum(ties, 1), 0.0)))
    return out


def answer_codes(answers: list[Any] | None) -> Ints | None:
    """Each extracted answer as a small integer (equal answers, equal codes), -1 for no answer."""
    if answers is None:
        return None
    seen: dict[Any, int] = {}
    try:
        codes = [-1 if a is None else seen.setdefault(a, len(seen)) for a in answers]
    except TypeError:  # an answer that is a list or an object: compared by its JSON-like text
        seen.clear()
        codes = [-1 if a is None else seen.setdefault(a if _hashable(a) else repr(a), len(seen)) for a in answers]
    return np.asarray(codes, dtype=np.int64)


def _hashable(value: Any) -> bool:
    return isinstance(value, str | int | float | bool | tuple)


def _nel_headline(reward: Floats, starts: Ints) -> dict[str, Any]:
    """pass@1 as this project reports it: repeats reduced per task first, then a t-interval across tasks."""
    per_task = np.add.reduceat(reward, starts) / np.diff(np.r_[starts, reward.size])
    estimate = mean_with_ci(per_task, bounded=bool(np.all((reward >= 0) & (reward <= 1))))
    return {"nel/pass@1": estimate.value, "nel/pass@1/ci_low_95": estimate.low,
            "nel/pass@1/ci_high_95": estimate.high, "nel/n_tasks": estimate.n_tasks}


def _group_level(data: Rollouts, order: Ints, starts: Ints) -> list[dict[str, Any]]:
    """Per task: Gym's mean/max/min/median/std of every numeric field (std 0 for a single rollout)."""
    task = data.task[order]
    sizes = np.diff(np.r_[starts, task.size])
    names: list[str] = [TASK_KEY, "num_rollouts"]
    columns: list[list[Any]] = [task[starts].tolist(), sizes.tolist()]
    sparse: list[tuple[str, Ints, Floats]] = []  # fields some tasks lack: set per task below
    for name, column in data.columns.items():
        stats = _grouped(task, column[order])
        single = stats["n"] == 1
        for stat in ("mean", "max", "min", "median", "std"):
            values = np.where(single, 0.0, stats[stat]) if stat == "std" else stats[stat]
            if stats["key"].size == starts.size:
                names.append(f"{stat}/{name}")
                columns.append(values.tolist())
            else:
                sparse.append((f"{stat}/{name}", np.searchsorted(task[starts], stats["key"]), values))
    groups = [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]
    for name, slots, values in sparse:
        for slot, value in zip(slots.tolist(), values.tolist(), strict=True):
            groups[slot][name] = value
    if data.task_ids:
        for group in groups:
            task_id = data.task_ids.get(group[TASK_KEY])
            if task_id is not None:
                group["task_id"] = task_id
    return groups


def _repeat_level(data: Rollouts) -> list[dict[str, Any]]:
    """Per rollout index (only when there are several): Gym's summary of every numeric field across tasks."""
    indices = np.unique(data.rollout)
    if indices.size < 2:
        return []
    n_tasks = int(np.unique(data.task).size)
    out: dict[int, dict[str, Any]] = {int(r): {ROLLOUT_KEY: int(r)} for r in indices}
    for r in indices:
        present = int(np.unique(data.task[data.rollout == r]).size)
        out[int(r)].update(sample_count=present, missing_count=n_tasks - present)
    for name, column in data.columns.items():
        stats = _grouped(data.rollout, column)
        for i, r in enumerate(stats["key"].tolist()):
            n = int(stats["n"][i])
            mean = float(stats["mean"][i])
            std = float(stats["std"][i]) if n > 1 else 0.0
            sem = std / math.sqrt(n)
            entry = out[r]
            entry.update({f"mean/{name}": mean, f"median/{name}": float(stats["median"][i]), f"std/{name}": std,
                          f"sem/{name}": sem, f"min/{name}": float(stats["min"][i]),
                          f"max/{name}": float(stats["max"][i]), f"p25/{name}": float(stats["p25"][i]),
                          f"p75/{name}": float(stats["p75"][i])})
            if n > 1:
                entry[f"ci_low_95/{name}"], entry[f"ci_high_95/{name}"] = _t_interval(mean, sem, n)
    return [out[r] for r in sorted(out)]


def _repeat_aggregates(repeats: list[dict[str, Any]]) -> dict[str, Any]:
    """Each repeat's ``mean/*`` taken as one observation: its spread across repeats (Gym's ``*_across_repeats``)."""
    out: dict[str, Any] = {}
    names = sorted({k for entry in repeats for k in entry if k.startswith("mean/")})
    for name in names:
        values = np.asarray([entry[name] for entry in repeats if name in entry], dtype=np.float64)
        n = values.size
        mean = float(values.mean())
        std = float(values.std(ddof=1)) if n > 1 else 0.0
        se = std / math.sqrt(n)
        out.update({f"mean_across_repeats/{name}": mean, f"median_across_repeats/{name}": float(np.median(values)),
                    f"std_across_repeats/{name}": std, f"min_across_repeats/{name}": float(values.min()),
                    f"max_across_repeats/{name}": float(values.max()), f"se_across_repeats/{name}": se})
        if n > 1:
            low, high = _t_interval(mean, se, n)
            out[f"ci_low_95_across_repeats/{name}"], out[f"ci_high_95_across_repeats/{name}"] = low, high
    return out


def _t_interval(mean: float, se: float, n: int) -> tuple[float, float]:
    half = t_quantile(n - 1, 0.975) * se
    return mean - half, mean + half


def _describe(values: Floats, name: str, ddof: int) -> dict[str, float]:
    present = values[~np.isnan(values)]
    if present.size == 0:
        return {}
    std = float(present.std(ddof=ddof)) if present.size > ddof else 0.0
    return {f"mean/{name}": float(present.mean()), f"max/{name}": float(present.max()),
            f"min/{name}": float(present.min()), f"median/{name}": float(np.median(present)), f"std/{name}": std}


def _grouped(keys: Ints, values: Floats) -> dict[str, npt.NDArray[Any]]:
    """Count, mean, min, max, median, sample std and quartiles of ``values`` per key, NaN values left out:
    one sort and a few ``reduceat`` calls, however many groups."""
    keep = ~np.isnan(values)
    k, v = keys[keep], values[keep]
    if k.size == 0:
        empty = np.empty(0)
        return {"key": empty.astype(np.int64), "n": empty, "mean": empty, "min": empty, "max": empty,
                "median": empty, "std": empty, "p25": empty, "p75": empty}
    order = np.lexsort((v, k))
    k, v = k[order], v[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    n = np.diff(np.r_[starts, k.size]).astype(np.float64)
    total = np.add.reduceat(v, starts)
    mean = total / n
    squares = np.add.reduceat((v - np.repeat(mean, n.astype(np.int64))) ** 2, starts)
    with np.errstate(invalid="ignore", divide="ignore"):
        std = np.sqrt(squares / (n - 1))

    def quantile(q: float) -> Floats:  # linear interpolation, as numpy and pandas default to
        at = starts + (n - 1) * q
        low = np.floor(at).astype(np.int64)
        high = np.ceil(at).astype(np.int64)
        return np.asarray(v[low] + (v[high] - v[low]) * (at - low), dtype=np.float64)

    return {"key": k[starts], "n": n, "mean": mean, "min": v[starts], "max": v[starts + n.astype(np.int64) - 1],
            "median": quantile(0.5), "std": std, "p25": quantile(0.25), "p75": quantile(0.75)}
