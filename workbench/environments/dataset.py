"""A benchmark defined declaratively: a dataset, a prompt template and a scorer.

Built-in benchmarks are ``benchmarks/<name>/benchmark.toml`` files read by
``DatasetEnvironment.from_definition``; the template is filled from each row
with ``str.format_map`` when the problem is seeded (one copy of the rows).
The data is a local file (``dataset = "FILE"``) or a split of a hub dataset
(a ``[hub]`` table, its rows converted by ``convert`` and frozen on first load;
see ``workbench.datasources`` and docs/datasets.md).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import orjson

from workbench.datasources import HubRef, Loaded, is_hub_uri, load_hub, load_local, parse_hub_uri, presence
from workbench.datasources.rows import json_object_line
from workbench.environments.base import AnswerKeyEntry, Capabilities, EvalEnvironment, SeedResult, VerifyResult
from workbench.errors import UsageError
from workbench.scoring import CPU_HEAVY, Scorer, get_scorer


@dataclass(frozen=True, slots=True)
class BenchmarkDefinition:
    """The parsed ``benchmark.toml``: its data is a local file (``dataset``) or a hub split (``[hub]``)."""

    name: str
    prompt: str
    input_field: str
    target_field: str
    scorer: str
    dataset: Path | None = None
    hub: HubRef | None = None
    convert: str | None = None
    """``module:function`` turning one upstream row into the row the prompt reads (``[hub] convert``)."""
    environment: str | None = None
    """``module:Class``, a ``DatasetEnvironment`` subclass built as ``Class(definition)``, for what a template and a
    scorer cannot say (instruction checks, a sandbox)."""
    description: str = ""
    domain: str = ""
    target_after: str | None = None
    solution_field: str | None = None
    default_repeats: int = 1
    source: str = ""
    license: str = ""
    metadata_fields: tuple[tuple[str, str], ...] = ()
    """(metadata key, row field) pairs copied into each problem's metadata (``category`` drives
    per-category scores); written in TOML as a list of fields or a table {key = "field"}."""

    @classmethod
    def load(cls, path: Path) -> BenchmarkDefinition:
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise UsageError(f"{path}: invalid TOML: {exc}") from None
        known = set(cls.__dataclass_fields__) - {"convert"}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise UsageError(f"{path}: unknown key {unknown[0]!r}")
        for required in ("name", "prompt", "input_field", "target_field", "scorer"):
            if required not in raw:
                raise UsageError(f"{path}: missing required key {required!r}")
        if ("dataset" in raw) == ("hub" in raw):
            raise UsageError(f"{path}: give the data as either dataset = \"FILE\" or a [hub] table, not "
                             f"{'both' if 'dataset' in raw else 'neither'}")
        if "dataset" in raw:
            raw["dataset"] = path.parent / raw["dataset"]
        else:
            raw["hub"], raw["convert"] = _hub_table(path, raw["hub"])
        fields = raw.get("metadata_fields", [])
        if isinstance(fields, list) and all(isinstance(f, str) for f in fields):
            raw["metadata_fields"] = tuple((f, f) for f in fields)
        elif isinstance(fields, dict) and all(isinstance(f, str) for f in fields.values()):
            raw["metadata_fields"] = tuple(fields.items())
        else:
            raise UsageError(f"{path}: metadata_fields must be a list of row fields or a table of key = \"field\"")
        return cls(**raw)

    def with_dataset(self, source: str, base: Path | None = None) -> BenchmarkDefinition:
        """The same benchmark over another dataset (an ``hf://`` URI or a local file), its converter still applied."""
        if is_hub_uri(source):
            return replace(self, dataset=None, hub=parse_hub_uri(source))
        path = Path(source).expanduser()
        return replace(self, dataset=path if path.is_absolute() or base is None else base / path, hub=None)

    @property
    def converter_id(self) -> str:
        """The converter and a hash of its module's source: a changed converter is a different frozen form."""
        if self.convert is None:
            return ""
        module = self.convert.partition(":")[0]
        spec = importlib.util.find_spec(module)
        origin = spec.origin if spec is not None else None
        digest = hashlib.sha256(Path(origin).read_bytes()).hexdigest()[:12] if origin else "?"
        return f"{self.convert}@{digest}"


_HUB_KEYS = {"repo", "subset", "split", "revision", "files", "convert"}


def _hub_table(path: Path, table: Any) -> tuple[HubRef, str | None]:
    if not isinstance(table, dict) or not isinstance(table.get("repo"), str):
        raise UsageError(f"{path}: [hub] needs repo = \"ORG/NAME\"")
    unknown = sorted(set(table) - _HUB_KEYS)
    if unknown:
        raise UsageError(f"{path}: [hub]: unknown key {unknown[0]!r} (known: {', '.join(sorted(_HUB_KEYS))})")
    files = table.get("files", [])
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise UsageError(f"{path}: [hub] files must be a list of globs")
    convert = table.get("convert")
    if convert is not None and (not isinstance(convert, str) or ":" not in convert):
        raise UsageError(f"{path}: [hub] convert must be \"module:function\", got {convert!r}")
    ref = parse_hub_uri(f"hf://{table['repo']}")
    return replace(ref, split=str(table.get("split", "test")), subset=table.get("subset"),
                   revision=str(table.get("revision", "main")), files=tuple(files)), convert


def import_target(target: str, what: str) -> Any:
    """The object ``module:attribute`` names; a wrong one is one line naming it and ``what`` it is for."""
    module, _, attribute = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"{what}: cannot import {target!r}: {exc}") from None


