"""A stored run as an inspect_ai ``.eval`` log: what ``read_eval_log`` reads and ``inspect view`` shows.

An ``.eval`` log is a zip: ``header.json`` (the eval spec, results and stats), one ``samples/{id}_epoch_{n}.json``
per sample and epoch, and ``summaries.json`` (what the viewer lists). inspect's own writer holds the whole log
in memory; this one streams: each sample is built through inspect's pydantic types (so it is valid), written as
its own zip entry, and its summary goes to a temporary file that becomes ``summaries.json`` at the end. One
range of problems is in memory at a time (``workbench.export.artifacts.step_ranges``).

A nel task is an inspect sample (id: its content ``task_id``), a repeat an epoch (``repeat + 1``); every metric
is a score whose value is ``C``/``I`` (passed or not, so inspect's ``accuracy`` equals nel's pass rate) with the
reward, extracted answer and scoring details beside it.
"""

from __future__ import annotations

import re
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from inspect_ai.log import (
    EvalConfig,
    EvalDataset,
    EvalError,
    EvalLog,
    EvalMetric,
    EvalPlan,
    EvalResults,
    EvalSample,
    EvalSampleLimit,
    EvalScore,
    EvalSpec,
    EvalStats,
)
from inspect_ai.model import GenerateConfig, ModelOutput, ModelUsage, StopReason
from inspect_ai.scorer import Score

from workbench.errors import path_error
from workbench.export.artifacts import atomic_open, build_eval_bundle, step_ranges
from workbench.export.inspect_messages import conversation
from workbench.store import Store
from workbench.store.queries.export_rows import step_range

LOG_VERSION = 2
"""The ``.eval`` format version written (inspect_ai 0.3.285 reads and writes version 2)."""
ERROR_CATEGORIES = frozenset({"rate_limit", "timeout", "server_error", "context_window", "model_error",
                              "image_error", "scorer_error", "judge_error"})
"""Failure categories shown as the sample's error (the attempt produced nothing to score)."""
_GENERATE = {"temperature": "temperature", "top_p": "top_p", "max_tokens": "max_tokens", "seed": "seed",
             "stop": "stop_seqs", "frequency_penalty": "frequency_penalty", "presence_penalty": "presence_penalty"}
"""nel's sampling parameters (the run's identity) → inspect's ``GenerateConfig`` fields."""
_STOP: dict[str, StopReason] = {"stop": "stop", "length": "max_tokens", "tool_calls": "tool_calls",
                                "content_filter": "content_filter"}
"""An OpenAI finish reason → inspect's stop reason (any other: ``unknown``)."""


@dataclass(frozen=True, slots=True)
class InspectExport:
    """The log written and how many samples (task × epoch) it holds."""

    path: Path
    n_samples: int


def log_name(bundle: dict[str, Any]) -> str:
    """``{created}_{benchmark}_{run_id}.eval``, inspect's own naming: the same file for the same run, so
    exporting again replaces it."""
    created = (bundle.get("created_at") or "").replace(":", "-").split(".")[0]
    return re.sub(r"[^A-Za-z0-9._+-]", "_", f"{created}_{bundle['benchmark']}_{bundle['run_id']}") + ".eval"


def export_inspect(store: Store, run_id: str, out_dir: Path) -> InspectExport:
    """Write ``run_id`` as an inspect ``.eval`` log into ``out_dir``; return where and how many samples.

    Raises:
        UsageError: when the run is not in the store or ``out_dir`` cannot be written.
    """
    with store.pinned():
        bundle = build_eval_bundle(store, run_id)
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise path_error(out_dir, exc, "make the export's directory") from None
        path = out_dir / log_name(bundle)
        spec = eval_spec(bundle)
        n = 0
        with atomic_open(path) as fh, zipfile.ZipFile(fh, "w", zipfile.ZIP_DEFLATED, compresslevel=5) as zf, \
                tempfile.TemporaryFile() as summaries:
            summaries.write(b"[")
            ids = SampleIds()
            for first, last in step_ranges(store, run_id):
                for batch in step_range(store, run_id, first, last, lambda steps: steps):
                    for step in batch:
                        sample = build_sample(step, ids.id_of(step), spec.model, bundle)
                        name = f"samples/{sample.id}_epoch_{sample.epoch}.json"
                        zf.writestr(name, sample.model_dump_json(exclude_none=True))
                        summaries.write((b"," if n else b"") + sample.summary().model_dump_json(exclude_none=True)
                                        .encode())
                        n += 1
            summaries.write(b"]")
            summaries.seek(0)
            with zf.open("summaries.json", "w") as entry:
                while chunk := summaries.read(1 << 20):
                    entry.write(chunk)
            header = EvalLog(version=LOG_VERSION, status=log_status(bundle["status"]), eval=spec, plan=EvalPlan(),
                             results=eval_results(bundle, n), stats=eval_stats(bundle, spec.model),
                             error=None if bundle["status"] != "failed" else
                             EvalError(message="the run failed (see nel's failure analysis)", traceback="",
                                       traceback_ansi=""))
            zf.writestr("header.json", header.model_dump_json(exclude_none=True))
    return InspectExport(path, n)


