"""Seed-compatible artifacts of one run, exported from the store.

Users coming from NeMo Evaluator have tools that read its output files, so the names follow its
documented result format where there is one (``results.jsonl``: ``problem_idx``, ``reward``,
``repeat``, ``model_response``, ...) and ``docs/artifacts.md`` documents every field.

Everything is read from the store by ``workbench.store.queries.export_rows`` (this module holds no SQL):
per-step files are streamed in batches, one bounded range of problems at a time (a run is never held in
memory); aggregates come from SQL there or from ``workbench.stats`` here.
Every file is written to a temporary name and renamed, so a reader never sees half a file, and the
bundle ``eval-{run_id}.json`` is written last: its presence means the export is complete.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import orjson

from workbench.analysis.figures import run_figures
from workbench.analysis.run_summary import RunSummary, summarize
from workbench.errors import UsageError, path_error
from workbench.secrets import redact_value
from workbench.store import Store, open_store
from workbench.store.queries.export_rows import (
    STEP_NAMES,
    category_task_counts,
    failure_rows,
    metric_task_scores,
    problem_sizes,
    runtime_row,
    step_range,
)
from workbench.store.queries.exported import (  # the bundle's format, read back below this package
    BUNDLE_FORMAT,
    BUNDLE_VERSION,
    RESULTS,
    TRAJECTORIES,
)
from workbench.store.queries.run_images import run_images

RUNTIME_STATS = "runtime_stats.json"
IMAGES = "images"
FAILURE_ANALYSIS = "failure_analysis.json"
EXEMPLARS_PER_CATEGORY = 3
EXEMPLAR_CHARS = 300
WRONG_ANSWER = "wrong_answer"
# The steps are sorted by DuckDB, inside a reader's small memory budget, one range of problems at a
# time: each range holds at most this much text (or this many steps), whatever the run's size.
_RANGE_BYTES = 8 << 20
_RANGE_STEPS = 8192
_JSON_OPTS = orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


@dataclass(frozen=True, slots=True)
class ExportResult:
    """What ``export_run`` wrote: the bundle, the other files, and how many lines each step file holds."""

    out_dir: Path
    bundle: Path
    paths: tuple[Path, ...]
    n_results: int
    n_trajectories: int


def bundle_file_name(run_id: str) -> str:
    """``eval-{run_id}.json``; characters a file name cannot safely hold become ``_``."""
    return f"eval-{re.sub(r'[^A-Za-z0-9._-]', '_', run_id)}.json"


def export_run(store_path: str | Path | Store, run_id: str, out_dir: str | Path,
               summary: RunSummary | None = None) -> ExportResult:
    """Write ``run_id``'s artifacts into ``out_dir`` (created if needed); given a ``Store`` (a pinned one: the
    connection the caller read the run's summary on), read through it, and ``summary``, the run's ``run_summary``
    the caller computed on that connection (not computed twice).

    Raises:
        UsageError: when the store or the run is not there, or ``out_dir`` is a file.
    """
    # another run's live journals are none of its business
    store = store_path if isinstance(store_path, Store) else open_store(store_path, runs=[run_id])
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out}: is a file; the artifacts need a directory")
    with store.pinned():
        bundle = build_eval_bundle(store, run_id, summary)  # first: it checks that the run exists
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise path_error(out, exc, "make the artifacts' directory") from None
        n_steps = write_step_files(store, run_id, out / RESULTS, out / TRAJECTORIES)
        pictures = write_images(store, run_id, out / IMAGES)
    stats = write_json(out / RUNTIME_STATS, bundle["runtime_stats"])
    failures = write_json(out / FAILURE_ANALYSIS, bundle["failure_analysis"])
    path = write_json(out / bundle_file_name(run_id), bundle)
    return ExportResult(
        out_dir=out, bundle=path, paths=(out / RESULTS, out / TRAJECTORIES, stats, failures, path, *pictures),
        n_results=n_steps, n_trajectories=n_steps,
    )


def write_images(store: Store, run_id: str, folder: Path) -> list[Path]:
    """Each image the run's prompts carried, as ``images/<sha256>.<ext>``: the trajectories reference them by hash."""
    paths = []
    for sha256, mime, data in run_images(store, run_id):
        folder.mkdir(exist_ok=True)
        path = folder / f"{sha256}.{mime.split('/', 1)[-1].replace('jpeg', 'jpg')}"
        if not path.exists():
            with atomic_open(path) as f:
                f.write(data)
        paths.append(path)
    return paths


