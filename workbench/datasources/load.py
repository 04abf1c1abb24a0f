"""A benchmark's rows from wherever its dataset is named: a local file, or a split of a hub dataset (frozen
by benchmark name, or read from the Hugging Face cache), with what identifies them.

The order for a hub dataset never contacts the hub when it need not: the frozen form, else the cached snapshot,
else (online only) the hub. A run therefore works offline on anything pulled or cached, and the commit sha
the rows came from is part of what it reports.
"""

from __future__ import annotations

import bisect
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.datasources.frozen import Convert, Manifest, find_frozen, freeze, read_frozen
from workbench.datasources.hub import Snapshot, cached_split, fetch_split, is_cached
from workbench.datasources.problems import DataNotPresent
from workbench.datasources.rows import read_rows
from workbench.datasources.uri import HubRef
from workbench.errors import UsageError


@dataclass(slots=True)
class Loaded:
    """Rows, the SHA-256 that identifies them, and (for hub data) the source and commit they came from."""

    rows: list[dict[str, Any]]
    sha256: str
    source: str
    revision: str | None = None
    manifest: Manifest | None = None
    _starts: list[int] = field(default_factory=list)
    _names: list[str] = field(default_factory=list)
    _lines: list[int] | None = None

    def where(self, idx: int) -> str:
        """Row ``idx`` (0-based) as a user finds it: its file and row number (line number, where it has lines)."""
        if self._lines is not None:
            return f"{self.source}:{self._lines[idx]}"
        if not self._names:
            return f"{self.source}: row {idx + 1}"
        k = bisect.bisect_right(self._starts, idx) - 1
        return f"{self._names[k]}: row {idx - self._starts[k] + 1}"

    def identity(self) -> dict[str, str] | None:
        """What a run records of a hub source (its URI and commit), ``None`` for a local file."""
        return None if self.revision is None else {"source": self.source, "revision": self.revision}

    def convert(self, convert: Convert) -> None:
        """Replace the rows by their conversions (dropping those it maps to ``None``); rows are then numbered as
        converted, since a dropped row has no place."""
        self.rows = [r for r in map(convert, self.rows) if r is not None]
        self._lines, self._starts, self._names = None, [], []

    def require(self, fields: tuple[str, ...], what: str = "") -> None:
        """Every row carries every field; else one line naming the field and the row."""
        for idx, row in enumerate(self.rows):
            for name in fields:
                if name not in row:
                    raise UsageError(f"{self.where(idx)}: row has no field {name!r}{what}")


def load_local(path: Path) -> Loaded:
    data = read_rows(path)
    return Loaded(data.rows, data.sha256, str(path), _lines=data.lines)


def _snapshot(ref: HubRef, benchmark: str | None) -> Snapshot:
    """The cached snapshot when there is one (no network), else the hub's (online only)."""
    return cached_split(ref, benchmark=benchmark) if is_cached(ref) else fetch_split(ref, benchmark=benchmark)


def _from_manifest(manifest: Manifest, ref: HubRef) -> Loaded:
    return Loaded(read_frozen(manifest), manifest.sha256, ref.uri(), manifest.revision, manifest,
                  [0], [str(manifest.data_path)])


def load_hub(ref: HubRef, *, benchmark: str | None = None, convert: Convert | None = None, converter: str = "",
             license: str = "") -> Loaded:
    """The rows of ``ref``'s split, converted. With ``benchmark`` (a built-in), they are frozen under its name on
    first load and read from there after; without (a BYOB file), read from the cached upstream files."""
    if benchmark is not None:
        frozen = find_frozen(benchmark, ref)
        if frozen is not None and frozen.converter == converter:
            return _from_manifest(frozen, ref)
        try:
            snapshot = _snapshot(ref, benchmark)
        except DataNotPresent:
            if frozen is None:
                raise
            return _from_manifest(frozen, ref)  # frozen by an older converter, and nothing to convert anew
        manifest, frozen_rows = freeze(benchmark, snapshot, convert, license=license, converter=converter)
        return Loaded(frozen_rows, manifest.sha256, ref.uri(), manifest.revision, manifest, [0],
                      [str(manifest.data_path)])
    snapshot = _snapshot(ref, None)
    rows: list[dict[str, Any]] = []
    starts, names = [], []
    digest = hashlib.sha256()
    for rel, path in zip(snapshot.files, snapshot.paths(), strict=True):
        data = read_rows(path)
        starts.append(len(rows))
        names.append(f"{ref.repo}/{rel}")
        digest.update(data.sha256.encode())
        rows += data.rows if convert is None else [r for r in map(convert, data.rows) if r is not None]
    return Loaded(rows, digest.hexdigest(), ref.uri(), snapshot.ref.revision, None, starts, names)


@dataclass(frozen=True, slots=True)
class Pulled:
    manifest: Manifest
    fresh: bool
    """Written now (``False``: the frozen form was already up to date)."""


def pull(benchmark: str, ref: HubRef, *, convert: Convert | None, converter: str, license: str) -> Pulled:
    """Fetch ``ref`` (the hub resolves a branch to its current commit) and freeze it; idempotent."""
    if ref.pinned:
        frozen = find_frozen(benchmark, ref)
        if frozen is not None and frozen.converter == converter:
            return Pulled(frozen, False)
    snapshot = fetch_split(ref, benchmark=benchmark)
    frozen = find_frozen(benchmark, snapshot.ref)
    if frozen is not None and frozen.converter == converter:
        return Pulled(frozen, False)
    manifest, _ = freeze(benchmark, snapshot, convert, license=license, converter=converter)
    return Pulled(manifest, True)


def presence(benchmark: str, ref: HubRef) -> tuple[bool, Manifest | None]:
    """Is the data here (frozen, or in the Hugging Face cache), and its manifest if frozen: reads no data."""
    frozen = find_frozen(benchmark, ref)
    return frozen is not None or is_cached(ref), frozen
