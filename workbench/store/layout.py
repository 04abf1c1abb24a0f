"""Where a store keeps its files.

A store is a DuckDB file (``nel.duckdb``) plus a sibling segments directory
(``nel.duckdb.segments/``) where running shards write: per run and shard, a
``run.json`` header, a ``shard.json`` status, ``tasks.parquet``, an append-only
journal ``journal-NNNNNN.jsonl`` (one line per completed step, written as the
step completes: a ``kill -9`` loses nothing) and rolled, immutable
``steps-NNNNNN.parquet`` segments (written to a temporary name, then renamed).
Ingest (``nel eval merge``) copies segments into the DuckDB tables.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

DEFAULT_STORE_NAME = "nel.duckdb"


def resolve_store_path(path: str | Path) -> Path:
    """A store is named by its DuckDB file or by the directory that holds ``nel.duckdb``."""
    p = Path(path).expanduser()
    if p.is_dir() and not p.name.endswith(".segments"):
        return p / DEFAULT_STORE_NAME
    return p


def segments_root(store: Path) -> Path:
    return store.with_name(store.name + ".segments")


@dataclass(frozen=True, slots=True)
class ShardDir:
    """The files of one shard of one run."""

    path: Path

    @property
    def run_json(self) -> Path:
        return self.path / "run.json"

    @property
    def shard_json(self) -> Path:
        return self.path / "shard.json"

    def journals(self) -> list[Path]:
        return sorted(self.path.glob("journal-*.jsonl"))

    def step_segments(self) -> list[Path]:
        return sorted(self.path.glob("steps-*.parquet"))

    def next_seq(self) -> int:
        seqs = [int(p.stem.split("-")[1]) for p in (*self.journals(), *self.step_segments())]
        return max(seqs, default=0) + 1


def shard_dir(store: Path, run_id: str, shard_idx: int) -> ShardDir:
    return ShardDir(segments_root(store) / run_id / f"shard-{shard_idx:04d}")


def all_shard_dirs(store: Path, run_ids: Collection[str] | None = None) -> list[ShardDir]:
    """Every shard directory of ``store``, or only those of ``run_ids``."""
    root = segments_root(store)
    runs = sorted(_entries(root)) if run_ids is None else [root / r for r in run_ids]
    # A merge removes a finished run's folder while readers list them: one gone meanwhile is simply not there.
    return [ShardDir(p) for run in runs for p in sorted(_entries(run)) if p.name.startswith("shard-") and p.is_dir()]


def _entries(folder: Path) -> list[Path]:
    try:
        return [Path(e.path) for e in os.scandir(folder)]
    except (FileNotFoundError, NotADirectoryError):
        return []
