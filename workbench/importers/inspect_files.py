"""Reading inspect_ai logs, one sample at a time: through inspect_ai's own reader when it is installed, else from
the file format.

An ``.eval`` log is a zip: ``header.json`` (``version``, ``status``, ``eval``, ``plan``, ``results``, ``stats``,
``error``), one ``samples/<id>_epoch_<n>.json`` per sample and epoch, ``summaries.json``, ``reductions.json`` and
``_journal/`` (``start.json``: the header of a log still being written). inspect_ai 0.3.2xx compresses entries
with zstd (zip method 93), older releases with deflate; zstd needs the ``zstandard`` package (a dependency of
inspect_ai). A ``.json`` log is one JSON document with the same fields and a ``samples`` array: it is read whole
(``orjson``), so its size bounds the memory an import takes; inspect writes ``.eval`` by default and
``inspect log convert --to eval`` converts a big ``.json`` log.

Both readers yield each sample as the plain JSON object inspect wrote (the reader's ``EvalSample`` dumped in JSON
mode), so the import maps one shape; a sample the reader cannot read is yielded as the reason, named by its entry.
"""

from __future__ import annotations

import os
import struct
import zipfile
import zlib
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from workbench.errors import UsageError

SUPPORTED_VERSION = 2
"""The newest log format ``version`` read here (inspect_ai 0.3.285 writes 2)."""
USE_READER_ENV = "NEL_INSPECT_READER"
"""``0``: read logs from the file format even when inspect_ai is installed (tests compare the two paths)."""
LOG_SUFFIXES = (".eval", ".json")
_ZSTD = 93
_LOCAL_HEADER = struct.Struct("<4s5H3L2H")


@dataclass(frozen=True, slots=True)
class Skipped:
    """A sample entry that could not be read: where it is and why."""

    where: str
    why: str


def use_inspect_reader(choice: bool | None = None) -> bool:
    """Whether inspect_ai's reader is used: ``choice``, else ``$NEL_INSPECT_READER`` (``0``/``1``), else whether
    inspect_ai is installed."""
    if choice is not None:
        return choice
    env = os.environ.get(USE_READER_ENV)
    if env is not None and env.strip() in ("0", "1"):
        return env.strip() == "1"
    try:
        import inspect_ai.log  # noqa: F401
    except ImportError:
        return False
    return True


def find_logs(path: Path) -> list[Path]:
    """``path`` itself, or every ``.eval``/``.json`` log under the directory ``path`` (recursively), sorted.

    Raises:
        UsageError: no such file or directory, or a directory without logs.
    """
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise UsageError(f"{path}: no such file or directory")
    found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in LOG_SUFFIXES
                   and not p.name.startswith(".") and p.name != "logs.json")
    if not found:
        raise UsageError(f"{path}: no inspect_ai logs here (no .eval or .json files in it or below it)")
    return found


def _check_header(path: Path, header: Any) -> dict[str, Any]:
    if not isinstance(header, dict) or not isinstance(header.get("eval"), dict) \
            or not isinstance(header.get("version"), int):
        raise UsageError(f"{path}: not an inspect_ai log (no 'version' and 'eval' in its header)")
    if header["version"] > SUPPORTED_VERSION:
        raise UsageError(f"{path}: inspect_ai log format version {header['version']}; supported: versions 1 to "
                         f"{SUPPORTED_VERSION} (inspect_ai up to 0.3.285)")
    return header


