"""Import NeMo Gym rollout files (``ng_collect_rollouts`` output) into the store as one run.

A rollouts file holds one JSON object per successful rollout: the task's own row fields, the
``/verify`` answer (``reward``, ``response`` — a Responses-API object — and any scorer fields) and
the indices ``_ng_task_index`` / ``_ng_rollout_index`` (older releases: ``_task_index`` /
``_rollout_index``). Each becomes one step, written through the engine's own ``ShardWriter`` and
``ingest``, so views, ``load_run``, export, statistics, diagnosis and the TUI read it like any run.

Files are read line by line, twice: a first pass validates every line (a bad line names file and
line before anything is written), hashes the content (the run id) and learns the tasks; the second
writes steps as it reads. Only the tasks and the (task, rollout) keys are held in memory.

``passed`` is ``reward >= 1`` — the engine's rule, so pass rates of native and imported runs mean the
same (for Gym's binary 0/1 rewards it is ``reward > 0``). Tasks keep nel's own ids where a row carries or
leads to one (``workbench.gym.pairing``), and the reward is recorded under the benchmark's own metric name
when nel knows the benchmark, so ``nel compare NATIVE GYM`` pairs the two task by task.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from workbench import __version__
from workbench.engine.identity import identity_diff, identity_hash
from workbench.environments.dataset import json_object_line
from workbench.errors import UsageError
from workbench.gym.pairing import (
    UNPAIRED_PREFIX,
    LineSpans,
    TaskResolver,
    UnpairedRows,
    benchmark_metric,
    known_benchmark,
)
from workbench.model.failures import classify_answer, classify_error_text
from workbench.store.ingest import IMPORT_MEMORY_LIMIT, ingest
from workbench.store.layout import segments_root
from workbench.store.reader import Store
from workbench.store.writer import ShardWriter
from workbench.types import RunStatus

TASK_INDEX_KEYS = ("_ng_task_index", "_task_index")
"""The task index, newest spelling first (``_task_index`` is what releases before 0.2 wrote)."""
ROLLOUT_INDEX_KEYS = ("_ng_rollout_index", "_rollout_index")
FAILURE_CLASS_KEY = "_ng_failure_class"

_EXPECTED_KEYS = ("expected_answer", "ground_truth", "answer", "target", "expected_output", "label")
_EXTRACTED_KEYS = ("extracted_answer", "extracted_model_answer", "parsed_answer", "model_answer")
_ERROR_KEYS = ("error", "error_message", "_ng_failure_message", "failure_reason")
# Row fields that are the rollout (not the task): never task metadata.
_ROLLOUT_KEYS = frozenset({
    "response", "responses_create_params", "reward", "reward_components", "mask_sample", "failure_kind",
    "ng_trajectory", "ng_perf", "ng_model_call_capture", "ng_agent_observations", "agent_ref", "task_input",
    "task_id", *_EXPECTED_KEYS, *_EXTRACTED_KEYS, *_ERROR_KEYS,
})
_SECRET = re.compile(r"(?i)(api[_-]?key|authoriz|secret|passw|bearer|cookie|credential|(^|[_-])token$|"
                     r"access[_-]?token|auth[_-]?token)")
_BATCH_ROLL = 4096


@dataclass(frozen=True, slots=True)
class GymImportResult:
    """What an import did; ``already_imported`` when the store held this exact run."""

    run_id: str
    benchmark: str
    model_id: str | None
    n_tasks: int
    n_repeats: int
    n_rollouts: int
    n_failures: int
    n_missing_tasks: int
    n_missing_rollouts: int
    n_duplicates: int
    already_imported: bool
    metric: str = "reward"
    """The name the rollouts' reward is recorded under: the benchmark's metric when nel knows the benchmark."""
    n_unpaired_tasks: int = 0
    unpaired: tuple[UnpairedRows, ...] = ()
    """Rows whose tasks carry no nel task id (nor a prompt that leads to one), by file and reason."""


# ---- reading ---------------------------------------------------------------------------------------
def _rows(path: Path, digest: Any = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line; a bad line raises naming ``path:line``."""
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    with open(path, "rb") as fh:
        for line_no, line in enumerate(fh, 1):
            if digest is not None:
                digest.update(line)
            row = json_object_line(path, line_no, line)
            if row is not None:
                yield line_no, row


