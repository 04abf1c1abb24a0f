"""Import inspect_ai logs (``.eval``, ``.json``) into the store: one run per log, one step per sample × epoch.

A log is read twice, one sample at a time (bounded memory): the first pass hashes the file (the run id and
identity, so a re-import writes nothing), gives each sample its ``task_idx`` (in inspect's own sample order, by
id, whichever reader met the samples in whatever order) and task id, and counts its epochs; the second writes
the steps (``workbench.importers.inspect_sample``), in shards of ``_SHARD_TASKS`` tasks, each ingested once its
last step is written. An ``.eval`` read from the file format is read task by task (the first pass notes where each
step's entry lies), so one shard is open at a time; inspect's reader and a ``.json`` log give the samples in the
log's order (epoch by epoch), so no shard finishes before the last epoch, and an ingest every ``_INGEST_EVERY``
steps keeps the last epoch from ingesting the whole log at once.
A sample entry that cannot be read is skipped and named; the rest imports.

Task ids are nel's own where the sample's input holds a question of a benchmark nel knows (``QuestionIndex``:
found inside inspect's template, normalised), else ``inspect-`` and a hash of the input and target: see
``docs/inspect-import.md``.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import sys
from array import array
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import orjson

from workbench import __version__
from workbench.engine.identity import identity_hash
from workbench.environments.question_index import QuestionIndex, normalise
from workbench.gym.importer import already_imported, id_slug, scrub, stored_run
from workbench.gym.pairing import benchmark_metric, known_benchmark
from workbench.importers.inspect_files import LogFile, Skipped, open_logs
from workbench.importers.inspect_sample import input_text, step_row, target_text
from workbench.importers.sampling import sampling_identity
from workbench.store.ingest import IMPORT_MEMORY_LIMIT, ingest
from workbench.store.writer import ShardWriter
from workbench.types import RunStatus

UNPAIRED_PREFIX = "inspect-"
"""Ids of samples nel does not know start with it; nel's own ids are bare hex digests, so the two never meet."""
_BATCH_ROLL = 1024
_SHARD_TASKS = 2048
_INGEST_EVERY = 8192
_INGEST_MEMORY = "96MB"
"""The DuckDB budget of the ingests of an ``.eval`` read from the file format (task by task, a shard at a time),
under the importers' ``IMPORT_MEMORY_LIMIT`` (128 MB): DuckDB fills its budget before it evicts, so the budget is
most of an ingest's peak (a 100,000-sample log of 25,000 tasks: ~255 MB of RSS, against ~295 MB at 128 MB;
tests/perf/bench_import_inspect.py). 64 MB cannot checkpoint the tasks of a 100,000-task log (a fatal DuckDB
error); 80 MB can, with little to spare. Read in the log's order (inspect's reader, a ``.json`` log), every shard
stays open to the last epoch and each ingest reads the tasks of them all: that keeps ``IMPORT_MEMORY_LIMIT``."""
_MALLOC_ARENAS = 2
_M_ARENA_MAX = -8  # glibc's mallopt parameter, as MALLOC_ARENA_MAX sets it
_SHOWN_SKIPS = 12
_EPOCH_BITS = 20
_EPOCH_MASK = (1 << _EPOCH_BITS) - 1
_SHORT = 200


@dataclass(frozen=True, slots=True)
class InspectImportResult:
    """What importing one log did; ``already_imported`` when the store held this exact run."""

    run_id: str
    log: Path
    task: str
    benchmark: str
    model_id: str | None
    status: str
    """inspect's status of the log: ``success``, ``error``, ``cancelled``, ``started``; ``truncated`` for an
    ``.eval`` cut short (``damage`` says where)."""
    metric: str
    scorer: str | None
    reported: float | None
    """inspect's own headline value (its first scorer's ``accuracy``, or first metric), from the log's results."""
    n_tasks: int
    n_repeats: int
    n_steps: int
    n_unpaired_tasks: int
    unpaired_reasons: tuple[tuple[str, int], ...]
    """Why samples are unpaired, with how many tasks each reason covers."""
    skipped: tuple[str, ...]
    n_skipped: int
    n_duplicates: int
    already_imported: bool
    damage: str | None = None
    """Why the log file is incomplete (a truncated ``.eval``: its whole samples are imported), else ``None``."""
    not_logs: tuple[str, ...] = ()
    """The directory's files that are not inspect logs (``eval-set.json``, ``logs.json``), skipped, each
    ``relative/path: why``: on the first log's result of a directory import."""


