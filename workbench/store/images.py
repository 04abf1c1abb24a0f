"""Each image once, by hash: a step's inline images leave its row for the shard's ``images/`` folder, then the
``images`` table.

The writer takes the images out of a step before the step is journaled (``ImageSink.take``): each is written to
``images/<sha256>`` in the shard's folder (under a temporary name, then renamed, so a reader or a merge never sees
half of one) *before* the step that references it, so a ``kill -9`` at any moment leaves no reference without its
image. The merge (``ingest``) copies the folder into the ``images`` table in the transaction that records the
shard's tasks and runs, and only then removes the shard's files. A row without ``data:image/`` in its messages
(every text benchmark) costs one substring test.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import duckdb
import orjson

from workbench.images import DATA_URL_MARK, ImageError, externalize, inspect_image

IMAGES_DIR = "images"


class ImageSink:
    """One shard's images folder, and the hashes already in it (each image is written once per shard)."""

    def __init__(self, shard_path: Path) -> None:
        self.folder = shard_path / IMAGES_DIR
        self._written: set[str] = set()

    def take(self, row: Mapping[str, Any]) -> Mapping[str, Any]:
        """``row`` with its inline images replaced by references, each image written to the folder first."""
        messages = row.get("messages")
        if not isinstance(messages, str) or DATA_URL_MARK not in messages:
            return row
        stored, images = externalize(orjson.loads(messages))
        for sha256, data in images.items():
            self._write(sha256, data)
        return {**row, "messages": orjson.dumps(stored).decode()}

    def _write(self, sha256: str, data: bytes) -> None:
        if sha256 in self._written:
            return
        path = self.folder / sha256
        if not path.exists():
            self.folder.mkdir(exist_ok=True)
            tmp = self.folder / f".{sha256}.{os.getpid()}.tmp"
            tmp.write_bytes(data)
            os.replace(tmp, path)
        self._written.add(sha256)


def insert_images(con: duckdb.DuckDBPyConnection, shard_paths: Iterable[Path]) -> int:
    """Copy the images of these shard folders that the store lacks into ``images`` (inside the caller's
    transaction); returns how many were added. A file that is not a whole image (never written by this nel) is
    skipped: its steps keep their references, which say what it was."""
    files: dict[str, Path] = {}
    for shard in shard_paths:
        folder = shard / IMAGES_DIR
        if folder.is_dir():
            files.update({p.name: p for p in folder.iterdir() if not p.name.startswith(".")})
    if not files:
        return 0
    present = {r[0] for r in con.execute("SELECT sha256 FROM images WHERE list_contains(?, sha256)",
                                         [sorted(files)]).fetchall()}
    rows = []
    for sha256, path in sorted(files.items()):
        if sha256 in present:
            continue
        try:
            data = path.read_bytes()
            info = inspect_image(data)
        except (OSError, ImageError):
            continue
        if info.sha256 == sha256:
            rows.append([sha256, info.mime, info.n_bytes, info.width, info.height, data])
    if rows:
        con.executemany("INSERT OR IGNORE INTO images VALUES (?, ?, ?, ?, ?, ?)", rows)
    return len(rows)