def task_id_of(row: dict[str, Any]) -> str:
    """A stable identity for a problem: the hash of its content, not its position."""
    return hashlib.sha256(orjson.dumps(row, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


class DatasetEnvironment(EvalEnvironment):
    """Serves rows of a JSONL file through a prompt template and a named scorer."""

    own_scoring: ClassVar[bool] = False
    """True in a subclass that scores in its own ``verify`` (mbpp's sandbox, ifeval's checkers): its ``scorer``
    names that method, not a registered scorer."""

    def __init__(self, definition: BenchmarkDefinition) -> None:
        self.definition = definition
        self.name = definition.name
        self._scorer: Scorer = self.verify if self.own_scoring else get_scorer(definition.scorer)
        self.capabilities = Capabilities(scoring="process" if definition.scorer in CPU_HEAVY else "inline")
        self.loaded = load_definition_data(definition)
        self.rows: list[dict[str, Any]] = self.loaded.rows
        """The rows the prompt reads (converted, for a hub benchmark), in order; ``seed`` metadata's ``idx``."""
        self._task_ids = [task_id_of(row) for row in self.rows]

    @classmethod
    def from_definition(cls, path: Path) -> DatasetEnvironment:
        return cls(BenchmarkDefinition.load(path))

    def __len__(self) -> int:
        return len(self.rows)

    def _target(self, row: dict[str, Any]) -> str:
        target = str(row[self.definition.target_field])
        marker = self.definition.target_after
        if marker is not None:
            target = target.rsplit(marker, 1)[-1]
        return target.strip()

    def _solution(self, row: dict[str, Any]) -> str | None:
        field = self.definition.solution_field
        if field is None:
            return None
        text = str(row[field])
        marker = self.definition.target_after
        if marker is not None:
            text = text.rsplit(marker, 1)[0]
        return text.strip()

    def seed(self, idx: int) -> SeedResult:
        if not 0 <= idx < len(self.rows):
            raise IndexError(f"{self.name}: problem index {idx} out of range 0..{len(self.rows) - 1}")
        row = self.rows[idx]
        prompt = self.definition.prompt.format_map(row)
        return SeedResult(
            prompt=prompt,
            messages=({"role": "user", "content": prompt},),
            expected_answer=self._target(row),
            task_id=self._task_ids[idx],
            metadata={"idx": idx, **{key: row.get(name) for key, name in self.definition.metadata_fields}},
        )

    def verify(self, response: str, expected: str, **metadata: Any) -> VerifyResult:
        return self._scorer(response, expected)

    @property
    def dataset_identity(self) -> dict[str, str] | None:
        """The hub source and the commit its rows came from (``None`` for a local file): part of a run's identity."""
        return self.loaded.identity()

    @property
    def data_hash(self) -> str:
        d = self.definition
        h = hashlib.sha256(self.loaded.sha256.encode())
        for part in (d.prompt, d.input_field, d.target_field, d.target_after or "", d.scorer):
            h.update(b"\0" + part.encode())
        return h.hexdigest()[:16]

    def answer_key(self) -> Iterator[AnswerKeyEntry]:
        for row in self.rows:
            yield AnswerKeyEntry(
                question=str(row[self.definition.input_field]),
                answer=self._target(row),
                solution=self._solution(row),
            )

    def describe(self) -> dict[str, Any]:
        d = self.definition
        return {"name": d.name, "description": d.description, "domain": d.domain, "size": len(self),
                "default_repeats": d.default_repeats, "scorer": d.scorer, "source": d.source, "license": d.license,
                "dataset": self.loaded.source, "present": "n/a" if self.loaded.revision is None else "yes",
                **({"revision": self.loaded.revision} if self.loaded.revision else {})}


def describe_definition(d: BenchmarkDefinition) -> dict[str, Any]:
    """Facts for ``nel list`` from the definition and, for a hub benchmark, its manifest: reads no data."""
    info: dict[str, Any] = {"name": d.name, "description": d.description, "domain": d.domain,
                            "default_repeats": d.default_repeats, "scorer": d.scorer, "source": d.source,
                            "license": d.license}
    if d.hub is None:
        assert d.dataset is not None
        return {**info, "dataset": str(d.dataset), "present": "n/a", "size": _count_lines(d.dataset)}
    present, manifest = presence(d.name, d.hub)
    return {**info, "dataset": d.hub.uri(), "present": "yes" if present else "not present",
            "size": manifest.rows if manifest is not None else None,
            "revision": manifest.revision if manifest is not None else None}


def _count_lines(path: Path) -> int | None:
    """Rows of a local JSONL file by its newlines (no parsing); ``None`` for another format."""
    if path.suffix != ".jsonl":
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return data.count(b"\n") + (not data.endswith(b"\n") and bool(data))


def read_jsonl_rows(path: Path, data: bytes) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, row)`` for each non-blank line; a bad line is an error naming file and line."""
    rows = []
    for lineno, line in enumerate(data.splitlines(), start=1):
        row = json_object_line(path, lineno, line)
        if row is not None:
            rows.append((lineno, row))
    return rows


def load_jsonl(path: Path) -> tuple[list[tuple[int, dict[str, Any]]], str]:
    """``(line number, row)`` pairs of a JSONL dataset and the SHA-256 of its bytes; errors name the file."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read dataset: {exc.strerror}") from None
    return read_jsonl_rows(path, data), hashlib.sha256(data).hexdigest()


def load_definition_data(definition: BenchmarkDefinition) -> Loaded:
    """The definition's rows (converted; a hub split frozen under the benchmark's name), every field it reads
    checked now: a missing one is one line naming the field and the row."""
    d = definition
    convert = None if d.convert is None else import_target(d.convert, f"benchmark {d.name!r}: [hub] convert")
    if d.hub is not None:
        loaded = load_hub(d.hub, benchmark=d.name, convert=convert, converter=d.converter_id, license=d.license)
    else:
        assert d.dataset is not None
        loaded = load_local(d.dataset)
        if convert is not None:
            loaded.convert(convert)
    loaded.require((d.input_field, d.target_field, *(f for _, f in d.metadata_fields)))
    return loaded
