"""Bring your own benchmark: a dataset, a prompt and a scorer in a few lines of Python.

```python
from workbench import ScorerInput, answer_line, benchmark, scorer

@benchmark(name="my-qa", dataset="hf://my-org/my-data?split=test", prompt="Question: {question}\\nAnswer:",
           target_field="answer")
@scorer
def check(sample: ScorerInput) -> dict:
    return answer_line(sample)
```

``dataset`` is a local ``.jsonl``/``.json``/``.csv``/``.parquet`` file (relative to the benchmark file), an
``hf://ORG/NAME[/PATH]?split=…&subset=…&revision=…`` split of a hub dataset (see docs/datasets.md), or a
function returning rows.

``nel eval run --bench ./my_bench.py …`` (or ``--benchmark-file my_bench.py -b my-qa``, or a
config's ``benchmark_files:``) imports the file; ``@benchmark`` registers an environment
that the engine, ``nel list`` and ``nel validate`` use like a built-in one. Names follow
NeMo Evaluator's BYOB decorators.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import re
import string
import sys
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, get_args

import orjson

from workbench.datasources import Loaded, is_hub_uri, load_hub, load_local, parse_hub_uri
from workbench.environments.base import Capabilities, EvalEnvironment, ScoringMode, SeedResult, VerifyResult
from workbench.environments.dataset import task_id_of
from workbench.environments.registry import register
from workbench.errors import UsageError
from workbench.model.failures import classify_judged

ScorerResult = Mapping[str, bool | float | int] | bool | float | int


@dataclass(frozen=True, slots=True)
class ScorerInput:
    """What a scorer sees: the response, the row's target and the whole row."""

    response: str
    target: Any
    metadata: dict[str, Any]
    config: dict[str, Any] = field(default_factory=dict)


ScorerFn = Callable[[ScorerInput], ScorerResult]


