"""What the segments directory holds right now: runs and shards not yet ingested.

Both ingest (``nel eval merge``) and readers (``open_store``, ``nel sql``) start
from this snapshot, so a live run looks the same to every reader.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from workbench.errors import UsageError
from workbench.store.layout import ShardDir, all_shard_dirs
from workbench.types import RunStatus

FINAL_SHARD_STATUSES = frozenset({RunStatus.COMPLETE, RunStatus.INTERRUPTED, RunStatus.FAILED})


def _ts(value: float | None) -> datetime | None:
    """Naive UTC, as ``steps.started_at`` is: every timestamp in the store is UTC."""
    return None if value is None else datetime.fromtimestamp(value, tz=UTC).replace(tzinfo=None)


def pid_alive(pid: int | None) -> bool:
    """Whether ``pid`` names a live process on this machine (a zombie, dead but not yet reaped, is gone)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError, IndexError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    return True


@dataclass(slots=True)
class LiveShard:
    """One shard directory: its headers and its files."""

    dir: ShardDir
    run: dict[str, Any]
    shard: dict[str, Any]
    journals: list[Path]
    segments: list[Path]

    @property
    def status(self) -> str:
        """The recorded status, with ``running`` turned into ``interrupted`` when the
        writing process is gone (a ``kill -9`` leaves no chance to record it)."""
        status = str(self.shard.get("status", RunStatus.RUNNING))
        if status == RunStatus.RUNNING and self.shard.get("host") == socket.gethostname():
            pid = self.shard.get("pid")
            if isinstance(pid, int) and not pid_alive(pid):
                return RunStatus.INTERRUPTED
        return status

    @property
    def tasks_file(self) -> Path:
        return self.dir.path / "tasks.jsonl"

    def shard_row(self) -> dict[str, Any]:
        s, r = self.shard, self.run
        return {
            "run_id": r["run_id"],
            "shard_idx": s["shard_idx"],
            "total_shards": s["total_shards"],
            "problem_start": s["problem_start"],
            "problem_end": s["problem_end"],
            "status": self.status,
            "started_at": _ts(s.get("started_at")),
            "finished_at": _ts(s.get("finished_at")),
            "n_steps": None,
            "host": s.get("host"),
            "pid": s.get("pid"),
            "error": s.get("error"),
        }


@dataclass(slots=True)
class LiveState:
    shards: list[LiveShard] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.shards

    def run_ids(self) -> list[str]:
        return sorted({s.run["run_id"] for s in self.shards})

    def step_files(self) -> tuple[list[Path], list[Path]]:
        segments = [p for s in self.shards for p in s.segments]
        journals = [p for s in self.shards for p in s.journals]
        return segments, journals

    def task_files(self) -> list[Path]:
        return [s.tasks_file for s in self.shards if s.tasks_file.exists()]

    def run_headers(self) -> dict[str, dict[str, Any]]:
        """One header per run; shards of one run must agree on its identity."""
        headers: dict[str, dict[str, Any]] = {}
        for s in self.shards:
            run_id = s.run["run_id"]
            first = headers.setdefault(run_id, s.run)
            if first["identity_hash"] != s.run["identity_hash"]:
                raise UsageError(
                    f"run {run_id}: shard {s.shard['shard_idx']} was run with a different configuration "
                    f"(identity {s.run['identity_hash'][:12]} vs {first['identity_hash'][:12]}); refusing to merge"
                )
        return headers


def read_json_object(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; None when it is missing, unreadable, or not an object."""
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def scan(store: Path, run_ids: Collection[str] | None = None) -> LiveState:
    """Snapshot the segments directory of ``store`` (only the shards of ``run_ids`` when given).

    Lists files once; a segment that lands after the snapshot is seen next time,
    and a journal rolled away between listing and reading is skipped by readers.
    """
    state = LiveState()
    for d in all_shard_dirs(store, run_ids):
        run = read_json_object(d.run_json)
        shard = read_json_object(d.shard_json)
        if run is None or shard is None:
            continue
        state.shards.append(LiveShard(d, run, shard, d.journals(), d.step_segments()))
    return state


def run_row(header: dict[str, Any], shards: list[LiveShard], known_shard_status: dict[int, str]) -> dict[str, Any]:
    """The ``runs`` row for a live run, its status derived from every shard's status."""
    total = int(header["total_shards"])
    statuses = dict(known_shard_status)
    for s in shards:
        statuses[int(s.shard["shard_idx"])] = s.status
    finished: list[float] = [float(s.shard["finished_at"]) for s in shards if s.shard.get("finished_at")]
    if any(v == RunStatus.RUNNING for v in statuses.values()):
        status = RunStatus.RUNNING
    elif len(statuses) == total and all(v == RunStatus.COMPLETE for v in statuses.values()):
        status = RunStatus.COMPLETE
    elif any(v == RunStatus.FAILED for v in statuses.values()):
        status = RunStatus.FAILED
    else:
        status = RunStatus.INCOMPLETE
    return {
        "run_id": header["run_id"],
        "benchmark": header["benchmark"],
        "model_id": header.get("model_id"),
        "model_url": header.get("model_url"),
        "protocol": header.get("protocol"),
        "identity_hash": header["identity_hash"],
        "identity": orjson.dumps(header["identity"]).decode(),
        "config": orjson.dumps(header.get("config", {})).decode(),
        "n_tasks": header["n_tasks"],
        "n_repeats": header["n_repeats"],
        "problem_start": header["problem_start"],
        "problem_end": header["problem_end"],
        "total_shards": total,
        "status": status,
        "created_at": _ts(header["created_at"]),
        "finished_at": _ts(max(finished)) if status != RunStatus.RUNNING and finished else None,
        "nel_version": header.get("nel_version"),
    }
