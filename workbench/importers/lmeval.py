"""Import lm-evaluation-harness ``--log_samples`` output into the store: one run per task.

A samples line is one document under one filter: ``doc``, ``arguments`` (the prompt: a chat history as JSON, or
text), ``resps`` (the model's answers, one per repeat), ``filtered_resps`` and each metric's value. Every document
becomes one step per repeat; the line of the task's first filter gives the answer and extraction, and every
``metric,filter`` pair lm-eval scored the document on goes to ``steps.scores`` (the first metric under the first
filter is the primary: ``reward`` and ``passed``). lm-eval scores a document, not a repeat, so each repeat carries
the document's scores: the mean over steps is lm-eval's own accuracy.

The samples file is read twice, line by line (bounded memory): a first pass hashes the content (the run id and
identity, so a re-import writes nothing) and learns each document's scores under every filter (a few bytes per
document: ``_Scan``); the second derives each document's task id and writes its steps, ingesting shard by shard under
``IMPORT_MEMORY_LIMIT``. A damaged line is skipped and named (``file:line``); the rest imports. A line without
``doc_id`` (or without ``doc``) is still a sample lm-eval scored: it is imported, unpaired, numbered after the
task's own documents, so the pass rate stays lm-eval's accuracy.

Task ids are nel's own where the document is a problem of a benchmark nel knows (``TaskIndex``), else
``lmeval-`` and a hash of the document: see ``docs/lm-eval-import.md``.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
from array import array
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from math import isnan
from pathlib import Path
from typing import Any

import orjson

from workbench import __version__
from workbench.engine.identity import identity_hash
from workbench.environments.question_index import QuestionIndex
from workbench.errors import UsageError
from workbench.gym.importer import already_imported, id_slug, scrub
from workbench.gym.pairing import benchmark_metric, known_benchmark
from workbench.importers.lmeval_files import TaskOutput, find_outputs
from workbench.importers.sampling import sampling_identity
from workbench.model.failures import classify_answer
from workbench.store.ingest import IMPORT_MEMORY_LIMIT, ingest
from workbench.store.writer import ShardWriter
from workbench.types import RunStatus

UNPAIRED_PREFIX = "lmeval-"
"""Ids of documents nel does not know start with it; nel's own ids are bare hex digests, so the two never meet."""
_BATCH_ROLL = 1024  # the engine's own: a journal of wide steps rolls within the roller's 64 MB
_SHARD_DOCS = 8192
MAX_DOC_ID = 1 << 22
"""lm-eval numbers a task's documents from 0; the import keeps a few bytes per id up to the largest (bounded)."""
_SHOWN_SKIPS = 12
_SECRET_ARG = re.compile(r"(?i)(api[_-]?key|token|secret|passw|authoriz)")


# ---- task ids --------------------------------------------------------------------------------------
class TaskIndex:
    """nel's task ids for one task's documents, by the rule every importer shares
    (``workbench.environments.question_index``): the document's own question field (the benchmark's
    ``input_field``: gsm8k's ``question``) equal to a problem's question, normalised, else the problem's question
    found inside the prompt lm-eval sent; the target field settles questions the benchmark holds twice.
    ``failure`` is the first reason a document did not pair, ``reason`` the last document's."""

    def __init__(self, benchmark: str | None) -> None:
        self._index = QuestionIndex(benchmark)
        self.failure: str | None = None
        self.reason: str | None = None

    def task_id(self, doc: Mapping[str, Any], arguments: Any = None) -> str | None:
        """The id of the problem ``doc`` is; ``arguments`` (the request lm-eval sent) is searched for the question
        only when the document has no field of that name."""
        index = self._index
        if not index.ready():
            self.failure = self.reason = index.failure
            return None
        question = doc.get(index.question_field) if index.question_field else None
        expected = doc.get(index.target_field) if index.target_field else None
        prompt = _prompt(_messages(arguments)) if not isinstance(question, str) and arguments is not None else None
        match = index.find(prompt, question=question, expected=expected)
        self.reason = match.reason
        if match.task_id is None and self.failure is None:
            self.failure = match.reason
        return match.task_id