class LogFile:
    """One log: its header (every field but ``samples``) and its samples, streamed."""

    def __init__(self, path: Path, *, use_reader: bool | None = None) -> None:
        self.path = path
        self.use_reader = use_inspect_reader(use_reader)
        self.is_zip = zipfile.is_zipfile(path)
        if path.suffix == ".eval" and not self.is_zip:
            raise UsageError(f"{path}: not an inspect_ai .eval log (not a zip archive)")
        self.header = _check_header(path, self._read_header())

    # ---- the header --------------------------------------------------------------------------------
    def _read_header(self) -> Any:
        if self.is_zip:
            return self._zip_header()
        try:
            doc = orjson.loads(self.path.read_bytes())
        except orjson.JSONDecodeError:
            raise UsageError(f"{self.path}: not an inspect_ai log (neither a zip archive nor JSON)") from None
        if isinstance(doc, dict):
            self._doc = doc
            return {k: v for k, v in doc.items() if k != "samples"}
        return doc

    def _zip_header(self) -> Any:
        try:
            with zipfile.ZipFile(self.path) as zf:
                names = set(zf.namelist())
                name = "header.json" if "header.json" in names else "_journal/start.json"
                if name not in names:
                    raise UsageError(f"{self.path}: not an inspect_ai log (a zip without header.json or "
                                     "_journal/start.json)")
                info = zf.getinfo(name)
                assert zf.fp is not None
                _, data = _read_entry(zf.fp, info.header_offset, info.compress_size, info.file_size,
                                      info.compress_type, info.CRC)
                return orjson.loads(data)
        except (zipfile.BadZipFile, orjson.JSONDecodeError, OSError, EOFError, zlib.error) as exc:
            raise UsageError(f"{self.path}: not a readable inspect_ai log (its header: {exc})") from None

    # ---- the samples -------------------------------------------------------------------------------
    def samples(self) -> Iterator[dict[str, Any] | Skipped]:
        """Every sample × epoch, in the log's order, as inspect wrote it; a damaged one as ``Skipped``."""
        if self.use_reader:
            yield from self._reader_samples()
        elif self.is_zip:
            yield from self._zip_samples(set())
        else:
            yield from self._json_samples()

    def _json_samples(self) -> Iterator[dict[str, Any] | Skipped]:
        doc = getattr(self, "_doc", None)
        if doc is None:
            doc = orjson.loads(self.path.read_bytes())
        for n, sample in enumerate(doc.get("samples") or []):
            yield sample if isinstance(sample, dict) else Skipped(f"{self.path.name} samples[{n}]", "not an object")

    def _zip_samples(self, done: set[tuple[Any, Any]]) -> Iterator[dict[str, Any] | Skipped]:
        try:
            entries = _sample_entries(self.path)
        except (zipfile.BadZipFile, OSError) as exc:
            yield Skipped(self.path.name, f"unreadable zip ({exc})")
            return
        with open(self.path, "rb") as fp:
            for entry in zip(*entries, strict=True):
                name, data = "?", b""
                try:
                    name, data = _read_entry(fp, *entry)
                    sample = orjson.loads(data)
                except (zipfile.BadZipFile, orjson.JSONDecodeError, OSError, EOFError, ValueError, zlib.error) as exc:
                    yield Skipped(f"{self.path.name}:{name}", f"damaged entry ({type(exc).__name__}: {str(exc)[:120]})")
                    continue
                if not isinstance(sample, dict):
                    yield Skipped(f"{self.path.name}:{name}", "not a JSON object")
                elif (sample.get("id"), sample.get("epoch")) not in done:
                    yield sample

    def _reader_samples(self) -> Iterator[dict[str, Any] | Skipped]:
        """inspect_ai's ``read_eval_log_samples``; where it stops at a damaged entry, the file format goes on
        (skipping what the reader gave), so one bad sample costs that sample only."""
        from inspect_ai.log import read_eval_log_samples

        done: set[tuple[Any, Any]] = set()
        try:
            for sample in read_eval_log_samples(str(self.path), all_samples_required=False):
                done.add((sample.id, sample.epoch))
                yield sample.model_dump(mode="json", exclude_none=True)
        except Exception:
            if not self.is_zip:
                raise UsageError(f"{self.path}: inspect_ai could not read this log's samples") from None
            yield from self._zip_samples(done)


def _sample_entries(path: Path) -> tuple[array[int], ...]:
    """Where each ``samples/*.json`` entry lies, in the archive's order: (header offset, compressed size, size,
    method, CRC) as five arrays of integers. ``zipfile`` builds an object per entry (about 600 bytes each: 60 MB
    for a 100,000-sample log), kept only while this runs; the arrays hold 40 bytes an entry for the import."""
    columns: tuple[array[int], ...] = tuple(array("q") for _ in range(5))
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            if info.filename.startswith("samples/") and info.filename.endswith(".json"):
                for column, value in zip(columns, (info.header_offset, info.compress_size, info.file_size,
                                                   info.compress_type, info.CRC), strict=True):
                    column.append(value)
    return columns


def _read_entry(fp: BinaryIO | Any, offset: int, compressed: int, size: int, method: int,
                crc: int) -> tuple[str, bytes]:
    """An entry's name and bytes, read at its local header: stored, deflated, or zstd (inspect_ai's own,
    through ``zstandard``); its CRC checked."""
    fp.seek(offset)
    fields = _LOCAL_HEADER.unpack(fp.read(_LOCAL_HEADER.size))
    if fields[0] != b"PK\x03\x04":
        raise zipfile.BadZipFile(f"bad local header at byte {offset}")
    name = fp.read(fields[9]).decode("utf-8", "replace")
    fp.seek(fields[10], os.SEEK_CUR)
    raw = fp.read(compressed)
    if len(raw) != compressed:
        raise EOFError(f"{name} is cut short")
    if method == zipfile.ZIP_STORED:
        data = raw
    elif method == zipfile.ZIP_DEFLATED:
        data = zlib.decompress(raw, -15)
    elif method == _ZSTD:
        try:
            import zstandard
        except ImportError:
            raise UsageError(f"{name}: its entries are zstd-compressed (inspect_ai 0.3.2xx writes them so); "
                             "reading them needs the zstandard package: pip install 'nel-workbench[inspect]'") from None
        with zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True) as reader:
            data = reader.read()
    else:
        raise zipfile.BadZipFile(f"{name}: compression method {method} is not one inspect_ai writes")
    if len(data) != size:
        raise EOFError(f"{name}: {len(data)} of {size} bytes")
    if zlib.crc32(data) != crc:
        raise zipfile.BadZipFile(f"{name}: CRC mismatch")
    return name, bytes(data)
