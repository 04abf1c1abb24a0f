"""Where lm-evaluation-harness 0.4.x puts its output, and what its results file says about each task.

``lm_eval --output_path OUT --log_samples`` writes ``OUT/<model_name_sanitized>/results_<date>.json`` and, per
task, ``samples_<task>_<date>.jsonl`` next to it (one line per document and filter). ``DIR`` may be ``OUT`` or
the model directory, or one ``results_<date>.json`` in it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from workbench.errors import UsageError

SUPPORTED_VERSIONS = "0.4.x"
"""The lm-evaluation-harness releases whose output layout is read here (tested against 0.4.13)."""


@dataclass(frozen=True, slots=True)
class TaskOutput:
    """One task of one lm-eval run: its config and scores from the results file, and its samples file."""

    task: str
    results_file: Path
    samples_file: Path | None
    results: Mapping[str, Any]
    """The whole results file (its ``config``, ``model_name``, ``lm_eval_version``...)."""

    @property
    def config(self) -> dict[str, Any]:
        value = self.results.get("configs", {}).get(self.task)
        return value if isinstance(value, dict) else {}

    @property
    def reported(self) -> dict[str, Any]:
        """What lm-eval itself reported for the task (``"exact_match,final-answer": 0.4`` ...)."""
        value = self.results.get("results", {}).get(self.task)
        return value if isinstance(value, dict) else {}

    def primary_key(self) -> str:
        """The task's first metric under its first filter (``metric,filter``): what the run's pass rate is."""
        metrics = [m.get("metric") for m in self.config.get("metric_list") or [] if isinstance(m, dict)]
        filters = [f.get("name") for f in self.config.get("filter_list") or [] if isinstance(f, dict)]
        metric = next((m for m in metrics if isinstance(m, str)), None)
        filt = next((f for f in filters if isinstance(f, str)), "none")
        if metric is None:  # a task config without metric_list: the first score lm-eval reported
            keys = [k for k in self.reported if "," in k and "_stderr," not in k]
            if not keys:
                raise UsageError(f"{self.results_file}: task {self.task!r} names no metric (configs.{self.task}."
                                 "metric_list is empty and results holds no score)")
            return str(keys[0])
        return f"{metric},{filt}"


def _load_results(path: Path) -> dict[str, Any]:
    try:
        data = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"{path}: not an lm-evaluation-harness results file (not JSON: {exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict) \
            or not isinstance(data.get("configs"), dict):
        raise UsageError(f"{path}: not an lm-evaluation-harness results file (no 'results' and 'configs' objects)")
    version = data.get("lm_eval_version")
    if version is not None and not str(version).startswith("0.4."):
        raise UsageError(f"{path}: written by lm-evaluation-harness {version}; "
                         f"supported: {SUPPORTED_VERSIONS}")
    return data


def _results_files(directory: Path) -> list[Path]:
    here = sorted(directory.glob("results_*.json"))
    if here:
        return here
    return sorted(p for sub in sorted(directory.iterdir()) if sub.is_dir() for p in sub.glob("results_*.json"))


def _given_file(path: Path) -> list[Path]:
    """A file named instead of a directory: a results file is taken (its samples files lie beside it); anything
    else is refused, saying it is a file and what is expected."""
    if path.name.startswith("samples_") and path.suffix == ".jsonl":
        raise UsageError(f"{path}: a samples file: name the results_*.json next to it, or its directory (the "
                         "results file holds the task's config and lm-eval's scores)")
    if path.suffix != ".json":
        raise UsageError(f"{path}: a file, not lm-evaluation-harness output (name the --output_path directory "
                         "lm_eval wrote to, or a results_*.json in it)")
    return [path]


def find_outputs(directory: Path) -> list[TaskOutput]:
    """Every task of every lm-eval run under ``directory`` (it or its model sub-directories), oldest first; or of
    the one results file ``directory`` names.

    Raises:
        UsageError: no such file or directory, a file that is not a results file, no results file in the
            directory, or a results file lm-eval did not write.
    """
    if directory.is_file():
        files = _given_file(directory)
    elif not directory.is_dir():
        raise UsageError(f"{directory}: no such directory (name the --output_path lm_eval wrote to)")
    else:
        files = _results_files(directory)
    if not files:
        raise UsageError(f"{directory}: not lm-evaluation-harness output (no results_*.json here or one "
                         "directory down; lm_eval --output_path DIR --log_samples writes them)")
    found: list[TaskOutput] = []
    for path in files:
        data = _load_results(path)
        date = path.stem.removeprefix("results_")
        for task in data["configs"]:
            samples = path.with_name(f"samples_{task}_{date}.jsonl")
            found.append(TaskOutput(str(task), path, samples if samples.is_file() else None, data))
    return found
