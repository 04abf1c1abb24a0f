"""A benchmark defined declaratively: a data file, a prompt template and a scorer.

Built-in benchmarks are ``benchmarks/<name>/benchmark.toml`` files read by
``DatasetEnvironment.from_definition``; the template is filled from each row
with ``str.format_map``.
"""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import orjson

from workbench.environments.base import AnswerKeyEntry, Capabilities, EvalEnvironment, SeedResult, VerifyResult
from workbench.errors import UsageError
from workbench.scoring import CPU_HEAVY, Scorer, get_scorer


@dataclass(frozen=True, slots=True)
class BenchmarkDefinition:
    """The parsed ``benchmark.toml``."""

    name: str
    dataset: Path
    prompt: str
    input_field: str
    target_field: str
    scorer: str
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
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(raw) - known)
        if unknown:
            raise UsageError(f"{path}: unknown key {unknown[0]!r}")
        for required in ("name", "dataset", "prompt", "input_field", "target_field", "scorer"):
            if required not in raw:
                raise UsageError(f"{path}: missing required key {required!r}")
        raw["dataset"] = path.parent / raw["dataset"]
        fields = raw.get("metadata_fields", [])
        if isinstance(fields, list) and all(isinstance(f, str) for f in fields):
            raw["metadata_fields"] = tuple((f, f) for f in fields)
        elif isinstance(fields, dict) and all(isinstance(f, str) for f in fields.values()):
            raw["metadata_fields"] = tuple(fields.items())
        else:
            raise UsageError(f"{path}: metadata_fields must be a list of row fields or a table of key = \"field\"")
        return cls(**raw)


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
        self._rows, self._data_bytes_hash = _load_rows(definition)
        self._task_ids = [task_id_of(row) for row in self._rows]

    @classmethod
    def from_definition(cls, path: Path) -> DatasetEnvironment:
        return cls(BenchmarkDefinition.load(path))

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def rows(self) -> list[dict[str, Any]]:
        """The frozen rows, in order (what a subclass's ``seed``/``verify`` read by ``idx``)."""
        return self._rows

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
        if not 0 <= idx < len(self._rows):
            raise IndexError(f"{self.name}: problem index {idx} out of range 0..{len(self._rows) - 1}")
        row = self._rows[idx]
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
    def data_hash(self) -> str:
        d = self.definition
        h = hashlib.sha256(self._data_bytes_hash.encode())
        for part in (d.prompt, d.input_field, d.target_field, d.target_after or "", d.scorer):
            h.update(b"\0" + part.encode())
        return h.hexdigest()[:16]

    def answer_key(self) -> Iterator[AnswerKeyEntry]:
        for row in self._rows:
            yield AnswerKeyEntry(
                question=str(row[self.definition.input_field]),
                answer=self._target(row),
                solution=self._solution(row),
            )

    def describe(self) -> dict[str, Any]:
        d = self.definition
        return {
            "name": d.name,
            "description": d.description,
            "domain": d.domain,
            "size": len(self),
            "default_repeats": d.default_repeats,
            "scorer": d.scorer,
            "source": d.source,
            "license": d.license,
        }


def json_object_line(path: Path, lineno: int, line: bytes) -> dict[str, Any] | None:
    """One JSONL line as an object (``None`` for a blank line); a bad line is an error naming file and line."""
    if not line.strip():
        return None
    try:
        row = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"{path}:{lineno}: not valid JSON ({exc})") from None
    if not isinstance(row, dict):
        raise UsageError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
    return row


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


def _load_rows(definition: BenchmarkDefinition) -> tuple[list[dict[str, Any]], str]:
    path = definition.dataset
    rows, digest = load_jsonl(path)
    for lineno, row in rows:
        for field in (definition.input_field, definition.target_field, *(f for _, f in definition.metadata_fields)):
            if field not in row:
                raise UsageError(f"{path}:{lineno}: row has no field {field!r}")
    return [row for _, row in rows], digest