def scorer(fn: ScorerFn) -> ScorerFn:
    """Mark ``fn(sample: ScorerInput)`` as a scorer, checking its signature now rather than mid-run."""
    params = [p for p in inspect.signature(fn).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    if len(params) != 1:
        raise TypeError(f"@scorer {fn.__name__}: takes exactly one argument (a ScorerInput), not {len(params)}")
    fn._nel_scorer = True  # type: ignore[attr-defined]
    return fn


def _reward(result: ScorerResult, name: str) -> tuple[float, dict[str, float], str | None]:
    """The primary reward, every metric (``correct``, else ``score``, else the only value) and the ``extracted``
    answer a scoring primitive reports (text, not a metric)."""
    if isinstance(result, bool | int | float):
        return float(result), {"score": float(result)}, None
    if not isinstance(result, Mapping) or not result:
        raise TypeError(f"scorer {name} must return a dict of bool/float metrics or a number, got {result!r}")
    metrics = {}
    extracted = result.get("extracted")
    for key, value in result.items():
        if key == "extracted" and (value is None or isinstance(value, str)):
            continue
        if not isinstance(value, bool | int | float):
            raise TypeError(f"scorer {name}: metric {key!r} is {type(value).__name__}, expected bool or float")
        metrics[str(key)] = float(value)
    shown = extracted if isinstance(extracted, str) else None
    for key in ("correct", "score", "reward"):
        if key in metrics:
            return metrics[key], metrics, shown
    if len(metrics) == 1:
        return next(iter(metrics.values())), metrics, shown
    raise TypeError(f"scorer {name}: with several metrics, name the primary one 'correct' or 'score'")


class ByobEnvironment(EvalEnvironment):
    """The environment ``@benchmark`` builds: rows, a prompt template and a user scorer."""

    def __init__(self, spec: BenchmarkSpec) -> None:
        self.spec = spec
        self.name = spec.name
        self.capabilities = Capabilities(scoring=spec.scoring)
        self.loaded = spec.load()
        self._rows = self.loaded.rows
        self._check_prompt_fields()
        self._task_ids = [task_id_of(row) for row in self._rows]
        h = hashlib.sha256(self.loaded.sha256.encode())
        for part in (spec.prompt, spec.target_field, spec.system_prompt or "", spec.scorer.__name__):
            h.update(b"\0" + part.encode())
        self._data_hash = h.hexdigest()[:16]

    def _check_prompt_fields(self) -> None:
        """Every row has every field the prompt uses (directly or through ``field_mapping``): checked once here,
        so prompts can be rendered when seeded, without a second copy of the data."""
        names = set()
        for _, name, _, _ in string.Formatter().parse(self.spec.prompt):
            if name is None:
                continue
            root = re.split(r"[.\[]", name, maxsplit=1)[0]
            if not root or root.isdigit():
                raise UsageError(f"{self.spec.source}: benchmark {self.name!r}: the prompt uses a positional field "
                                 f"{{{name}}}; name the row's field")
            names.add(root)
        renamed = {new: old for old, new in self.spec.field_mapping.items()}
        for idx, row in enumerate(self._rows):
            for name in names:
                if row.get(name, row.get(renamed.get(name, ""))) is None:  # absent, or null (a Parquet row's gap)
                    raise UsageError(f"{self.loaded.where(idx)}: the prompt uses {{{name}}}, which the row lacks")

    def _render(self, row: dict[str, Any]) -> str:
        mapping = self.spec.field_mapping
        fields = {**row, **{new: row[old] for old, new in mapping.items() if old in row}} if mapping else row
        return self.spec.prompt.format_map(fields)

    def __len__(self) -> int:
        return len(self._rows)

    def seed(self, idx: int) -> SeedResult:
        prompt = self._render(self._rows[idx])
        messages: tuple[dict[str, Any], ...] = ({"role": "user", "content": prompt},)
        if self.spec.system_prompt:
            messages = ({"role": "system", "content": self.spec.system_prompt}, *messages)
        return SeedResult(
            prompt=prompt,
            messages=messages,
            expected_answer=str(self._rows[idx][self.spec.target_field]),
            task_id=self._task_ids[idx],
            metadata={"idx": idx},
        )

    def verify(self, response: str, expected: str, **metadata: Any) -> VerifyResult:
        row = self._rows[int(metadata["idx"])] if "idx" in metadata else {}
        target = row.get(self.spec.target_field, expected)
        sample = ScorerInput(response=response, target=target, metadata=row, config=dict(self.spec.extra))
        if not response.strip():
            return VerifyResult(0.0, None, {"method": f"byob:{self.spec.scorer.__name__}", "reason": "empty response"})
        method = f"byob:{self.spec.scorer.__name__}"
        try:
            reward, metrics, extracted = _reward(self.spec.scorer(sample), self.spec.scorer.__name__)
        except Exception as exc:  # the user's scorer failed on this response: record it on the step
            return VerifyResult(0.0, None, {"method": method, "error": f"{type(exc).__name__}: {exc}"},
                                {"failure_category": "scorer_error"})
        # The scorer judged the whole response (no extraction step): a wrong answer is just wrong, not a format error
        return VerifyResult(reward, extracted, {"method": method, "metrics": metrics},
                            {"failure_category": classify_judged(response, reward)})

    @property
    def data_hash(self) -> str:
        return self._data_hash

    @property
    def dataset_identity(self) -> dict[str, str] | None:
        """The hub source and the commit its rows came from (``None`` for a local file): part of a run's identity."""
        return self.loaded.identity()

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": (inspect.getdoc(self.spec.scorer) or "").split("\n")[0],
            "domain": "custom",
            "size": len(self),
            "default_repeats": 1,
            "scorer": self.spec.scorer.__name__,
            "source": str(self.spec.source),
            "license": "",
            "dataset": self.loaded.source,
            "present": "n/a" if self.loaded.revision is None else "yes",
        }