@dataclass(slots=True)
class _Scan:
    keys: dict[Any, int] = field(default_factory=dict)  # sample key -> task_idx
    paired: dict[str, Any] = field(default_factory=dict)  # nel task id -> the sample key that has it
    tasks: list[str] = field(default_factory=list)  # task_idx -> task id
    reasons: list[str | None] = field(default_factory=list)  # task_idx -> why unpaired (until settled)
    fallback: list[str | None] = field(default_factory=list)  # task_idx -> its unpaired id, for a paired task
    epochs: dict[int, int] = field(default_factory=dict)  # task_idx -> its epochs, as bits (1 << epoch)
    n_repeats: int = 1
    n_duplicates: int = 0
    unpaired: dict[str, int] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    n_skipped: int = 0
    scorer: str | None = None
    places: array[int] = field(default_factory=lambda: array("q"))  # each step's place in the log, as read
    place_keys: array[int] = field(default_factory=lambda: array("q"))  # its task_idx and epoch (_place_key)
    order: array[int] = field(default_factory=lambda: array("q"))
    """Set by ``_settle`` (which empties the two arrays above): the steps' places in task order, each task's
    epochs in order, as ``_write`` reads an ``.eval`` from the file format."""

    def has(self, idx: int, epoch: int) -> bool:
        return bool(self.epochs.get(idx, 0) >> epoch & 1)

    def skip(self, item: Skipped) -> None:
        self.n_skipped += 1
        if len(self.skipped) < _SHOWN_SKIPS:
            self.skipped.append(f"{item.where}: {item.why}")


def _key(sample: Mapping[str, Any], position: int) -> Any:
    """What makes two epochs the same sample: its id, else its input, else (nothing to go on) its position."""
    if isinstance(sample.get("id"), str | int) and not isinstance(sample.get("id"), bool):
        return ("id", sample["id"])
    text = input_text(sample)
    return ("input", normalise(text)) if text else ("position", position)


def _unpaired_id(sample: Mapping[str, Any], text: str | None, key: Any) -> str:
    content = [normalise(text), target_text(sample)] if text else [repr(key)]
    return UNPAIRED_PREFIX + hashlib.sha256(orjson.dumps(content)).hexdigest()[:16]


def _pairing(sample: Mapping[str, Any], key: Any, index: QuestionIndex, benchmark: str) -> tuple[str, str | None]:
    """The sample's task id, and why it is unpaired (``None``: it is nel's own)."""
    text = input_text(sample)
    if not text:
        reason = "the sample has no input" if key[0] == "id" else "the sample has neither id nor input"
        return _unpaired_id(sample, text, key), reason
    match = index.find(text, expected=target_text(sample))
    return match.task_id or _unpaired_id(sample, text, key), match.reason


def _task_row(sample: Mapping[str, Any], task_id: str, benchmark: str) -> dict[str, Any]:
    """The ``tasks`` row of a sample: made again when its first step is written, so the import holds no prompt."""
    meta = {k: v for k, v in scrub(_obj(sample.get("metadata"))).items()
            if isinstance(v, bool | int | float) or (isinstance(v, str) and len(v) <= _SHORT)}
    return {"task_id": task_id, "benchmark": benchmark, "prompt": input_text(sample) or "",
            "expected_answer": target_text(sample),
            "metadata": orjson.dumps({"inspect_id": sample.get("id"), **meta}).decode()}