def export_is_current(out_dir: str | Path, run_id: str, *, n_steps: int, status: str) -> bool:
    """Whether ``out_dir`` holds a whole export of ``run_id`` as the store has it now: the bundle (written
    last) is there and agrees on the run's status and step count, and the step files it names exist."""
    out = Path(out_dir)
    try:
        bundle = orjson.loads((out / bundle_file_name(run_id)).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return False
    if not isinstance(bundle, dict) or bundle.get("run_id") != run_id:
        return False
    files = (out / RESULTS, out / TRAJECTORIES, out / RUNTIME_STATS, out / FAILURE_ANALYSIS)
    return bundle.get("n_steps") == n_steps and bundle.get("status") == status and all(f.exists() for f in files)


def write_summary_json(output_dir: Path, summary: RunSummary, result: Any | None, name: str,
                       extra: dict[str, Any] | None = None) -> Path:
    """``OUTPUT_DIR/runs/RUN/NAME``: the end-of-run summary (pass@k with intervals, buckets, latency) and, given
    the engine's ``RunResult``, how the run went (status, elapsed time, steps/s, store); ``extra``: what the run's
    composition adds (the cache's hits and misses)."""
    folder = output_dir / "runs" / summary.run_id
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise path_error(folder, exc, "make the run's directory") from None
    data = asdict(summary)
    data["pass_at_k"] = {str(k): asdict(v) for k, v in summary.pass_at_k.items()}
    data["latency_ms"] = {f"p{k}": v for k, v in summary.latency_ms.items()}
    if result is not None:
        data["status"] = result.status
        data["elapsed_s"] = result.elapsed_s
        data["steps_per_s"] = result.steps_written / result.elapsed_s if result.elapsed_s else None
        data["store"] = str(result.store)
    data.update(extra or {})
    path = folder / name
    with atomic_open(path) as fh:  # whole or absent: a full disk must not leave a zero-byte summary.json behind
        fh.write(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    return path


# ---- atomic writes ---------------------------------------------------------------------------------
@contextlib.contextmanager
def atomic_open(path: Path) -> Iterator[IO[bytes]]:
    """A binary file that appears at ``path`` only once it is complete (temporary name, then rename)."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            yield fh
        os.replace(tmp, path)
    except OSError as exc:  # a full disk, a read-only directory: one line naming the file
        raise path_error(path, exc, "write it") from None
    finally:
        tmp.unlink(missing_ok=True)


def write_json(path: Path, data: Any) -> Path:
    with atomic_open(path) as fh:
        fh.write(orjson.dumps(data, option=_JSON_OPTS))
        fh.write(b"\n")
    return path


def write_text(path: Path, text: str) -> Path:
    with atomic_open(path) as fh:
        fh.write(text.encode())
    return path


# ---- per-step files --------------------------------------------------------------------------------
_STEP_NAMES = STEP_NAMES  # the keys of a step: ``export_rows.STEP_NAMES``


def _frag(value: str | None) -> orjson.Fragment | None:
    """A JSON column as it is stored (DuckDB checked it is valid JSON): embedded without parsing it again,
    unless whitespace in it would break a JSONL line (a newline inside a JSON string is escaped)."""
    if value is None:
        return None
    if "\n" in value or "\r" in value:
        value = orjson.dumps(orjson.loads(value)).decode()
    return orjson.Fragment(value)


RESULT_RUNTIME_FIELDS = ("prompt_tokens", "completion_tokens", "total_tokens", "reasoning_tokens", "latency_ms",
                         "seed_ms", "model_ms", "verify_ms")
"""Tokens and timings each results.jsonl line carries when the step knows them."""


def results_line(s: dict[str, Any]) -> dict[str, Any]:
    """NeMo Evaluator's documented results.jsonl record, plus ours. Optional fields that are unknown are
    left out (its readers fall back on absent fields, e.g. on extracted_answer when model_response is)."""
    line: dict[str, Any] = {
        "problem_idx": s["task_idx"], "repeat": s["repeat"], "reward": s["reward"], "task_id": s["task_id"],
        "passed": s["passed"],
    }
    for key, value in (("expected_answer", s["expected_answer"]), ("model_response", s["response"]),
                       ("extracted_answer", s["extracted_answer"]), ("metadata", _frag(s["metadata"])),
                       ("scoring_details", _frag(s["scoring_details"]))):
        if value is not None:
            line[key] = value
    for key in RESULT_RUNTIME_FIELDS:  # the step's own tokens and latency (NeMo Evaluator's StepRecord names)
        if s[key] is not None:
            line[key] = s[key]
    line["failure_category"] = s["failure_category"]
    if s["scores"] is not None:
        line["scores"] = _frag(s["scores"])
    return line


def trajectory_line(run_id: str, s: dict[str, Any]) -> dict[str, Any]:
    """The whole step; every key is always present (null when unknown), so the schema is fixed."""
    return {
        "run_id": run_id, "task_id": s["task_id"], "problem_idx": s["task_idx"], "repeat": s["repeat"],
        "started_at": s["started_at"], "prompt": s["prompt"], "messages": _frag(s["messages"]),
        "response": s["response"], "reasoning": s["reasoning"], "tool_calls": _frag(s["tool_calls"]),
        "finish_reason": s["finish_reason"],
        "tokens": {k: s[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens", "reasoning_tokens")},
        "latency": {k: s[k] for k in ("seed_ms", "model_ms", "verify_ms", "latency_ms")},
        "reward": s["reward"], "passed": s["passed"], "expected_answer": s["expected_answer"],
        "extracted_answer": s["extracted_answer"], "scoring_method": s["scoring_method"],
        "scoring_details": _frag(s["scoring_details"]), "scores": _frag(s["scores"]),
        "failure_category": s["failure_category"], "error": s["error"], "http_status": s["http_status"],
        "n_retries": s["n_retries"], "request_hash": s["request_hash"], "request_seed": s["request_seed"],
        "response_id": s["response_id"], "shard_idx": s["shard_idx"], "metadata": _frag(s["metadata"]),
    }


def step_ranges(store: Store, run_id: str) -> list[tuple[int, int]]:
    """Consecutive problem ranges ``(first, last)`` whose steps fit ``_RANGE_BYTES`` / ``_RANGE_STEPS``
    (a problem larger than that is a range of its own)."""
    ranges: list[tuple[int, int]] = []
    n_steps = n_bytes = 0
    for idx, n, size in problem_sizes(store, run_id):
        if ranges and n_steps + n <= _RANGE_STEPS and n_bytes + size <= _RANGE_BYTES:
            ranges[-1] = (ranges[-1][0], idx)
            n_steps, n_bytes = n_steps + n, n_bytes + size
        else:
            ranges.append((idx, idx))
            n_steps, n_bytes = n, size
    return ranges


def write_step_files(store: Store, run_id: str, results: Path, trajectories: Path) -> int:
    """Stream the run's steps, ordered by problem and repeat, into both JSONL files in one pass, one
    range of problems at a time. Returns the number of steps (lines in each file)."""
    dumps = orjson.dumps

    def render(steps: list[dict[str, Any]]) -> tuple[int, bytes, bytes]:
        # Returns the batch's lines rather than writing them: a range read again (a live journal was
        # rolled into a segment meanwhile) must not write its lines twice.
        return (len(steps), b"".join(dumps(results_line(s)) + b"\n" for s in steps),
                b"".join(dumps(trajectory_line(run_id, s)) + b"\n" for s in steps))

    total = 0
    with atomic_open(results) as res_file, atomic_open(trajectories) as traj_file:
        for first, last in step_ranges(store, run_id):
            for n, res, traj in step_range(store, run_id, first, last, render):
                res_file.write(res)
                traj_file.write(traj)
                total += n
    return total


# ---- the bundle ------------------------------------------------------------------------------------
def run_summary(store: Store, run: dict[str, Any]) -> RunSummary:
    """The run's end-of-run summary (pass@k with intervals, buckets, tokens, latency, and the figures its
    benchmark's authors report when it declares some: ``run_figures``) from its steps."""
    o = store.run_outcomes(run["run_id"])
    benchmark = run.get("benchmark")
    return summarize(
        run["run_id"], n_tasks=int(run["n_tasks"]), n_repeats=int(run["n_repeats"]), attempts=o.attempts,
        passes=o.passes, latency_ms=o.latency_ms, failures=o.failures, tokens=o.tokens, errors=o.errors,
        benchmark_figures=run_figures(store, run["run_id"], str(benchmark)) if benchmark else None,
    )


def build_eval_bundle(store: Store, run_id: str, summary: RunSummary | None = None) -> dict[str, Any]:
    """The content of ``eval-{run_id}.json``: JSON-native (string keys, ISO 8601 UTC times, null for an
    undefined number), so a bundle read back from disk equals the one built here. ``summary``: the run's
    ``run_summary`` on this store's snapshot, when the caller has it.

    Raises:
        UsageError: when the run is not in the store (the message names the store).
    """
    run = store.run(run_id)
    if summary is None:
        summary = run_summary(store, run)
    config = _json_obj(run.get("config"))
    ks = sorted(summary.pass_at_k)
    runtime = runtime_stats(store, run_id, summary)
    bundle = {
        "format": BUNDLE_FORMAT,
        "format_version": BUNDLE_VERSION,
        "run_id": run_id,
        "benchmark": run["benchmark"],
        "model_id": run.get("model_id"),
        "model_url": redact(run.get("model_url")),
        "protocol": run.get("protocol"),
        "status": run["status"],
        "created_at": _iso(run.get("created_at")),
        "finished_at": _iso(run.get("finished_at")),
        "nel_version": run.get("nel_version"),
        "config": redact({
            "identity_hash": run.get("identity_hash"),
            "identity": _json_obj(run.get("identity")),
            "run": config,
            "problem_start": run.get("problem_start"),
            "problem_end": run.get("problem_end"),
            "total_shards": run.get("total_shards"),
        }),
        "n_tasks": summary.n_tasks,
        "n_repeats": summary.n_repeats,
        "n_tasks_attempted": summary.n_tasks_attempted,
        "n_steps": summary.n_steps,
        "n_steps_expected": summary.n_steps_expected,
        "n_pass": summary.n_pass,
        "n_wrong": summary.n_wrong,
        "n_failed": sum(summary.failures.values()),
        "n_errors": summary.n_errors,
        "buckets": summary.buckets,
        "primary_metric": config.get("primary_metric") or "reward",
        "metrics": list(config.get("metrics") or []),
        "pass_at_k": {str(k): asdict(summary.pass_at_k[k]) for k in ks},
        "benchmark_figures": None if summary.benchmark_figures is None else asdict(summary.benchmark_figures),
        "scores": metric_scores(store, run_id),
        "categories": category_scores(store, run_id, ks),
        "runtime_stats": runtime,
        "failure_analysis": failure_analysis(store, run_id, summary.n_steps),
        "artifacts": {"results": RESULTS, "trajectories": TRAJECTORIES, "runtime_stats": RUNTIME_STATS,
                      "failure_analysis": FAILURE_ANALYSIS},
    }
    if not bundle["metrics"]:
        bundle["metrics"] = sorted(bundle["scores"])
    return orjson.loads(orjson.dumps(bundle, option=_JSON_OPTS))  # NaN -> null, numpy -> plain numbers


def metric_scores(store: Store, run_id: str) -> dict[str, dict[str, Any]]:
    """Per metric: mean reward across tasks (repeats reduced per task first) with its 95 % interval, and
    pass rate; the numbers of the ``run_scores`` view, computed by ``workbench.stats`` over tasks in a
    fixed order so they are the same to the last bit every time."""
    import numpy as np

    from workbench.stats import bounded_mean, unit_span

    per_metric: dict[str, list[tuple[int, float, float]]] = {}
    for metric, _, n, reward, pass_rate in metric_task_scores(store, run_id):
        per_metric.setdefault(metric, []).append((n, reward, pass_rate))
    out = {}
    for metric, rows in per_metric.items():
        n, reward, pass_rate = (np.array(col, dtype=np.float64) for col in zip(*rows, strict=True))
        est = bounded_mean(reward, span=unit_span(reward))  # the run_scores view's interval
        out[metric] = {"mean_reward": est.value, "mean_reward_low": est.low, "mean_reward_high": est.high,
                       "pass_rate": float(np.mean(pass_rate)), "n_tasks": len(n), "n_steps": int(n.sum())}
    return out


def category_scores(store: Store, run_id: str, ks: list[int]) -> dict[str, dict[str, Any]]:
    """Per benchmark category (``metadata.category``, else ``scoring_details.category``, as NeMo
    Evaluator reads it): pass@k with 95 % intervals, repeats reduced per task first. Empty when the
    benchmark has no categories; steps without one go to ``uncategorized`` when others have one."""
    import numpy as np

    from workbench.stats import pass_at_k_estimates

    rows = category_task_counts(store, run_id)
    if all(r[0] is None for r in rows):
        return {}
    groups: dict[str, list[tuple[int, int, float]]] = {}
    for category, _, n, c, reward in rows:
        groups.setdefault(category if category is not None else "uncategorized", []).append((n, c, reward))
    out = {}
    for name in sorted(groups):
        n, c, reward = (np.array(col, dtype=np.float64) for col in zip(*groups[name], strict=True))
        estimates = pass_at_k_estimates(n.astype(np.int64), c.astype(np.int64), ks)
        out[name] = {
            "n_tasks": len(n),
            "n_steps": int(n.sum()),
            "mean_reward": float(np.mean(reward / n)),
            "pass_at_k": {str(k): asdict(est) for k, est in estimates.items()},
        }
    return out


def runtime_stats(store: Store, run_id: str, summary: RunSummary) -> dict[str, Any]:
    """Latency percentiles, token throughput, finish reasons and errors (``runtime_stats.json``).

    Wall time runs from the first step's start to the last step's end: a run resumed after a pause
    counts the pause too."""
    r = runtime_row(store, run_id)
    n, wall = r["n"], r["wall_s"]
    tokens = summary.tokens
    wall = float(wall) if wall else None
    return {
        "run_id": run_id,
        "n_steps": n,
        "wall_time_s": wall,
        "steps_per_s": n / wall if wall else None,
        "latency_p50_ms": summary.latency_ms[50],
        "latency_p90_ms": summary.latency_ms[90],
        "latency_p99_ms": summary.latency_ms[99],
        "latency_mean_ms": r["latency_mean"],
        "latency_max_ms": r["latency_max"],
        "latency_breakdown_ms": {
            "seed_ms": {"mean": r["seed_mean"], "p50": r["seed_p50"]},
            "model_ms": {"mean": r["model_mean"], "p50": r["model_p50"]},
            "verify_ms": {"mean": r["verify_mean"], "p50": r["verify_p50"]},
        },
        "prompt_tokens": tokens["prompt_tokens"],
        "completion_tokens": tokens["completion_tokens"],
        "total_tokens": tokens["total_tokens"],
        "reasoning_tokens": int(r["reasoning_tokens"]) if r["reasoning_tokens"] is not None else None,
        "mean_prompt_tokens": r["mean_prompt_tokens"],
        "mean_completion_tokens": r["mean_completion_tokens"],
        "completion_tokens_per_s": tokens["completion_tokens"] / wall if wall else None,
        "total_tokens_per_s": tokens["total_tokens"] / wall if wall else None,
        "mean_request_completion_tokens_per_s": r["per_request_tps"],
        "finish_reasons": dict(sorted((r["finish_reasons"] or {}).items(), key=lambda kv: (-kv[1], kv[0]))),
        "n_errors": r["n_errors"],
        "error_rate": r["n_errors"] / n if n else None,
        "n_failed": r["n_failed"],
        "failure_rate": r["n_failed"] / n if n else None,
        "n_retries": int(r["retries"]),
        "n_steps_retried": r["n_retried"],
    }


def failure_analysis(store: Store, run_id: str, n_steps: int) -> dict[str, Any]:
    """Failure categories with counts, shares and up to three exemplars each (``failure_analysis.json``).
    Wrong but well-formed answers have no failure category; they are reported apart, as ``wrong_answers``."""
    groups: dict[str, dict[str, Any]] = {}
    for (category, is_error, count, task_id, idx, rep, response, cut, extracted, expected, error, status,
         finish) in failure_rows(store, run_id, wrong=WRONG_ANSWER, exemplars=EXEMPLARS_PER_CATEGORY,
                                 chars=EXEMPLAR_CHARS):
        group = groups.setdefault(category, {
            "category": category, "kind": "error" if is_error else "answer", "count": count,
            "percent": 100.0 * count / n_steps if n_steps else None, "exemplars": [],
        })
        group["exemplars"].append({
            "task_id": task_id, "problem_idx": idx, "repeat": rep, "model_response": response,
            "response_truncated": bool(cut), "extracted_answer": extracted, "expected_answer": expected,
            "error": error, "http_status": status, "finish_reason": finish,
        })
    for group in groups.values():
        group["exemplars"].sort(key=lambda e: (e["problem_idx"], e["repeat"]))
    wrong = groups.pop(WRONG_ANSWER, None)
    if wrong is not None:
        del wrong["category"], wrong["kind"]
    categories = sorted(groups.values(), key=lambda g: (-g["count"], g["category"]))
    n_failed = sum(g["count"] for g in categories)
    return {
        "run_id": run_id,
        "n_steps": n_steps,
        "n_failed": n_failed,
        "failure_rate": n_failed / n_steps if n_steps else None,
        "categories": categories,
        "wrong_answers": wrong or {"count": 0, "percent": 0.0 if n_steps else None, "exemplars": []},
    }


# ---- helpers ---------------------------------------------------------------------------------------
def redact(value: Any) -> Any:
    """Defence in depth: the store never holds secrets, but a config may still name one. Keys that
    hold credentials and credentials in text (URLs, headers, registered keys) are replaced by
    ``<redacted>``: ``workbench.secrets.redact_value``, the one implementation."""
    return redact_value(value)


def _json_obj(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, str | bytes):
        value = orjson.loads(value)
    return dict(value) if isinstance(value, dict) else {"value": value}


def _iso(value: Any) -> str | None:
    """Store timestamps are naive UTC; artifacts say so explicitly."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC).isoformat().replace("+00:00", "Z")
    return str(value)