@dataclass(frozen=True, slots=True)
class BenchmarkSpec:
    name: str
    dataset: str | Path | Callable[[], Iterable[Mapping[str, Any]]]
    prompt: str
    target_field: str
    scorer: ScorerFn
    source: Path
    field_mapping: dict[str, str] = field(default_factory=dict)
    system_prompt: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    scoring: ScoringMode = "thread"

    @property
    def dataset_path(self) -> Path | None:
        """The local file the rows come from (``None``: a function, or a hub dataset)."""
        if callable(self.dataset) or is_hub_uri(str(self.dataset)):
            return None
        path = Path(self.dataset).expanduser()
        return path if path.is_absolute() else self.source.parent / path

    def load(self) -> Loaded:
        """The rows and what identifies them; every row must carry the target field."""
        if callable(self.dataset):
            rows = [dict(row) for row in self.dataset()]
            digest = hashlib.sha256(orjson.dumps(rows, option=orjson.OPT_SORT_KEYS, default=str)).hexdigest()
            loaded = Loaded(rows, digest, f"{self.source}: {self.dataset.__name__}()")
        elif is_hub_uri(str(self.dataset)):
            loaded = load_hub(parse_hub_uri(str(self.dataset)))
        elif str(self.dataset).startswith(("http://", "https://")):
            raise UsageError(f"{self.source}: dataset {self.dataset!r}: name a local file or an hf:// dataset")
        else:
            path = self.dataset_path
            assert path is not None
            loaded = load_local(path)
        if not loaded.rows:
            raise UsageError(f"{loaded.source}: benchmark {self.name!r} has no rows")
        loaded.require((self.target_field,), " (target_field)")
        return loaded


def benchmark(
    *,
    name: str,
    dataset: str | Path | Callable[[], Iterable[Mapping[str, Any]]],
    prompt: str,
    target_field: str = "target",
    field_mapping: Mapping[str, str] | None = None,
    system_prompt: str | None = None,
    extra: Mapping[str, Any] | None = None,
    scoring: ScoringMode = "thread",
) -> Callable[[ScorerFn], ScorerFn]:
    """Register a benchmark scored by the decorated ``@scorer`` function.

    ``scoring`` says where the scorer runs, off the event loop either way: ``"thread"`` (the default: it may
    wait, on a file, a sandbox, a service) or ``"process"`` (it computes for a long time in Python, holding the
    GIL: a pool of processes, one per core, so the run's other requests keep going)."""
    if scoring not in get_args(ScoringMode):
        raise UsageError(f"@benchmark {name}: scoring={scoring!r}; use one of {', '.join(get_args(ScoringMode))}")

    def decorate(fn: ScorerFn) -> ScorerFn:
        if not getattr(fn, "_nel_scorer", False):
            raise TypeError(f"@benchmark {name}: decorate a @scorer function (put @scorer below @benchmark)")
        source = Path(inspect.getsourcefile(fn) or ".").resolve()
        spec = BenchmarkSpec(name=name, dataset=dataset, prompt=prompt, target_field=target_field, scorer=fn,
                             source=source, field_mapping=dict(field_mapping or {}), system_prompt=system_prompt,
                             extra=dict(extra or {}), scoring=scoring)
        register(name, with_dataset=lambda source: ByobEnvironment(replace(spec, dataset=source)))(
            lambda: ByobEnvironment(spec))
        _LOADED.setdefault(source, []).append(name)
        return fn

    return decorate


_LOADED: dict[Path, list[str]] = {}


def load_benchmark_file(path: str | Path) -> list[str]:
    """Import a user's benchmark file; return the benchmark names it registered.

    A file that raises on import is reported with the user's own traceback (frames of
    their file only), not ours.
    """
    path = Path(path).resolve()
    if path in _LOADED:
        return list(_LOADED[path])
    if not path.is_file():
        raise UsageError(f"{path}: no such benchmark file")
    module_name = f"nel_user_benchmark_{hashlib.sha1(str(path).encode()).hexdigest()[:10]}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    _LOADED[path] = []
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del _LOADED[path]
        sys.modules.pop(module_name, None)
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve() == path]
        text = "".join(traceback.format_list(frames)) + "".join(traceback.format_exception_only(exc))
        raise UsageError(f"{path} raised while loading:\nTraceback (most recent call last):\n{text.rstrip()}") from None
    if not _LOADED[path]:
        raise UsageError(f"{path}: defines no @benchmark")
    return list(_LOADED[path])