def _scan(log: LogFile, benchmark: str) -> _Scan:
    scan = _Scan()
    index = QuestionIndex(benchmark)
    for item in log.samples():
        if isinstance(item, Skipped):
            scan.skip(item)
            continue
        position, sample = item
        key = _key(sample, position)
        idx = scan.keys.get(key)
        if idx is None:
            idx = scan.keys[key] = len(scan.keys)
            task_id, reason = _pairing(sample, key, index, benchmark)
            scan.tasks.append(task_id)
            scan.reasons.append(reason)
            scan.fallback.append(None if reason is not None else _unpaired_id(sample, input_text(sample), key))
        epoch = _epoch(sample)
        if scan.has(idx, epoch):
            scan.n_duplicates += 1
            continue
        scan.epochs[idx] = scan.epochs.get(idx, 0) | (1 << epoch)
        scan.places.append(position)
        scan.place_keys.append(_place_key(idx, epoch))
        scan.n_repeats = max(scan.n_repeats, epoch)
        if scan.scorer is None and isinstance(sample.get("scores"), dict) and sample["scores"]:
            scan.scorer = str(next(iter(sample["scores"])))
    _settle(scan)
    return scan


def _sort_key(key: Any) -> tuple[int, str]:
    """inspect's own sample order (``sort_samples``: ids as strings, numbers zero-filled), then inputs."""
    kind, value = key
    text = value if isinstance(value, str) else str(value).zfill(20)
    return {"id": 0, "input": 1}.get(kind, 2), text


def _settle(scan: _Scan) -> None:
    """Number the tasks in inspect's sample order, not in the order a reader met them (inspect's reader and the
    archive's order differ: samples are written as they finish), so both readers store the same rows; and give
    a question two samples share to the first of them in that order."""
    order = sorted(scan.keys, key=_sort_key)
    old_idx = [scan.keys[key] for key in order]
    new_idx = {old: new for new, old in enumerate(old_idx)}
    tasks, reasons, fallback = scan.tasks, scan.reasons, scan.fallback
    scan.keys = {key: n for n, key in enumerate(order)}
    scan.epochs = {new_idx[old]: bits for old, bits in scan.epochs.items()}
    renumbered = array("q", (_place_key(new_idx[key >> _EPOCH_BITS], key & _EPOCH_MASK) for key in scan.place_keys))
    scan.order = array("q", (scan.places[n] for n in sorted(range(len(renumbered)), key=renumbered.__getitem__)))
    scan.places, scan.place_keys = array("q"), array("q")
    scan.tasks, scan.paired, scan.unpaired, scan.reasons, scan.fallback = [], {}, {}, [], []
    for key, old in zip(order, old_idx, strict=True):
        task_id, reason = tasks[old], reasons[old]
        if reason is None and scan.paired.setdefault(task_id, key) != key:
            # a run holds each nel task once: a second sample with the same question keeps an id of its own
            other = scan.paired[task_id][1]
            reason = f"its question is also that of sample {other!r} (nel's task is that sample's)"
            task_id = fallback[old] or task_id
        scan.tasks.append(task_id)
        if reason is not None:
            scan.unpaired[reason] = scan.unpaired.get(reason, 0) + 1


def _place_key(idx: int, epoch: int) -> int:
    """A step's task and epoch as one integer that sorts by task, then epoch."""
    return idx << _EPOCH_BITS | min(epoch, _EPOCH_MASK)


def _epoch(sample: Mapping[str, Any]) -> int:
    epoch = sample.get("epoch")
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) and epoch >= 1 else 1


def _file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _benchmark(spec: Mapping[str, Any], benchmark: str | None) -> str:
    """``--benchmark``, else the task's or dataset's name when nel knows it (``inspect_evals/gsm8k``), else the task."""
    if benchmark:
        return benchmark
    task = str(spec.get("task") or "inspect")
    dataset = _obj(spec.get("dataset"))
    for name in (task, dataset.get("name"), dataset.get("location")):
        if isinstance(name, str):
            for candidate in (name, name.rsplit("/", 1)[-1]):
                if known_benchmark(candidate):
                    return candidate
    return task.rsplit("/", 1)[-1]


