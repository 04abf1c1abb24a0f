"""Datasets placed in the Hugging Face cache exactly as ``huggingface_hub`` lays them out, for offline tests.

``place_dataset(hf_home, "org/name", {"data/test.parquet": b"..."})`` writes
``hf_home/hub/datasets--org--name/{blobs/<sha256>, snapshots/<commit>/<path> -> ../../blobs/<sha256>,
refs/<branch>}``: the library's own ``scan_cache_dir`` and ``snapshot_download(local_files_only=True)`` read it
as a real download. ``hub_environment`` points the process (and an already imported ``huggingface_hub``,
which reads its settings once at import) at such a cache, offline.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest


def _commit_of(files: Mapping[str, bytes]) -> str:
    """A deterministic 40-hex commit id for a set of files (as a git commit sha looks)."""
    h = hashlib.sha1()
    for path in sorted(files):
        h.update(path.encode() + b"\0" + hashlib.sha256(files[path]).digest())
    return h.hexdigest()


def place_dataset(hf_home: Path, repo: str, files: Mapping[str, bytes], *, revision: str | None = None,
                  branch: str = "main") -> str:
    """Write ``files`` (path in repo → bytes) as commit ``revision`` (default: derived from the files) of dataset
    ``repo`` in the cache under ``hf_home``, point ``refs/<branch>`` at it, and return the commit sha."""
    commit = revision or _commit_of(files)
    storage = Path(hf_home) / "hub" / ("datasets--" + repo.replace("/", "--"))
    blobs = storage / "blobs"
    snapshot = storage / "snapshots" / commit
    blobs.mkdir(parents=True, exist_ok=True)
    for path, data in files.items():
        etag = hashlib.sha256(data).hexdigest()  # LFS files' etag is their sha256
        (blobs / etag).write_bytes(data)
        link = snapshot / path
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(os.path.relpath(blobs / etag, link.parent))
    (storage / "refs").mkdir(exist_ok=True)
    (storage / "refs" / branch).write_text(commit)
    return commit


def parquet_bytes(rows: Iterable[Mapping[str, Any]], schema: Any = None) -> bytes:
    """Rows as a Parquet file's bytes (``schema``: the upstream arrow schema, when the types matter)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(list(rows), schema=schema)
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


def jsonl_bytes(rows: Iterable[Mapping[str, Any]]) -> bytes:
    import orjson

    return b"".join(orjson.dumps(dict(r)) + b"\n" for r in rows)


def hub_environment(monkeypatch: pytest.MonkeyPatch, root: Path, *, offline: bool = True,
                    endpoint: str | None = None) -> Path:
    """HF_HOME, NEL_DATA_DIR (and HF_HUB_OFFLINE, HF_ENDPOINT) for this test, in the environment and in
    ``huggingface_hub.constants``; returns HF_HOME."""
    from huggingface_hub import constants

    hf_home = root / "hf"
    hf_home.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("NEL_DATA_DIR", str(root / "nel"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1" if offline else "0")
    monkeypatch.setattr(constants, "HF_HOME", str(hf_home))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hf_home / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", offline)
    if endpoint is not None:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    return hf_home
