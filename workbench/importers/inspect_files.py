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
What inspect's reader refuses (a sample without an ``id``, which its ``EvalSample`` requires) the file format reads,
in ``.eval`` and ``.json`` logs alike, so both paths import the same samples.

An ``.eval`` cut short (a copy interrupted, a disk that filled while inspect wrote) has lost the zip's central
directory: its entries are found by walking their local headers from the start, and the samples whose entries are
whole are imported; the entry the log ends inside is named, and the run is marked incomplete.
"""

from __future__ import annotations

import os
import struct
import zipfile
import zlib
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from workbench.errors import UsageError

SUPPORTED_VERSION = 2
"""The newest log format ``version`` read here (inspect_ai 0.3.285 writes 2)."""
USE_READER_ENV = "NEL_INSPECT_READER"
"""``0``: read logs from the file format even when inspect_ai is installed (tests compare the two paths)."""
READER_MAX_ENTRIES = 20_000
"""Above this many archive entries a ``.eval`` log is read from the file format even when inspect_ai is installed
(unless ``$NEL_INSPECT_READER`` or the caller chose): inspect's reader holds ``zipfile``'s index of the archive and
its own types, 394 MB of peak RSS for 100,000 samples where the file format keeps to 233 MB. Both store the same
steps (tested)."""
LOG_SUFFIXES = (".eval", ".json")
_SHOWN_OTHERS = 5
_ZSTD = 93
_SIGNATURE = b"PK\x03\x04"
_HEADERS = ("header.json", "_journal/start.json")
_LOCAL_HEADER = struct.Struct("<4s5H3L2H")


class NotALog(UsageError):
    """The file is not an inspect_ai log (or one too damaged to read anything from): a directory import skips it
    and names it; a file named on its own is refused with this one line."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path = path
        self.why = why


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
    """``path`` itself, or every ``.eval``/``.json`` file under the directory ``path`` (recursively), sorted: the
    candidates; ``open_logs`` tells the logs among them from other JSON (``eval-set.json``, ``logs.json``).

    Raises:
        UsageError: no such file or directory, or a directory without ``.eval``/``.json`` files.
    """
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise UsageError(f"{path}: no such file or directory")
    found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in LOG_SUFFIXES
                   and not p.name.startswith("."))
    if not found:
        raise UsageError(f"{path}: no inspect_ai logs here (no .eval or .json files in it or below it)")
    return found


def open_logs(path: Path, *, use_reader: bool | None = None) -> tuple[list[LogFile], tuple[str, ...]]:
    """The logs at ``path`` (a log, or a directory searched recursively), and the directory's files that are not
    inspect logs (``relative/path: why``): inspect's ``eval-set.json`` and ``logs.json`` sit beside its logs.

    Raises:
        UsageError: ``path`` is a file that is not an inspect log, a directory holding no log, or a log of a newer
            format version (in a directory too: it is a log this release cannot read, not some other file).
    """
    candidates = find_logs(path)
    if path.is_file():
        return [LogFile(path, use_reader=use_reader)], ()
    logs: list[LogFile] = []
    others: list[str] = []
    for candidate in candidates:
        try:
            logs.append(LogFile(candidate, use_reader=use_reader))
        except NotALog as exc:
            others.append(f"{candidate.relative_to(path).as_posix()}: {exc.why}")
    if not logs:
        names = ", ".join(o.split(": ", 1)[0] for o in others[:_SHOWN_OTHERS])
        more = f" and {len(others) - _SHOWN_OTHERS} more" if len(others) > _SHOWN_OTHERS else ""
        raise UsageError(f"{path}: no inspect_ai logs here ({len(others)} .eval/.json file"
                         f"{'s' if len(others) > 1 else ''} that {'are' if len(others) > 1 else 'is'} not one: "
                         f"{names}{more})")
    return logs, tuple(others)


def _check_header(path: Path, header: Any) -> dict[str, Any]:
    if not isinstance(header, dict) or not isinstance(header.get("eval"), dict) \
            or not isinstance(header.get("version"), int):
        raise NotALog(path, "not an inspect_ai log (no 'version' and 'eval' in its header)")
    if header["version"] > SUPPORTED_VERSION:
        raise UsageError(f"{path}: inspect_ai log format version {header['version']}; supported: versions 1 to "
                         f"{SUPPORTED_VERSION} (inspect_ai up to 0.3.285)")
    return header