def _reported(header: Mapping[str, Any]) -> tuple[str | None, float | None]:
    """inspect's headline: the first scorer and its ``accuracy`` (or its first metric)."""
    scores = _obj(header.get("results")).get("scores") or []
    first = _obj(scores[0]) if scores else {}
    metrics = _obj(first.get("metrics"))
    metric = _obj(metrics.get("accuracy") or next(iter(metrics.values()), None))
    value = metric.get("value")
    return first.get("name"), float(value) if isinstance(value, int | float) else None


def _url(value: Any) -> Any:
    """A base URL without credentials (user:password@, query)."""
    if not isinstance(value, str):
        return value
    parts = urlsplit(value)
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


_GENERATE = {"temperature": "temperature", "top_p": "top_p", "max_tokens": "max_tokens", "seed": "seed",
             "stop_seqs": "stop", "frequency_penalty": "frequency_penalty", "presence_penalty": "presence_penalty",
             "system_message": "system_prompt"}
"""inspect's ``GenerateConfig`` fields → nel's sampling parameters (what a native run's identity names them, and
what the exporters read back from an identity)."""
_NOT_IDENTITY = frozenset({"max_retries", "timeout", "attempt_timeout", "max_connections", "max_tool_output",
                           "cache_prompt", "batch", "cache", "extra_headers", "max_subprocesses", "max_sandboxes"})
"""``GenerateConfig`` fields that change how inspect called the model, not what it answered."""


def _generate_config(header: Mapping[str, Any]) -> dict[str, Any]:
    """The eval's generate config: the plan's, with the model's own settings over it (as inspect applies them)."""
    plan, spec = _obj(header.get("plan")), _obj(header.get("eval"))
    return {**_obj(plan.get("config")), **_obj(spec.get("model_generate_config"))}


def generate_identity(config: Mapping[str, Any]) -> dict[str, Any]:
    """What of inspect's generate config changes answers, for the run's identity: the sampling parameters nel
    names (``stop_seqs`` as ``stop``, ``system_message`` as ``system_prompt``) and the others under
    ``generate_other``; unset fields and transport settings (connections, retries, timeouts) left out."""
    return sampling_identity(config, _GENERATE, lists=("stop_seqs",), ignore=_NOT_IDENTITY)


def _config(log: LogFile, scan: _Scan, metric: str, reported: float | None) -> dict[str, Any]:
    spec = _obj(log.header.get("eval"))
    plan = _obj(log.header.get("plan"))
    error = _obj(log.header.get("error")).get("message")
    return {
        "source": "inspect_ai", "log_file": str(log.path), "format_version": log.header.get("version"),
        "inspect_version": _obj(spec.get("packages")).get("inspect_ai"), "status": log.header.get("status"),
        "error": error, "eval_id": spec.get("eval_id"), "inspect_run_id": spec.get("run_id"),
        "task": spec.get("task"), "task_version": spec.get("task_version"), "task_args": scrub(spec.get("task_args")),
        "model": spec.get("model"), "model_base_url": _url(spec.get("model_base_url")),
        "model_args": scrub(spec.get("model_args")),
        "generate_config": scrub(_generate_config(log.header)), "damage": log.damage,
        "dataset": {k: _obj(spec.get("dataset")).get(k) for k in ("name", "location", "samples", "shuffled")},
        "eval_config": scrub(spec.get("config")), "solver": [s.get("solver") for s in plan.get("steps") or []
                                                             if isinstance(s, dict)],
        "inspect_results": _obj(log.header.get("results")).get("scores"), "inspect_reported": reported,
        "primary_metric": metric, "metrics": [metric], "inspect_primary_scorer": scan.scorer,
        "metric_source": f"inspect's {scan.scorer} score of each sample and epoch (C/P/I/N as 1/0.5/0/0)",
        "passed_rule": "reward >= 1", "unpaired_tasks": sum(scan.unpaired.values()),
        "skipped_samples": scan.n_skipped, "duplicate_samples": scan.n_duplicates,
    }