def _index(row: Mapping[str, Any], keys: tuple[str, ...], where: str) -> int | None:
    for key in keys:
        if key in row:
            value = row[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise UsageError(f"{where}: {key} must be a whole number >= 0, got {value!r}")
            return value
    return None


class _Keys:
    """Reads a row's (task, rollout) key; a file without rollout indices counts rollouts per task in order."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._next: dict[int, int] = {}

    def __call__(self, line_no: int, row: Mapping[str, Any]) -> tuple[int, int]:
        where = f"{self.path}:{line_no}"
        task = _index(row, TASK_INDEX_KEYS, where)
        if task is None:
            raise UsageError(f"{where}: no task index: the row lacks {TASK_INDEX_KEYS[0]} "
                             f"(or the older {TASK_INDEX_KEYS[1]}); is this a rollouts file of ng_collect_rollouts?")
        rollout = _index(row, ROLLOUT_INDEX_KEYS, where)
        if rollout is None:
            rollout = self._next.get(task, 0)
        self._next[task] = max(self._next.get(task, 0), rollout + 1)
        return task, rollout


# ---- mapping a row ---------------------------------------------------------------------------------
def scrub(value: Any) -> Any:
    """``value`` without any field that looks like a credential (API keys, auth headers, tokens)."""
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items() if not _SECRET.search(str(k))}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    if isinstance(value, str) and value.lower().startswith("bearer "):
        return "[redacted]"
    return value


def _obj(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (rows from other tools vary)."""
    return value if isinstance(value, dict) else {}


def _dumps(value: Any) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


def content_text(content: Any) -> str:
    """Text of a message's content, as the Responses and chat formats and inspect_ai write it: a string, or the
    ``text`` of its parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _answer_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return orjson.dumps(value).decode()


def _first(row: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    return next((row[k] for k in keys if row.get(k) is not None), None)


def _params(row: Mapping[str, Any]) -> dict[str, Any]:
    params = row.get("responses_create_params")
    if not isinstance(params, dict):
        task_input = row.get("task_input")
        params = task_input.get("responses_create_params") if isinstance(task_input, dict) else None
    return params if isinstance(params, dict) else {}


def _tool_call(item: Mapping[str, Any]) -> dict[str, Any]:
    args = item.get("arguments")
    return {"id": item.get("call_id") or item.get("id"), "type": "function",
            "function": {"name": item.get("name"), "arguments": args if isinstance(args, str) else _dumps(args)}}


def _chat_messages(items: list[Any]) -> list[dict[str, Any]]:
    """Responses-API input/output items as OpenAI chat messages (what ``steps.messages`` holds)."""
    out: list[dict[str, Any]] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message":
            out.append({"role": item.get("role", "user"), "content": content_text(item.get("content"))})
        elif kind == "function_call":
            if out and out[-1]["role"] == "assistant" and "tool_calls" in out[-1]:
                out[-1]["tool_calls"].append(_tool_call(item))
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [_tool_call(item)]})
        elif kind == "function_call_output":
            out.append({"role": "tool", "tool_call_id": item.get("call_id"),
                        "content": content_text(item.get("output"))})
        elif kind == "reasoning":
            continue  # kept in steps.reasoning
        else:
            out.append({"role": "assistant", "content": _dumps(item)})
    return out


def _reasoning(item: Mapping[str, Any]) -> str:
    return content_text(item.get("summary")) or content_text(item.get("content"))


@dataclass(slots=True)
class _Reply:
    messages: list[dict[str, Any]]
    response: str
    reasoning: str | None
    tool_calls: list[dict[str, Any]] | None
    finish_reason: str | None


def _reply(params: Mapping[str, Any], response: Mapping[str, Any]) -> _Reply:
    """Split a rollout into the conversation before the final turn and the final turn itself.

    An agent's ``output`` holds its whole trajectory (calls, tool results, messages): everything up to
    the last tool result is conversation, what follows is the reply, as for a native multi-turn step.
    """
    sent = params.get("input")
    messages = [{"role": "user", "content": sent}] if isinstance(sent, str) else _chat_messages(sent or [])
    if isinstance(params.get("instructions"), str):
        messages.insert(0, {"role": "system", "content": params["instructions"]})
    output = [i for i in response.get("output") or [] if isinstance(i, dict)]
    last_tool = max((n for n, i in enumerate(output) if i.get("type") == "function_call_output"), default=-1)
    messages += _chat_messages(output[: last_tool + 1])
    final = output[last_tool + 1:]
    text = "\n".join(content_text(i.get("content")) for i in final if i.get("type", "message") == "message")
    # Reasoning of every turn, in order: chat messages have no place for it, and dropping it loses evidence.
    reasoning = "\n\n".join(r for r in (_reasoning(i) for i in output if i.get("type") == "reasoning") if r)
    calls = [_tool_call(i) for i in final if i.get("type") == "function_call"]
    details = response.get("incomplete_details")
    finish = details.get("reason") if isinstance(details, dict) else response.get("status")
    return _Reply(messages, text, reasoning or None, calls or None, finish if isinstance(finish, str) else None)


def _prompt(messages: list[dict[str, Any]], params: Mapping[str, Any]) -> str:
    """The task's prompt as text: the last user message sent (the whole input when there is none)."""
    users = [m["content"] for m in messages if m.get("role") == "user" and isinstance(m.get("content"), str)]
    return users[-1] if users else orjson.dumps(params.get("input")).decode()


def _tokens(response: Mapping[str, Any]) -> dict[str, int | None]:
    usage = _obj(response.get("usage"))
    details = _obj(usage.get("output_tokens_details"))
    return {"prompt_tokens": usage.get("input_tokens"), "completion_tokens": usage.get("output_tokens"),
            "total_tokens": usage.get("total_tokens"), "reasoning_tokens": details.get("reasoning_tokens")}


def _failure_category(failure_class: str, error: str) -> str:
    """A Gym failure class as the store's category: every failed rollout gave no scored answer."""
    return classify_error_text(f"{failure_class} {error}", also=(("judge", "judge_error"),))


def _task_metadata(row: Mapping[str, Any]) -> dict[str, Any]:
    """A task's slicing fields: its short scalar row fields (category, difficulty...) and the agent."""
    meta: dict[str, Any] = {}
    for key, value in row.items():
        if key in _ROLLOUT_KEYS or key.startswith("_") or _SECRET.search(key):
            continue
        if isinstance(value, bool | int | float) or (isinstance(value, str) and len(value) <= 200):
            meta[key] = value
    agent = row.get("agent_ref")
    if isinstance(agent, dict) and isinstance(agent.get("name"), str):
        meta.setdefault("agent", agent["name"])
    return meta


def _task(row: Mapping[str, Any], resolver: TaskResolver) -> tuple[dict[str, Any], str | None]:
    """The ``tasks`` row of a Gym row, and why it is unpaired (``None``: it has nel's own task id).

    An unpaired task's id hashes what the model is asked and the expected answer (see ``workbench.gym.pairing``).
    """
    row = scrub(dict(row))
    params = _params(row)
    messages = _reply(params, {}).messages
    expected = _answer_text(_first(row, _EXPECTED_KEYS))
    prompt = _prompt(messages, params) if params.get("input") else None  # an empty input asks nothing
    found = resolver.resolve(row, prompt, expected)
    task_id = found.task_id
    if task_id is None:
        content = {"input": params.get("input"), "instructions": params.get("instructions"), "expected": expected}
        task_id = UNPAIRED_PREFIX + hashlib.sha256(orjson.dumps(content, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]
    task = {"task_id": task_id, "benchmark": "", "prompt": prompt or "", "expected_answer": expected,
            "metadata": _dumps(_task_metadata(row) or None)}
    return task, found.reason


@dataclass(slots=True)
class _StepContext:
    run_id: str
    task_idx: int
    repeat: int
    task: dict[str, Any]
    default_time: float
    n_attempts: int = 1


def step_row(row: Mapping[str, Any], ctx: _StepContext) -> dict[str, Any]:
    """One Gym rollout (or failure) row as a ``steps`` row."""
    row = scrub(dict(row))
    params = _params(row)
    response = _obj(row.get("response"))
    reply = _reply(params, response)
    failure_class = row.get(FAILURE_CLASS_KEY)
    error = None
    reward = row.get("reward")
    reward = float(reward) if isinstance(reward, int | float) and not isinstance(reward, bool) else 0.0
    extracted = _answer_text(_first(row, _EXTRACTED_KEYS))
    if failure_class is not None:
        error = str(_first(row, _ERROR_KEYS) or failure_class)
        category: str | None = _failure_category(str(failure_class), error)
        reward = 0.0
    else:
        category = classify_answer(reply.response, reward, extracted)
        if category == "format_error" and not any(k in row for k in _EXTRACTED_KEYS):
            category = None  # the scorer reports no extraction at all: a plain wrong answer, not a format error
    details = {k: v for k, v in row.items()
               if k not in ("response", "responses_create_params", *TASK_INDEX_KEYS, *ROLLOUT_INDEX_KEYS)}
    details["method"] = "gym"
    latency = _obj(row.get("ng_perf")).get("total_latency_ms")
    created = response.get("created_at")
    started = float(created) if isinstance(created, int | float) and created > 0 else ctx.default_time
    return {
        "run_id": ctx.run_id, "task_idx": ctx.task_idx, "repeat": ctx.repeat, "task_id": ctx.task["task_id"],
        "shard_idx": 0, "started_at": started, "prompt": ctx.task["prompt"], "messages": _dumps(reply.messages),
        "response": reply.response if failure_class is None else (reply.response or None),
        "reasoning": reply.reasoning, "finish_reason": reply.finish_reason, "tool_calls": _dumps(reply.tool_calls),
        "reward": reward, "passed": reward >= 1.0, "expected_answer": ctx.task["expected_answer"],
        "extracted_answer": extracted, "scoring_method": "gym", "scoring_details": _dumps(details),
        "failure_category": category, "error": error, "http_status": None, "n_retries": ctx.n_attempts - 1,
        **_tokens(response),
        "latency_ms": float(latency) if isinstance(latency, int | float) else None,
        "seed_ms": None, "model_ms": None, "verify_ms": None, "request_hash": None,
        "request_seed": params.get("seed") if isinstance(params.get("seed"), int) else None,
        "response_id": response.get("id") if isinstance(response.get("id"), str) else None,
        "metadata": ctx.task["metadata"], "scores": None,
    }


# ---- the import ------------------------------------------------------------------------------------
@dataclass(slots=True)
class _Scan:
    """What the validating pass learns: tasks, keys, the run's benchmark and model, the content hash."""

    digest: Any = field(default_factory=hashlib.sha256)
    task_rows: dict[int, dict[str, Any]] = field(default_factory=dict)  # first row seen per task, mapped
    expected: set[tuple[int, int]] = field(default_factory=set)  # keys the inputs materialized
    done: set[tuple[int, int]] = field(default_factory=set)  # keys with a row in the rollouts file
    failed: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)  # key -> (attempts, last line)
    n_duplicates: int = 0
    n_failed_in_main: int = 0  # rows of releases that kept failures in the rollouts file
    benchmark: str | None = None
    model: str | None = None
    agents: set[str] = field(default_factory=set)
    resolver: TaskResolver | None = None
    unpaired_tasks: dict[int, str] = field(default_factory=dict)  # task -> why it has no nel task id
    unpaired_rows: dict[tuple[str, str], LineSpans] = field(default_factory=dict)  # (file, reason) -> its lines

    def learn(self, row: Mapping[str, Any], task_idx: int, benchmark: str | None, where: tuple[str, int]) -> None:
        """Learn from one row of file ``where[0]`` at line ``where[1]``; a task's first row settles its id."""
        if self.benchmark is None:
            self.benchmark = benchmark or _row_benchmark(row)
        if self.model is None:
            model = _params(row).get("model") or _obj(row.get("response")).get("model")
            self.model = model if isinstance(model, str) and model else None
        agent = row.get("agent_ref")
        if isinstance(agent, dict) and isinstance(agent.get("name"), str):
            self.agents.add(agent["name"])
        if task_idx not in self.task_rows:
            if self.resolver is None:
                self.resolver = TaskResolver(benchmark or self.benchmark)
            self.task_rows[task_idx], reason = _task(row, self.resolver)  # the benchmark is filled in once known
            if reason is not None:
                self.unpaired_tasks[task_idx] = reason
        reason = self.unpaired_tasks.get(task_idx)
        if reason is not None:
            self.unpaired_rows.setdefault((where[0], reason), LineSpans()).add(where[1])

    def unpaired_report(self) -> tuple[UnpairedRows, ...]:
        return tuple(UnpairedRows(file, str(spans), spans.count, reason)
                     for (file, reason), spans in self.unpaired_rows.items())


def _row_benchmark(row: Mapping[str, Any]) -> str | None:
    """The benchmark a row names: ``benchmark``, else an ``eval_type`` nel knows, else its source or agent."""
    if isinstance(row.get("benchmark"), str) and row["benchmark"]:
        return str(row["benchmark"])
    if known_benchmark(row.get("eval_type")):
        return str(row["eval_type"])
    for key in ("task_source", "dataset"):
        if isinstance(row.get(key), str) and row[key]:
            return str(row[key])
    agent = row.get("agent_ref")
    return agent["name"] if isinstance(agent, dict) and isinstance(agent.get("name"), str) else None


def _scan(rollouts: Path, inputs: Path | None, failures: Path | None, benchmark: str | None) -> _Scan:
    scan = _Scan()
    if inputs is not None:
        scan.digest.update(b"inputs\n")
        keys = _Keys(inputs)
        for line_no, row in _rows(inputs, scan.digest):
            key = keys(line_no, row)
            scan.expected.add(key)
            scan.learn(row, key[0], benchmark, (inputs.name, line_no))
    scan.digest.update(b"rollouts\n")
    keys = _Keys(rollouts)
    n_rows = 0
    for line_no, row in _rows(rollouts, scan.digest):
        key = keys(line_no, row)
        n_rows += 1
        if key in scan.done:
            scan.n_duplicates += 1
        elif row.get(FAILURE_CLASS_KEY) is not None:
            scan.n_failed_in_main += 1
        scan.done.add(key)
        scan.learn(row, key[0], benchmark, (rollouts.name, line_no))
    if failures is not None:
        scan.digest.update(b"failures\n")
        keys = _Keys(failures)
        for line_no, row in _rows(failures, scan.digest):
            key = keys(line_no, row)
            attempts = scan.failed.get(key, (0, 0))[0] + 1
            scan.failed[key] = (attempts, line_no)
            scan.learn(row, key[0], benchmark, (failures.name, line_no))
    if n_rows == 0 and not scan.failed:
        raise UsageError(f"{rollouts}: no rollouts in this file (it is empty)")
    return scan


def _identity(scan: _Scan, benchmark: str, model: str | None) -> dict[str, Any]:
    return {"source": "nemo_gym", "benchmark": benchmark, "model_id": model, "content_sha256": scan.digest.hexdigest()}


def already_imported(store: Path, run_id: str, identity: dict[str, Any]) -> bool:
    """Whether run ``run_id`` is complete in ``store`` with this ``identity`` (importing again writes nothing).

    Raises:
        UsageError: the id is taken by other content.
    """
    existing = stored_run(store, run_id)
    if existing is None:
        return False
    old = existing["identity"]
    diffs = identity_diff(orjson.loads(old) if isinstance(old, str) else old, identity)
    if diffs:
        raise UsageError(f"run {run_id} is already in the store with other content ({'; '.join(diffs)}); "
                         "pass another --run-id")
    return bool(existing["status"] == "complete")


def stored_run(store: Path, run_id: str) -> dict[str, Any] | None:
    """The identity and status of run ``run_id`` in ``store`` (live segments included), or None: an import that
    finds its run already there writes nothing again, or refuses other content under the same id."""
    if not store.exists() and not segments_root(store).is_dir():
        return None
    rows = Store(store).dicts("SELECT identity, status FROM runs WHERE run_id = ?", [run_id])
    return rows[0] if rows else None


def id_slug(text: str, default: str = "gym") -> str:
    """``text`` as a piece of a run id: letters, digits, ``_.-``; ``default`` when nothing is left."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or default


def import_gym(
    store: Path,
    rollouts: Path,
    *,
    inputs: Path | None = None,
    failures: Path | None = None,
    run_id: str | None = None,
    benchmark: str | None = None,
    model_id: str | None = None,
) -> GymImportResult:
    """Import a Gym rollouts file (with its materialized inputs and failures sidecar) as one run.

    The run id defaults to ``gym-BENCHMARK-HASH`` of the content and arguments, so importing the
    same files again finds the run and writes nothing. An existing ``run_id`` with other content is
    refused, naming what differs.

    Raises:
        UsageError: a missing or empty file, a line that is not a JSON object (naming file and line),
            a row without a task index, or a ``--run-id`` already used by different content.
    """
    scan = _scan(rollouts, inputs, failures, benchmark)
    bench = benchmark or scan.benchmark or id_slug(rollouts.stem)
    model = model_id or scan.model
    metric = benchmark_metric(bench) or "reward"
    identity = _identity(scan, bench, model)
    ident_hash = identity_hash(identity)
    run_id = run_id or f"gym-{id_slug(bench)}-{ident_hash[:12]}"
    tasks_idx = sorted(scan.task_rows)
    n_repeats = max((r + 1 for _, r in scan.expected | scan.done | set(scan.failed)), default=1)
    missing_tasks = len(set(tasks_idx) - {t for t, _ in scan.done | set(scan.failed)})
    n_failures = len(set(scan.failed) - scan.done) + scan.n_failed_in_main
    result = GymImportResult(
        run_id=run_id, benchmark=bench, model_id=model, n_tasks=len(tasks_idx), n_repeats=n_repeats,
        n_rollouts=len(scan.done) - scan.n_failed_in_main, n_failures=n_failures, n_missing_tasks=missing_tasks,
        n_missing_rollouts=len(scan.expected - scan.done - set(scan.failed)), n_duplicates=scan.n_duplicates,
        already_imported=False, metric=metric, n_unpaired_tasks=len(scan.unpaired_tasks),
        unpaired=scan.unpaired_report(),
    )
    if already_imported(store, run_id, identity):
        return GymImportResult(**{**_as_dict(result), "already_imported": True})
    for task in scan.task_rows.values():
        task["benchmark"] = bench
    _write(store, rollouts, failures, scan, identity, ident_hash, run_id, model, n_repeats, metric)
    return result


def _as_dict(result: GymImportResult) -> dict[str, Any]:
    return {name: getattr(result, name) for name in GymImportResult.__dataclass_fields__}


def _write(store: Path, rollouts: Path, failures: Path | None, scan: _Scan, identity: dict[str, Any],
           ident_hash: str, run_id: str, model: str | None, n_repeats: int, metric: str) -> None:
    """The second pass: the run header and tasks, then every step, through the engine's writer."""
    tasks_idx = sorted(scan.task_rows)
    lo, hi = tasks_idx[0], tasks_idx[-1] + 1
    writer = ShardWriter(store, run_id, 0, roll_every=_BATCH_ROLL)
    writer.begin(
        {"run_id": run_id, "benchmark": identity["benchmark"], "model_id": model, "model_url": None,
         "protocol": "responses", "identity_hash": ident_hash, "identity": identity,
         "config": {"source": "nemo_gym", "rollouts": str(rollouts), "failures": str(failures) if failures else None,
                    "agents": sorted(scan.agents), "primary_metric": metric, "metrics": [metric],
                    "metric_source": "the rollouts' reward (Gym's /verify)", "passed_rule": "reward >= 1",
                    "unpaired_tasks": len(scan.unpaired_tasks)},
         "n_tasks": len(tasks_idx), "n_repeats": n_repeats, "problem_start": lo, "problem_end": hi,
         "total_shards": 1, "created_at": os.path.getmtime(rollouts), "nel_version": __version__},
        {"shard_idx": 0, "total_shards": 1, "problem_start": lo, "problem_end": hi},
        [{"run_id": run_id, "task_idx": i, **scan.task_rows[i]} for i in tasks_idx],
    )
    try:
        mtime = os.path.getmtime(rollouts)
        written: set[tuple[int, int]] = set()
        keys = _Keys(rollouts)
        for line_no, row in _rows(rollouts):
            key = keys(line_no, row)
            if key not in written:  # a duplicated key keeps its first row, as ingest would
                written.add(key)
                attempts = scan.failed.get(key, (0, 0))[0] + 1  # failed attempts before this one succeeded
                writer.append(step_row(row, _StepContext(run_id, *key, scan.task_rows[key[0]], mtime, attempts)))
        if failures is not None:
            keys = _Keys(failures)
            for line_no, row in _rows(failures):
                key = keys(line_no, row)
                attempts, last = scan.failed[key]
                if line_no == last and key not in scan.done:  # the last attempt stands; a later success wins
                    writer.append(step_row(row, _StepContext(run_id, *key, scan.task_rows[key[0]], mtime, attempts)))
    except BaseException:
        writer.finish(RunStatus.FAILED, "import stopped")
        raise
    writer.finish(RunStatus.COMPLETE)
    ingest(store, bulk=True, memory_limit=IMPORT_MEMORY_LIMIT)  # a whole rollouts file: the importers' budget