class LogFile:
    """One log: its header (every field but ``samples``) and its samples, streamed."""

    def __init__(self, path: Path, *, use_reader: bool | None = None) -> None:
        self.path = path
        chosen = use_reader is not None or os.environ.get(USE_READER_ENV, "").strip() in ("0", "1")
        self.use_reader = use_inspect_reader(use_reader)
        self.is_zip = zipfile.is_zipfile(path)
        self._n_entries = 0
        self.damage: str | None = None
        """Why the log is incomplete as a file (a truncated ``.eval``), or ``None``."""
        self._recovered: _Recovered | None = None
        self._index: tuple[array[int], ...] | None = None
        if not self.is_zip and _starts_like_zip(path):
            self._recovered = _walk_local_headers(path)
            self.is_zip, self.use_reader = True, False  # inspect's reader needs the directory that is gone
            self.damage = self._recovered.damage
        elif path.suffix == ".eval" and not self.is_zip:
            raise NotALog(path, "not an inspect_ai .eval log (not a zip archive)")
        self.header = _check_header(path, self._read_header())
        if self.use_reader and not chosen and self._n_entries > READER_MAX_ENTRIES:
            self.use_reader = False  # a large log: the file format's bounded memory (READER_MAX_ENTRIES)

    # ---- the header --------------------------------------------------------------------------------
    def _read_header(self) -> Any:
        if self._recovered is not None:
            return self._recovered_header(self._recovered)
        if self.is_zip:
            return self._zip_header()
        try:
            doc = orjson.loads(self.path.read_bytes())
        except orjson.JSONDecodeError:
            raise NotALog(self.path, "not an inspect_ai log (neither a zip archive nor JSON)") from None
        if isinstance(doc, dict):
            self._doc = doc
            return {k: v for k, v in doc.items() if k != "samples"}
        return doc

    def _zip_header(self) -> Any:
        try:
            with zipfile.ZipFile(self.path) as zf:
                names = set(zf.namelist())
                self._n_entries = len(names)
                name = "header.json" if "header.json" in names else "_journal/start.json"
                if name not in names:
                    raise NotALog(self.path, "not an inspect_ai log (a zip without header.json or "
                                  "_journal/start.json)")
                info = zf.getinfo(name)
                assert zf.fp is not None
                _, data = _read_entry(zf.fp, info.header_offset, info.compress_size, info.file_size,
                                      info.compress_type, info.CRC)
                return orjson.loads(data)
        except (zipfile.BadZipFile, orjson.JSONDecodeError, OSError, EOFError, zlib.error) as exc:
            raise NotALog(self.path, f"not a readable inspect_ai log (its header: {exc})") from None

    def _recovered_header(self, recovered: _Recovered) -> Any:
        name = next((n for n in _HEADERS if n in recovered.headers), None)
        if name is None:
            raise NotALog(self.path, f"a truncated or damaged inspect_ai .eval log ({recovered.damage}; neither "
                          "header.json nor _journal/start.json survives, so nothing says what the log is)")
        try:
            with open(self.path, "rb") as fp:
                _, data = _read_entry(fp, *recovered.headers[name])
            return orjson.loads(data)
        except (zipfile.BadZipFile, orjson.JSONDecodeError, OSError, EOFError, ValueError, zlib.error) as exc:
            raise NotALog(self.path, f"a truncated or damaged inspect_ai .eval log ({recovered.damage}; "
                          f"its {name}: {exc})") from None

    # ---- the samples -------------------------------------------------------------------------------
    def samples(self) -> Iterator[tuple[int, dict[str, Any]] | Skipped]:
        """Every sample × epoch, in the log's order, as inspect wrote it, with its place in the file (the entry's
        index among the archive's samples, or in the ``samples`` array: the same through either reader for what
        only the file format reads); a damaged one as ``Skipped``."""
        if self.use_reader:
            yield from self._reader_samples()
        elif self.is_zip:
            yield from self._zip_samples(set())
        else:
            yield from self._json_samples(set())

    def _json_samples(self, done: set[tuple[Any, Any]]) -> Iterator[tuple[int, dict[str, Any]] | Skipped]:
        doc = getattr(self, "_doc", None)
        if doc is None:
            doc = orjson.loads(self.path.read_bytes())
        for n, sample in enumerate(doc.get("samples") or []):
            if not isinstance(sample, dict):
                yield Skipped(f"{self.path.name} samples[{n}]", "not an object")
            elif (sample.get("id"), sample.get("epoch")) not in done:
                yield n, sample

    def _zip_samples(self, done: set[tuple[Any, Any]]) -> Iterator[tuple[int, dict[str, Any]] | Skipped]:
        try:
            entries, lost = self._entries()
        except (zipfile.BadZipFile, OSError) as exc:
            yield Skipped(self.path.name, f"unreadable zip ({exc})")
            return
        for item in self._read_entries(entries, range(len(entries[0]))):
            if isinstance(item, Skipped) or (item[1].get("id"), item[1].get("epoch")) not in done:
                yield item
        for where, why in lost:
            yield Skipped(f"{self.path.name}:{where}", why)

    @property
    def seekable(self) -> bool:
        """Whether ``samples_at`` reads this log: an ``.eval`` read from the file format (its entries are found
        by their offsets, in any order)."""
        return self.is_zip and not self.use_reader

    def samples_at(self, positions: Iterable[int]) -> Iterator[tuple[int, dict[str, Any]] | Skipped]:
        """The samples at ``positions`` (as ``samples`` numbers them), in that order: the import writes a
        ``.eval`` log task by task, whatever order inspect wrote it in (epoch by epoch), so its shards finish
        one after another."""
        if not self.seekable:
            raise ValueError("samples_at: only an .eval log read from the file format is read by position")
        entries, _ = self._entries()
        yield from self._read_entries(entries, positions)

    def _entries(self) -> tuple[tuple[array[int], ...], list[tuple[str, str]]]:
        """The sample entries' places (``_sample_entries``), found once: ``zipfile``'s index of a big archive is
        the costly part of reading it."""
        if self._recovered is not None:
            return self._recovered.samples, self._recovered.lost
        if self._index is None:
            self._index = _sample_entries(self.path)
        return self._index, []

    def _read_entries(self, entries: tuple[array[int], ...], positions: Iterable[int]
                      ) -> Iterator[tuple[int, dict[str, Any]] | Skipped]:
        with open(self.path, "rb") as fp:
            for n in positions:
                name, data = "?", b""
                try:
                    name, data = _read_entry(fp, *(column[n] for column in entries))
                    sample = orjson.loads(data)
                except (zipfile.BadZipFile, orjson.JSONDecodeError, OSError, EOFError, ValueError, zlib.error) as exc:
                    yield Skipped(f"{self.path.name}:{name}", f"damaged entry ({type(exc).__name__}: {str(exc)[:120]})")
                    continue
                del data
                if not isinstance(sample, dict):
                    yield Skipped(f"{self.path.name}:{name}", "not a JSON object")
                else:
                    yield n, sample

    def _reader_samples(self) -> Iterator[tuple[int, dict[str, Any]] | Skipped]:
        """inspect_ai's ``read_eval_log_samples``; where it stops (a damaged entry, a sample its types refuse:
        one without an ``id``), the file format goes on, skipping what the reader gave, so one bad sample costs
        that sample only and the rest imports as it does without inspect_ai."""
        from inspect_ai.log import read_eval_log_samples

        done: set[tuple[Any, Any]] = set()
        try:
            for n, sample in enumerate(read_eval_log_samples(str(self.path), all_samples_required=False)):
                done.add((sample.id, sample.epoch))
                yield n, sample.model_dump(mode="json", exclude_none=True)
        except Exception:
            yield from (self._zip_samples(done) if self.is_zip else self._json_samples(done))