def import_inspect(store: Path, path: Path, *, run_id: str | None = None, benchmark: str | None = None,
                   use_reader: bool | None = None) -> list[InspectImportResult]:
    """Import the inspect_ai log ``path``, or every log under the directory ``path`` (one run each).

    Run ids default to ``inspect-TASK-HASH`` of the log file's bytes, so importing it again writes nothing.
    ``run_id`` names the run of a single log (``RUN_ID-<file stem>`` for each when there are several).
    ``use_reader``: inspect_ai's reader (``True``), the file format (``False``), or as installed (``None``;
    ``$NEL_INSPECT_READER`` decides).

    A directory's files that are not inspect logs (an eval set's ``eval-set.json``, ``logs.json``) are skipped
    and named in the first result's ``not_logs``.

    Raises:
        UsageError: a file that is not an inspect_ai log, a directory without any, a newer format version than
            supported, or a ``run_id`` already used by other content.
    """
    logs, not_logs = open_logs(path, use_reader=use_reader)
    results = []
    for log in logs:
        name = run_id if run_id and len(logs) == 1 else (
            f"{run_id}-{id_slug(log.path.stem, 'log')}" if run_id else None)
        results.append(_import_log(store, log, name, benchmark))
    return [replace(results[0], not_logs=not_logs), *results[1:]]


def _import_log(store: Path, log: LogFile, run_id: str | None, benchmark: str | None) -> InspectImportResult:
    spec = _obj(log.header.get("eval"))
    bench = _benchmark(spec, benchmark)
    scan = _scan(log, bench)
    task = str(spec.get("task") or log.path.stem)
    model = spec.get("model") if isinstance(spec.get("model"), str) else None
    scorer, reported = _reported(log.header)
    metric = benchmark_metric(bench) or scan.scorer or scorer or "score"
    identity = {"source": "inspect_ai", "task": task, "benchmark": bench, "model_id": model,
                **generate_identity(_generate_config(log.header)), "content_sha256": _file_hash(log.path)}
    ident_hash = identity_hash(identity)
    run_id = run_id or f"inspect-{id_slug(task.rsplit('/', 1)[-1], 'task')}-{ident_hash[:12]}"
    result = InspectImportResult(
        run_id=run_id, log=log.path, task=task, benchmark=bench, model_id=model,
        status="truncated" if log.damage else str(log.header.get("status")), metric=metric,
        scorer=scan.scorer or scorer, reported=reported,
        n_tasks=len(scan.tasks), n_repeats=scan.n_repeats, n_steps=0, n_unpaired_tasks=sum(scan.unpaired.values()),
        unpaired_reasons=tuple(scan.unpaired.items()), skipped=tuple(scan.skipped), n_skipped=scan.n_skipped,
        n_duplicates=scan.n_duplicates, already_imported=False, damage=log.damage)
    if already_imported(store, run_id, identity) or (stored_run(store, run_id) or {}).get("status") == "incomplete":
        return replace(result, already_imported=True)
    if not scan.tasks:
        return result
    header = {
        "run_id": run_id, "benchmark": bench, "model_id": model, "model_url": _url(spec.get("model_base_url")),
        "protocol": "chat_completions", "identity_hash": ident_hash, "identity": identity,
        "config": _config(log, scan, metric, reported), "n_tasks": len(scan.tasks), "n_repeats": scan.n_repeats,
        "problem_start": 0, "problem_end": len(scan.tasks), "created_at": os.path.getmtime(log.path),
        "nel_version": __version__,
    }
    return replace(result, n_steps=_write(store, log, scan, header, metric))