def doc_hash_id(doc: Any) -> str:
    return UNPAIRED_PREFIX + hashlib.sha256(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


# ---- reading ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class LmEvalImportResult:
    """What importing one task did; ``already_imported`` when the store held this exact run."""

    run_id: str
    task: str
    benchmark: str
    model_id: str | None
    metric: str
    lm_eval_metric: str
    reported: float | None
    """lm-eval's own value of the primary metric, from its results file."""
    n_tasks: int
    n_repeats: int
    n_steps: int
    n_unpaired_tasks: int
    unpaired_reason: str | None
    skipped: tuple[str, ...]
    """``file:line: why`` of each damaged line (the first few), with ``n_skipped`` counting all."""
    n_skipped: int
    already_imported: bool
    unpaired_reasons: tuple[tuple[str, int], ...] = ()
    """Why documents are unpaired, with how many each reason covers (``unpaired_reason`` says it in one line)."""


def _lines(path: Path, digest: Any = None) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """``(line number, object)``, or ``(line number, why it is damaged)``, for every non-blank line."""
    with open(path, "rb") as fh:
        for line_no, line in enumerate(fh, 1):
            if digest is not None:
                digest.update(line)
            if not line.strip():
                continue
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError:
                yield line_no, "not JSON"
                continue
            if not isinstance(row, dict):
                yield line_no, "not a JSON object"
            elif not isinstance(row.get("resps"), list):
                yield line_no, "no resps: not a sample lm-eval's --log_samples writes"
            elif (doc_id := _doc_id(row)) is not None and not 0 <= doc_id < MAX_DOC_ID:
                yield line_no, f"doc_id {doc_id} out of range (0 to {MAX_DOC_ID - 1:,})"
            else:
                yield line_no, row


def _doc_id(row: Mapping[str, Any]) -> int | None:
    """lm-eval's number of the line's document; ``None`` when the line has none."""
    doc_id = row.get("doc_id")
    return doc_id if isinstance(doc_id, int) and not isinstance(doc_id, bool) else None


NO_ID = "no doc_id: numbered after lm-eval's own documents"
NO_DOC = "no doc: its id is a hash of its prompt and target"


def _content_id(row: Mapping[str, Any]) -> str:
    """The id of a line's document by its content: the whole document, else (no ``doc``) what was asked and the
    target. It joins a document's lines under every filter when they carry no ``doc_id``."""
    doc = row.get("doc")
    if isinstance(doc, dict):
        return doc_hash_id(doc)
    return doc_hash_id({"arguments": row.get("arguments"), "target": row.get("target")})


def _score(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    return float(value) if isinstance(value, int | float) else None


_NAN = float("nan")


def _grown(size: int, doc_id: int) -> int:
    """An array's new length to hold ``doc_id``: doubled (appends stay cheap), never past ``MAX_DOC_ID``."""
    return min(MAX_DOC_ID, max(doc_id + 1, 2 * size))


@dataclass(slots=True)
class _Scan:
    """What the first pass learns, kept in arrays indexed by ``doc_id`` rather than a dict per document.

    100,000 documents cost a few MB here; dicts of small objects held across the pass cost ~140 MB of RSS
    (they pin the allocator's arenas that every parsed line passes through). Task ids are not kept: the second
    pass derives them again from the document, as cheaply as looking them up.
    """

    digest: Any = field(default_factory=hashlib.sha256)
    seen: bytearray = field(default_factory=bytearray)
    """1 at each ``doc_id`` whose line of the primary filter was read."""
    scores: dict[str, array[float]] = field(default_factory=dict)
    """``"metric,filter"`` (in the order first seen) -> the value of each ``doc_id``, NaN where it has none."""
    n_tasks: int = 0
    n_unpaired: int = 0
    shard_docs: dict[int, int] = field(default_factory=dict)
    """Documents in each range of ``_SHARD_DOCS`` ids."""
    n_repeats: int = 1
    skipped: list[str] = field(default_factory=list)
    n_skipped: int = 0
    last_id: int = -1
    """The largest ``doc_id`` of any line: documents without one are numbered after it."""
    extra: dict[str, int] = field(default_factory=dict)
    """The content id of each document without a ``doc_id`` -> its number after ``last_id`` (from 1)."""
    extra_docs: dict[int, bool] = field(default_factory=dict)
    """Those numbers read under the primary filter -> whether the line had no ``doc``."""
    extra_scores: dict[str, dict[int, float]] = field(default_factory=dict)
    reasons: dict[str, int] = field(default_factory=dict)

    def skip(self, where: str) -> None:
        self.n_skipped += 1
        if len(self.skipped) < _SHOWN_SKIPS:
            self.skipped.append(where)

    def has(self, doc_id: int) -> bool:
        return doc_id < len(self.seen) and self.seen[doc_id] == 1

    def add_doc(self, doc_id: int, unpaired: bool) -> None:
        if doc_id >= len(self.seen):
            self.seen.extend(bytes(_grown(len(self.seen), doc_id) - len(self.seen)))
        self.seen[doc_id] = 1
        self.n_tasks += 1
        self.n_unpaired += unpaired
        self.shard_docs[doc_id // _SHARD_DOCS] = self.shard_docs.get(doc_id // _SHARD_DOCS, 0) + 1

    def add_score(self, key: str, doc_id: int, value: float) -> None:
        values = self.scores.get(key)
        if values is None:
            values = self.scores[key] = array("d")
        if doc_id >= len(values):
            values.extend(itertools.repeat(_NAN, _grown(len(values), doc_id) - len(values)))
        values[doc_id] = value

    def doc_scores(self, doc_id: int) -> dict[str, float]:
        """The document's value of each ``metric,filter`` it was scored on."""
        got = {}
        for key, values in self.scores.items():
            if doc_id < len(values) and not isnan(values[doc_id]):
                got[key] = values[doc_id]
        return got

    def doc_range(self) -> tuple[int, int]:
        return self.seen.find(1), self.seen.rfind(1) + 1

    def extra_id(self, row: Mapping[str, Any]) -> int | None:
        """The ``task_idx`` of a document without ``doc_id`` (``None``: past ``MAX_DOC_ID``), once the scan ended."""
        number = self.extra.get(_content_id(row))
        idx = None if number is None else self.last_id + number
        return idx if idx is not None and idx < MAX_DOC_ID else None

    def place_extras(self, samples: Path) -> None:
        """Number the documents without ``doc_id`` after lm-eval's own, now that the largest is known."""
        for number, no_doc in self.extra_docs.items():
            idx = self.last_id + number
            if idx >= MAX_DOC_ID:
                self.skip(f"{samples.name}: a document without doc_id past {MAX_DOC_ID - 1:,} documents")
                continue
            self.add_doc(idx, unpaired=True)
            reason = NO_DOC if no_doc else NO_ID
            self.reasons[reason] = self.reasons.get(reason, 0) + 1
            for key, values in self.extra_scores.items():
                if number in values:
                    self.add_score(key, idx, values[number])


def _scan(out: TaskOutput, samples: Path, primary_filter: str, index: TaskIndex) -> _Scan:
    scan = _Scan()
    for line_no, row in _lines(samples, scan.digest):
        if isinstance(row, str):
            scan.skip(f"{samples.name}:{line_no}: {row}")
            continue
        doc_id, filt = _doc_id(row), str(row.get("filter", "none"))
        scores = {f"{name},{filt}": value for name in row.get("metrics") or []
                  if isinstance(name, str) and (value := _score(row.get(name))) is not None}
        if doc_id is None:  # lm-eval numbers every document: a line without a number is kept, numbered later
            number = scan.extra.setdefault(_content_id(row), len(scan.extra) + 1)
            for key, value in scores.items():
                scan.extra_scores.setdefault(key, {})[number] = value
            if filt == primary_filter and number not in scan.extra_docs:
                scan.extra_docs[number] = not isinstance(row.get("doc"), dict)
                scan.n_repeats = max(scan.n_repeats, _repeats(row))
            continue
        scan.last_id = max(scan.last_id, doc_id)
        for key, value in scores.items():
            scan.add_score(key, doc_id, value)
        if filt == primary_filter and not scan.has(doc_id):
            doc = row.get("doc")
            task_id = index.task_id(doc, row.get("arguments")) if isinstance(doc, dict) else None
            scan.add_doc(doc_id, unpaired=task_id is None)
            if not isinstance(doc, dict):
                scan.reasons[NO_DOC] = scan.reasons.get(NO_DOC, 0) + 1
            elif task_id is None:
                reason = index.reason or "not a problem of the benchmark"
                scan.reasons[reason] = scan.reasons.get(reason, 0) + 1
            scan.n_repeats = max(scan.n_repeats, _repeats(row))
    scan.place_extras(samples)
    if not scan.n_tasks:
        raise UsageError(f"{samples}: no sample of filter {primary_filter!r} (the task's first): not the samples "
                         f"lm-eval's --log_samples writes for task {out.task!r}")
    return scan


def _repeats(row: Mapping[str, Any]) -> int:
    first = row["resps"][0] if row["resps"] else []
    return len(first) if isinstance(first, list) else 1


# ---- mapping a sample ------------------------------------------------------------------------------
def _messages(arguments: Any) -> list[dict[str, Any]]:
    """The request lm-eval sent: ``arguments`` as the saved file holds it (``gen_args_0.arg_0``) or in memory."""
    first: Any = None
    if isinstance(arguments, dict):
        gen = arguments.get("gen_args_0")
        first = gen.get("arg_0") if isinstance(gen, dict) else None
    elif isinstance(arguments, list | tuple) and arguments and isinstance(arguments[0], list | tuple) and arguments[0]:
        first = arguments[0][0]
        if isinstance(first, tuple) and len(first) == 1:  # a JsonChatStr, or the one-tuple a copy made of it
            first = first[0]
    if isinstance(first, str):
        try:
            chat = orjson.loads(first)
        except orjson.JSONDecodeError:
            chat = None
        if isinstance(chat, list) and all(isinstance(m, dict) and "role" in m for m in chat):
            return chat
        return [{"role": "user", "content": first}]
    return []


def _prompt(messages: list[dict[str, Any]]) -> str:
    users = [m["content"] for m in messages if m.get("role") == "user" and isinstance(m.get("content"), str)]
    return users[-1] if users else ""


def _text(value: Any) -> str | None:
    while isinstance(value, list):
        value = value[0] if value else None
    return None if value is None else str(value)


def _dumps(value: Any) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


def _doc_metadata(row: Mapping[str, Any]) -> dict[str, Any]:
    """The document's slicing fields (its short scalars: subject, level...) and lm-eval's ids of it (``doc_id``
    is ``None`` for a line that had none).

    Long text (the question, the worked answer) is already the task's prompt and expected answer: kept once.
    """
    doc = {k: v for k, v in scrub(_obj(row.get("doc"))).items()
           if isinstance(v, bool | int | float) or (isinstance(v, str) and len(v) <= 200)}
    return {"doc_id": _doc_id(row), **doc, "doc_hash": row.get("doc_hash")}


def _steps(row: Mapping[str, Any], run_id: str, task: dict[str, Any], scores: Mapping[str, float],
           primary: str, started: float) -> Iterator[dict[str, Any]]:
    """The steps of one document: one per repeat, each with the document's scores."""
    messages = _messages(row.get("arguments"))
    first = row["resps"][0] if row["resps"] else []
    answers = [_text(a) for a in first] if isinstance(first, list) else [_text(first)]
    extracted = _text(row.get("filtered_resps"))
    reward = scores.get(primary, 0.0)
    own_filter = "," + str(row.get("filter", "none"))
    entries: dict[str, dict[str, Any]] = {
        k: {"reward": v, "passed": v >= 1.0, "extracted_answer": extracted if k.endswith(own_filter) else None,
            "method": "lm-eval", "details": {}}
        for k, v in scores.items()}
    details = {"method": "lm-eval", "metric": primary, "filter": row.get("filter")}
    for repeat, answer in enumerate(answers or [None]):
        yield {
            "run_id": run_id, "task_idx": task["task_idx"], "repeat": repeat, "task_id": task["task_id"],
            "shard_idx": 0, "started_at": started, "prompt": task["prompt"], "messages": _dumps(messages),
            "response": answer, "reasoning": None, "finish_reason": None, "tool_calls": None,
            "reward": reward, "passed": reward >= 1.0, "expected_answer": task["expected_answer"],
            "extracted_answer": extracted, "scoring_method": "lm-eval", "scoring_details": _dumps(details),
            "failure_category": classify_answer(answer or "", reward, extracted),
            "error": None, "http_status": None, "n_retries": 0,
            "prompt_tokens": None, "completion_tokens": None, "total_tokens": None, "reasoning_tokens": None,
            "latency_ms": None, "seed_ms": None, "model_ms": None, "verify_ms": None, "request_hash": None,
            "request_seed": None, "response_id": None, "metadata": _dumps({"doc_id": _doc_id(row)}),
            "scores": _dumps(entries),
        }


# ---- the import ------------------------------------------------------------------------------------
def _model_args(value: Any) -> Any:
    """lm-eval's ``model_args`` without credentials (a ``k=v,k=v`` string or a mapping)."""
    if isinstance(value, str):
        return ",".join(p for p in value.split(",") if not _SECRET_ARG.search(p.split("=", 1)[0]))
    return scrub(value)


_GENERATION = {"temperature": "temperature", "top_p": "top_p", "max_gen_toks": "max_tokens", "max_tokens": "max_tokens",
               "until": "stop", "seed": "seed", "frequency_penalty": "frequency_penalty",
               "presence_penalty": "presence_penalty"}
"""lm-eval's ``generation_kwargs`` → nel's sampling parameters (what a native run's identity names them, and what
the exporters read back from an identity)."""


def generation_identity(kwargs: Any) -> dict[str, Any]:
    """What of a task's ``generation_kwargs`` changes answers, for the run's identity: the sampling parameters nel
    names (``max_gen_toks`` as ``max_tokens``, ``until`` as ``stop``), the others (``do_sample``, ``top_k``...)
    under ``generate_other``."""
    return sampling_identity(kwargs, _GENERATION, lists=("until",))


def _reason_line(reasons: Mapping[str, int]) -> str:
    """Why documents are unpaired, in one line: the reason, or each reason with its count."""
    if len(reasons) == 1:
        return next(iter(reasons))
    return "; ".join(f"{n}: {why}" for why, n in reasons.items()) or "not problems of the benchmark"


def _benchmark(out: TaskOutput, benchmark: str | None) -> str:
    """``--benchmark``, else the task's name or its dataset's when nel knows it (``openai/gsm8k``), else the task."""
    if benchmark:
        return benchmark
    dataset = out.config.get("dataset_path")
    for name in (out.task, dataset.rsplit("/", 1)[-1] if isinstance(dataset, str) else None):
        if known_benchmark(name):
            return str(name)
    return out.task




def import_lmeval(store: Path, directory: Path, *, run_id: str | None = None,
                  benchmark: str | None = None) -> list[LmEvalImportResult]:
    """Import every task of the lm-eval output in ``directory`` (one run each).

    Run ids default to ``lmeval-TASK-HASH`` of the samples' content, so importing the same output again writes
    nothing. ``run_id`` names the run of a single task (``RUN_ID-TASK`` for each when there are several).

    Raises:
        UsageError: not lm-eval output, a results file of an unsupported version, a task without samples (it
            was run without --log_samples), or a ``run_id`` already used by different content.
    """
    outputs = find_outputs(directory)
    missing = [o.task for o in outputs if o.samples_file is None]
    if missing:
        raise UsageError(f"{outputs[0].results_file}: no samples_<task>_<date>.jsonl for task(s) "
                         f"{', '.join(missing)} next to it (run lm_eval with --log_samples)")
    results = []
    for out in outputs:
        name = run_id if run_id and len(outputs) == 1 else (f"{run_id}-{id_slug(out.task, 'task')}" if run_id else None)
        results.append(_import_task(store, out, name, benchmark))
    return results


def _import_task(store: Path, out: TaskOutput, run_id: str | None, benchmark: str | None) -> LmEvalImportResult:
    samples = out.samples_file
    assert samples is not None
    primary_key = out.primary_key()
    primary_filter = primary_key.split(",", 1)[1] if "," in primary_key else "none"
    bench = _benchmark(out, benchmark)
    index = TaskIndex(bench)
    scan = _scan(out, samples, primary_filter, index)
    metric = benchmark_metric(bench) or primary_key
    model = out.results.get("model_name") or None
    identity = {"source": "lm_eval", "task": out.task, "benchmark": bench, "model_id": model,
                **generation_identity(out.config.get("generation_kwargs")),
                "content_sha256": scan.digest.hexdigest()}
    ident_hash = identity_hash(identity)
    run_id = run_id or f"lmeval-{id_slug(out.task, 'task')}-{ident_hash[:12]}"
    n_unpaired = scan.n_unpaired
    reported = _score(out.reported.get(primary_key))
    result = LmEvalImportResult(
        run_id=run_id, task=out.task, benchmark=bench, model_id=model, metric=metric, lm_eval_metric=primary_key,
        reported=reported, n_tasks=scan.n_tasks, n_repeats=scan.n_repeats,
        n_steps=0, n_unpaired_tasks=n_unpaired, unpaired_reason=_reason_line(scan.reasons) if n_unpaired else None,
        skipped=tuple(scan.skipped), n_skipped=scan.n_skipped, already_imported=False,
        unpaired_reasons=tuple(scan.reasons.items()))
    if already_imported(store, run_id, identity):
        return _replace(result, already_imported=True)
    n_steps = _write(store, out, samples, scan, index, identity, ident_hash, run_id, model, metric, primary_key)
    return _replace(result, n_steps=n_steps)


def _replace(result: LmEvalImportResult, **changes: Any) -> LmEvalImportResult:
    return LmEvalImportResult(**{**{n: getattr(result, n) for n in LmEvalImportResult.__dataclass_fields__},
                                 **changes})


def _shards(scan: _Scan) -> dict[int, tuple[int, int, int]]:
    """Documents in ranges of ``_SHARD_DOCS`` ids, the empty ranges left out: ``range -> (shard, docs, start)``.

    Each shard is ingested as soon as its last document is written, so the store reads the tasks of one shard at
    a time (100,000 tasks at once exceed its memory budget).
    """
    return {k: (idx, scan.shard_docs[k], k * _SHARD_DOCS) for idx, k in enumerate(sorted(scan.shard_docs))}


def _write(store: Path, out: TaskOutput, samples: Path, scan: _Scan, index: TaskIndex, identity: dict[str, Any],
           ident_hash: str, run_id: str, model: str | None, metric: str, primary_key: str) -> int:
    """The second pass: the run header, then each document's task and steps as its line is read."""
    lo, hi = scan.doc_range()
    conf = out.config
    metrics = [metric, *(k for k in scan.scores if k != metric)]
    shards = _shards(scan)
    header = {
        "run_id": run_id, "benchmark": identity["benchmark"], "model_id": model, "model_url": None,
        "protocol": "chat_completions", "identity_hash": ident_hash, "identity": identity,
        "config": {"source": "lm_eval", "lm_eval_version": out.results.get("lm_eval_version"),
                   "results_file": str(out.results_file), "samples_file": str(samples), "task": out.task,
                   "model": _obj(out.results.get("config")).get("model"),
                   "model_args": _model_args(_obj(out.results.get("config")).get("model_args")),
                   "generation_kwargs": scrub(conf.get("generation_kwargs")),
                   "num_fewshot": conf.get("num_fewshot"), "task_config": scrub(conf),
                   "lm_eval_results": out.reported, "primary_metric": metric, "metrics": metrics,
                   "lm_eval_primary_metric": primary_key,
                   "metric_source": f"lm-eval's {primary_key} of each document", "passed_rule": "reward >= 1",
                   "unpaired_tasks": scan.n_unpaired,
                   "skipped_lines": scan.n_skipped},
        "n_tasks": scan.n_tasks, "n_repeats": scan.n_repeats, "problem_start": lo, "problem_end": hi,
        "total_shards": len(shards), "created_at": os.path.getmtime(samples), "nel_version": __version__}
    primary_filter = primary_key.split(",", 1)[1] if "," in primary_key else "none"
    written = bytearray(len(scan.seen))
    left = {k: n for k, (_, n, _) in shards.items()}
    writers: dict[int, ShardWriter] = {}
    mtime = os.path.getmtime(samples)
    n_written = 0
    try:
        for _, row in _lines(samples):
            if isinstance(row, str) or str(row.get("filter", "none")) != primary_filter:
                continue
            doc_id = _doc_id(row)
            if doc_id is None:
                doc_id = scan.extra_id(row)
                if doc_id is None:  # past MAX_DOC_ID: named by the scan
                    continue
            if not scan.has(doc_id):
                raise UsageError(f"{samples}: changed while it was imported (document {doc_id} is new); "
                                 "import it again")
            if written[doc_id]:
                continue
            written[doc_id] = 1
            k = doc_id // _SHARD_DOCS
            writer = writers.get(k)
            if writer is None:
                idx, _, start = shards[k]
                writer = writers[k] = ShardWriter(store, run_id, idx, roll_every=_BATCH_ROLL)
                writer.begin(header, {"shard_idx": idx, "total_shards": len(shards), "problem_start": start,
                                      "problem_end": start + _SHARD_DOCS})
            messages = _messages(row.get("arguments"))
            doc = row.get("doc")
            paired = index.task_id(doc, row.get("arguments")) if isinstance(doc, dict) and _doc_id(row) is not None \
                else None
            task_id = paired or _content_id(row)
            task = {"run_id": run_id, "task_idx": doc_id, "task_id": task_id,
                    "benchmark": identity["benchmark"], "prompt": _prompt(messages),
                    "expected_answer": _text(row.get("target")), "metadata": _dumps(_doc_metadata(row))}
            writer.add_task(task)
            for step in _steps(row, run_id, task, scan.doc_scores(doc_id), primary_key, mtime):
                writer.append(step)
            left[k] -= 1
            if left[k] == 0:  # the shard's last document: into the store now, its files gone
                writers.pop(k).finish(RunStatus.COMPLETE)
                n_written += writer.n_written
                ingest(store, bulk=True, memory_limit=IMPORT_MEMORY_LIMIT)
        if writers:  # the file changed between the passes: what was written stands, the rest is not there
            raise UsageError(f"{samples}: changed while it was imported (documents of {len(writers)} shard(s) "
                             "are missing); import it again")
    except BaseException:
        for writer in writers.values():
            writer.finish(RunStatus.FAILED, "import stopped")
        raise
    return n_written


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