@dataclass(frozen=True, slots=True)
class _Recovered:
    """What a walk over a truncated archive's local headers found: its sample entries (as ``_sample_entries``),
    where its header entries are, what was lost and a line saying so."""

    samples: tuple[array[int], ...]
    headers: dict[str, tuple[int, int, int, int, int]]
    lost: list[tuple[str, str]]
    damage: str


def _starts_like_zip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(len(_SIGNATURE)) == _SIGNATURE


def _walk_local_headers(path: Path) -> _Recovered:
    """The entries of a zip whose end (its central directory) is gone, found at their local headers, one after
    another from the start, up to the first that is not whole. inspect writes each entry's sizes in its local
    header (it writes to a seekable file); an entry whose sizes follow its data cannot be walked past."""
    size = path.stat().st_size
    columns: tuple[array[int], ...] = tuple(array("q") for _ in range(5))
    headers: dict[str, tuple[int, int, int, int, int]] = {}
    lost: list[tuple[str, str]] = []
    pos = last_end = 0
    with open(path, "rb") as fp:
        while pos + _LOCAL_HEADER.size <= size:
            fp.seek(pos)
            sig, _, flags, method, _, _, crc, compressed, length, n_name, n_extra = \
                _LOCAL_HEADER.unpack(fp.read(_LOCAL_HEADER.size))
            if sig != _SIGNATURE:
                break  # the central directory, or whatever follows the last entry
            name = fp.read(n_name).decode("utf-8", "replace")
            end = pos + _LOCAL_HEADER.size + n_name + n_extra + compressed
            if flags & 0x08 or compressed == 0xFFFFFFFF:
                lost.append((name, "its sizes are not in its local header: this entry and those after it cannot "
                                   "be found without the archive's directory"))
                break
            if end > size:
                lost.append((name, f"cut short (the log ends {end - size:,} bytes before this entry does)"))
                break
            entry = (pos, compressed, length, method, crc)
            if name in _HEADERS:
                headers[name] = entry
            elif name.startswith("samples/") and name.endswith(".json"):
                for column, value in zip(columns, entry, strict=True):
                    column.append(value)
            pos = last_end = end
        else:
            if pos < size:
                lost.append((f"byte {pos:,}", "an entry cut short inside its local header"))
    damage = (f"truncated: the file ends at byte {size:,} without the zip's central directory; "
              f"{len(columns[0])} whole sample entries read up to byte {last_end:,}")
    return _Recovered(columns, headers, lost, damage)


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