class SampleIds:
    """A sample's id: the task's content id (what pairs runs across harnesses); a task the benchmark holds twice
    (two problems, one content) gets ``{task_id}-{task_idx}`` for its second problem, so no sample is lost."""

    def __init__(self) -> None:
        self._owner: dict[str, int] = {}

    def id_of(self, step: dict[str, Any]) -> str:
        task_id, idx = str(step["task_id"]), int(step["task_idx"])
        owner = self._owner.setdefault(task_id, idx)
        return task_id if owner == idx else f"{task_id}-{idx}"


def log_status(status: str) -> Any:
    return {"complete": "success", "failed": "error", "running": "started"}.get(status, "cancelled")


def eval_spec(bundle: dict[str, Any]) -> EvalSpec:
    """The eval spec: task = benchmark, model = model id, generate config = the run's sampling parameters,
    epochs = repeats; the endpoint (credentials already redacted), identity and nel's own config beside."""
    config = bundle.get("config") or {}
    identity = config.get("identity") or {}
    generate = {theirs: identity[ours] for ours, theirs in _GENERATE.items() if identity.get(ours) is not None}
    if isinstance(generate.get("stop_seqs"), str):
        generate["stop_seqs"] = [generate["stop_seqs"]]
    if identity.get("system_prompt"):
        generate["system_message"] = identity["system_prompt"]
    return EvalSpec(
        created=bundle.get("created_at") or "1970-01-01T00:00:00+00:00",
        run_id=bundle["run_id"], eval_id=bundle["run_id"], task=bundle["benchmark"], task_id=bundle["benchmark"],
        task_args={k: config.get(k) for k in ("problem_start", "problem_end") if config.get(k) is not None},
        dataset=EvalDataset(name=bundle["benchmark"], location=identity.get("data_hash"), samples=bundle["n_tasks"]),
        model=bundle.get("model_id") or "unknown", model_base_url=bundle.get("model_url"),
        model_generate_config=GenerateConfig(**generate),
        config=EvalConfig(epochs=bundle["n_repeats"], epochs_reducer=["mean"]),
        packages={"nel-workbench": bundle.get("nel_version") or "unknown"},
        metadata={"nel_run_id": bundle["run_id"], "identity_hash": config.get("identity_hash"),
                  "protocol": bundle.get("protocol"), "solver": identity.get("solver"), "nel_config": config},
    )


def eval_results(bundle: dict[str, Any], n_samples: int) -> EvalResults:
    """Accuracy per metric, equal to nel's pass rate (repeats reduced per task, then the mean over tasks; the
    primary metric's is nel's pass@1, to the last bit); the primary metric first, with the standard error of
    nel's pass@1, and each metric's mean reward."""
    primary = bundle["primary_metric"]
    scores = bundle.get("scores") or {}
    pass1 = (bundle.get("pass_at_k") or {}).get("1") or {}
    out = []
    for metric in sorted(scores, key=lambda m: (m != primary, m)):
        s = scores[metric]
        accuracy = pass1["value"] if metric == primary and pass1.get("value") is not None else s["pass_rate"]
        metrics = {"accuracy": EvalMetric(name="accuracy", value=accuracy)}
        if metric == primary and pass1.get("se") is not None:
            metrics["stderr"] = EvalMetric(name="stderr", value=pass1["se"])
        if s.get("mean_reward") is not None:
            metrics["mean_reward"] = EvalMetric(name="mean_reward", value=s["mean_reward"])
        out.append(EvalScore(name=metric, scorer=metric, reducer="mean", scored_samples=s["n_steps"],
                             unscored_samples=n_samples - s["n_steps"], metrics=metrics))
    return EvalResults(total_samples=bundle["n_tasks"] * bundle["n_repeats"], completed_samples=n_samples,
                       scores=out)


