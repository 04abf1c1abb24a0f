"""The frozen form of a hub benchmark: its converted rows as one JSONL file plus a manifest saying where they
came from (repo, subset, split, the commit sha, each upstream file's size and SHA-256, the licence).

``$NEL_DATA_DIR/benchmarks/<name>/<commit sha>/{data.jsonl,manifest.json}`` (``NEL_DATA_DIR`` defaults to
``~/.cache/nel``). Written by ``nel benchmarks pull`` or on the first load from the Hugging Face cache; a run
reads it without the hub or the upstream files, and its SHA-256 is the data's identity.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from workbench.datasources.hub import Snapshot
from workbench.datasources.rows import read_rows
from workbench.datasources.uri import HubRef
from workbench.errors import UsageError, path_error

DATA_FILE = "data.jsonl"
MANIFEST_FILE = "manifest.json"

Convert = Callable[[dict[str, Any]], dict[str, Any] | None]


def data_dir() -> Path:
    """Where nel keeps frozen datasets: ``$NEL_DATA_DIR``, else ``~/.cache/nel``."""
    return Path(os.environ.get("NEL_DATA_DIR") or "~/.cache/nel").expanduser()


def benchmark_dir(name: str) -> Path:
    return data_dir() / "benchmarks" / name


@dataclass(frozen=True, slots=True)
class UpstreamFile:
    path: str
    size: int
    sha256: str


@dataclass(frozen=True, slots=True)
class Manifest:
    """What a frozen dataset is and where it came from (``manifest.json``)."""

    benchmark: str
    repo: str
    split: str
    subset: str | None
    requested_revision: str
    revision: str
    files: tuple[UpstreamFile, ...]
    rows: int
    size: int
    sha256: str
    license: str
    converter: str
    frozen_at: str

    @property
    def folder(self) -> Path:
        return benchmark_dir(self.benchmark) / self.revision

    @property
    def data_path(self) -> Path:
        return self.folder / DATA_FILE

    def matches(self, ref: HubRef) -> bool:
        """Is this the frozen form of ``ref`` (same repo, subset and split; the revision as asked or resolved)?"""
        return (self.repo, self.subset, self.split) == (ref.repo, ref.subset, ref.split) and \
            ref.revision in (self.revision, self.requested_revision)

    def to_json(self) -> bytes:
        return orjson.dumps(asdict(self), option=orjson.OPT_INDENT_2)

    @classmethod
    def read(cls, path: Path) -> Manifest:
        try:
            raw = orjson.loads(path.read_bytes())
            raw["files"] = tuple(UpstreamFile(**f) for f in raw["files"])
            return cls(**raw)
        except (OSError, orjson.JSONDecodeError, TypeError, KeyError) as exc:
            raise UsageError(f"{path}: not a readable manifest of a frozen dataset ({exc}); delete its folder "
                             "and pull again") from None


def manifests(name: str) -> Iterator[Manifest]:
    """Every frozen form of benchmark ``name``, newest first."""
    found = []
    for path in benchmark_dir(name).glob(f"*/{MANIFEST_FILE}"):
        try:
            found.append((path.stat().st_mtime, Manifest.read(path)))
        except UsageError:
            continue
    yield from (m for _, m in sorted(found, key=lambda item: item[0], reverse=True))


def find_frozen(name: str, ref: HubRef) -> Manifest | None:
    """The newest frozen form of ``ref`` for benchmark ``name`` (a branch: the commit it resolved to when frozen)."""
    return next((m for m in manifests(name) if m.matches(ref)), None)


def freeze(name: str, snapshot: Snapshot, convert: Convert | None, *, license: str, converter: str
           ) -> tuple[Manifest, list[dict[str, Any]]]:
    """Convert the snapshot's rows and write the frozen form (atomically); returns its manifest and rows."""
    rows: list[dict[str, Any]] = []
    upstream = []
    for rel, path in zip(snapshot.files, snapshot.paths(), strict=True):
        data = read_rows(path)
        upstream.append(UpstreamFile(rel, path.stat().st_size, data.sha256))
        for idx, row in enumerate(data.rows):
            try:
                out = row if convert is None else convert(row)
            except Exception as exc:  # a converter that fails on a row names it: the data or the converter is wrong
                raise UsageError(f"benchmark {name!r}: {converter} failed on {rel} row {idx + 1}: "
                                 f"{type(exc).__name__}: {exc}") from None
            if out is not None:
                rows.append(out)
        del data
    body = b"".join(orjson.dumps(r, option=orjson.OPT_APPEND_NEWLINE) for r in rows)
    ref = snapshot.ref
    folder = benchmark_dir(name) / ref.revision
    manifest = Manifest(benchmark=name, repo=ref.repo, split=ref.split, subset=ref.subset,
                        requested_revision=snapshot.requested, revision=ref.revision, files=tuple(upstream),
                        rows=len(rows), size=len(body), sha256=hashlib.sha256(body).hexdigest(), license=license,
                        converter=converter, frozen_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _atomic_write(folder / DATA_FILE, body)
        _atomic_write(folder / MANIFEST_FILE, manifest.to_json())
    except OSError as exc:
        raise path_error(folder, exc, "write the frozen dataset") from None
    return manifest, rows


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_frozen(manifest: Manifest) -> list[dict[str, Any]]:
    """The frozen rows, checked against the manifest's SHA-256 (a damaged file is one line, not wrong data)."""
    path = manifest.data_path
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the frozen dataset ({exc.strerror}); pull it again with "
                         f"`nel benchmarks pull {manifest.benchmark}`") from None
    if hashlib.sha256(data).hexdigest() != manifest.sha256:
        raise UsageError(f"{path}: its SHA-256 differs from its manifest's (damaged or edited); pull it again "
                         f"with `nel benchmarks pull {manifest.benchmark}`")
    return [orjson.loads(line) for line in data.splitlines() if line]