def _write(store: Path, log: LogFile, scan: _Scan, header: dict[str, Any], metric: str) -> int:
    """The second pass: each sample's steps as it is read, in shards of ``_SHARD_TASKS`` tasks."""
    _fewer_malloc_arenas()
    n_shards = (len(scan.tasks) + _SHARD_TASKS - 1) // _SHARD_TASKS
    header = {**header, "total_shards": n_shards}
    run_id = header["run_id"]
    status = str(log.header.get("status"))
    final = RunStatus.COMPLETE if status == "success" and not log.damage else RunStatus.INTERRUPTED
    why = None if status == "success" else f"inspect_ai log status {status}: " + str(
        _obj(log.header.get("error")).get("message") or "the eval did not finish")
    if log.damage:
        why = f"the inspect_ai log is {log.damage}" + (f"; {why}" if why else "")
    left = [0] * n_shards
    for idx, bits in scan.epochs.items():
        left[idx // _SHARD_TASKS] += bin(bits).count("1")
    writers: dict[int, ShardWriter] = {}
    written: dict[int, int] = {}  # task_idx -> epochs written, as bits
    mtime = os.path.getmtime(log.path)
    n_written = n_steps = 0
    # in the log's order every shard stays open to the last epoch and each ingest reads them all: the
    # importers' budget (96 MB cannot hold the tasks of 13 open shards)
    memory = _INGEST_MEMORY if log.seekable else IMPORT_MEMORY_LIMIT

    def open_shard(k: int) -> ShardWriter:
        writer = writers[k] = ShardWriter(store, run_id, k, roll_every=_BATCH_ROLL)
        start = k * _SHARD_TASKS
        end = min(start + _SHARD_TASKS, len(scan.tasks))
        writer.begin(header, {"shard_idx": k, "total_shards": n_shards, "problem_start": start, "problem_end": end})
        return writer

    try:
        # an .eval read from the file format: task by task, so each shard is written, ingested and closed in
        # turn (inspect writes epoch by epoch: in the archive's order every shard would stay open to the end)
        for item in log.samples_at(scan.order) if log.seekable else log.samples():
            if isinstance(item, Skipped):
                continue
            position, sample = item
            found = scan.keys.get(_key(sample, position))
            epoch = _epoch(sample)
            if found is None or written.get(found, 0) >> epoch & 1 or not scan.has(found, epoch):
                continue
            idx = found
            k = idx // _SHARD_TASKS
            writer = writers.get(k) or open_shard(k)
            task = _task_row(sample, scan.tasks[idx], str(header["benchmark"]))
            if idx not in written:
                writer.add_task({"run_id": run_id, "task_idx": idx, **task})
            written[idx] = written.get(idx, 0) | (1 << epoch)
            writer.append(step_row(sample, run_id=run_id, task=task, task_idx=idx, primary=metric, started=mtime))
            left[k] -= 1
            n_steps += 1
            if left[k] == 0:
                n_written += _close(store, writers.pop(k), final, why, memory)
            elif n_steps % _INGEST_EVERY == 0:  # epoch-major logs finish no shard before their last epoch
                ingest(store, bulk=True, memory_limit=memory)
        for k in sorted(writers):  # steps the second read did not find (the file changed in between)
            n_written += _close(store, writers.pop(k), final if left[k] == 0 else RunStatus.INTERRUPTED,
                                why if left[k] == 0 else f"{left[k]} steps were not found on the second read", memory)
    except BaseException:
        for writer in writers.values():
            writer.finish(RunStatus.FAILED, "import stopped")
        raise
    return n_written


def _fewer_malloc_arenas() -> None:
    """At most ``_MALLOC_ARENAS`` glibc malloc arenas in this process from now on (``MALLOC_ARENA_MAX``, unless it
    is set). glibc gives each thread that allocates an arena of its own, up to eight a core, and keeps what is
    freed there: the threads of DuckDB's ingests and of the journal rollers left ~30 MB of RSS behind, under each
    later ingest (100,000 samples: 261 -> 231 MB, at the same speed). Elsewhere than glibc, nothing."""
    if sys.platform != "linux" or os.environ.get("MALLOC_ARENA_MAX"):
        return
    try:
        mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    except OSError:
        return
    if mallopt is not None:
        mallopt(_M_ARENA_MAX, _MALLOC_ARENAS)


def _close(store: Path, writer: ShardWriter, status: RunStatus, why: str | None, memory: str) -> int:
    writer.finish(status, why)
    ingest(store, bulk=True, memory_limit=memory)
    return writer.n_written


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}