def eval_stats(bundle: dict[str, Any], model: str) -> EvalStats:
    rt = bundle.get("runtime_stats") or {}
    usage = ModelUsage(input_tokens=rt.get("prompt_tokens") or 0, output_tokens=rt.get("completion_tokens") or 0,
                       total_tokens=rt.get("total_tokens") or 0, reasoning_tokens=rt.get("reasoning_tokens"))
    return EvalStats(started_at=bundle.get("created_at") or "", completed_at=bundle.get("finished_at") or "",
                     model_usage={model: usage})


def _json(text: str | None) -> Any:
    return orjson.loads(text) if text else None


def step_scores(step: dict[str, Any], primary: str) -> dict[str, Score]:
    """Every metric's score (``C``/``I``) with the answer and an explanation, so extraction failures show."""
    details = _json(step["scoring_details"])
    by_metric = _json(step["scores"]) or {primary: {"reward": step["reward"], "passed": step["passed"],
                                                    "extracted_answer": step["extracted_answer"],
                                                    "method": step["scoring_method"], "details": details}}
    out = {}
    for metric, s in by_metric.items():
        method = s.get("method")
        explanation = f"{method}: " if method else ""
        explanation += orjson.dumps(s.get("details")).decode() if s.get("details") is not None else "no details"
        out[metric] = Score(value="C" if s.get("passed") else "I", answer=s.get("extracted_answer"),
                            explanation=explanation, metadata={"reward": s.get("reward")})
    return out


def build_sample(step: dict[str, Any], sample_id: str, model: str, bundle: dict[str, Any]) -> EvalSample:
    """One step (a task's repeat) as an inspect sample: the conversation, the reply with its usage, the scores,
    the task's metadata and the error or limit that ended it."""
    inputs, messages, reply = conversation(step["messages"], step["prompt"], step["response"], step["tool_calls"],
                                           model)
    usage = None
    if step["total_tokens"] is not None or step["prompt_tokens"] is not None:
        usage = ModelUsage(input_tokens=step["prompt_tokens"] or 0, output_tokens=step["completion_tokens"] or 0,
                           total_tokens=step["total_tokens"] or 0, reasoning_tokens=step["reasoning_tokens"])
    category = step["failure_category"]
    output = ModelOutput.from_message(reply, stop_reason=_STOP.get(step["finish_reason"] or "", "unknown"))
    output.usage, output.response_id = usage, step["response_id"]
    output.time = step["model_ms"] / 1000 if step["model_ms"] is not None else None
    if category in ERROR_CATEGORIES:
        output.error = step["error"] or category
    metadata = _json(step["metadata"]) or {}
    metadata.update({"nel_task_idx": step["task_idx"], "nel_repeat": step["repeat"], "failure_category": category,
                     "reward": step["reward"], "http_status": step["http_status"], "n_retries": step["n_retries"]})
    error = limit = None
    if category in ERROR_CATEGORIES:
        error = EvalError(message=f"{category}: {step['error'] or ''}".rstrip(": "), traceback="", traceback_ansi="")
    elif category == "max_turns_exhausted":
        limit = EvalSampleLimit(type="turn", limit=float(len(_json(step.get("turns")) or [])) or 1.0,
                                reason="the agent used every turn it was allowed")
    elif step["finish_reason"] == "length":
        max_tokens = ((bundle.get("config") or {}).get("identity") or {}).get("max_tokens")
        limit = EvalSampleLimit(type="token", limit=float(max_tokens or step["completion_tokens"] or 0),
                                reason="the reply was cut at the token limit")
    latency = step["latency_ms"] / 1000 if step["latency_ms"] is not None else None
    return EvalSample(
        id=sample_id, epoch=int(step["repeat"]) + 1, input=inputs or step["prompt"] or "",
        target=step["expected_answer"] or "", messages=messages, output=output,
        scores=step_scores(step, bundle["primary_metric"]), metadata=metadata,
        model_usage={model: usage} if usage is not None else {}, started_at=step["started_at"],
        total_time=latency, working_time=latency, error=error, limit=limit,
    )
