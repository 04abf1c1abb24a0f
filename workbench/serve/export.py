"""``nel serve --export-data DIR``: the benchmark as the JSONL NeMo Gym's ``ng_collect_rollouts`` reads.

One row per problem, in the shape of Gym's own datasets: ``responses_create_params.input`` is the
chat the model sees (a system prompt included when there is one), ``expected_answer`` and
``metadata`` are what ``/verify`` needs to score the rollout with the same ``verify`` the engine
uses, and ``uuid`` / ``task_id`` let a rollout be joined back to its problem by content.

The rows also carry what Gym's standard resources servers read, so the same file can be scored by
them instead of ``nel serve``: ``question`` (``math_with_judge`` requires it), ``options`` as
``[{"A": text}, ...]`` for a multiple-choice benchmark (``mcqa``), and ``eval_type``, the
benchmark's name (what ``/aggregate_metrics`` checks a rollout against).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from workbench.environments.base import EvalEnvironment
from workbench.errors import UsageError, path_error
from workbench.gym.rows import gym_row, mcq_options

__all__ = ["export_data", "gym_row", "gym_rows", "mcq_options"]


def gym_rows(env: EvalEnvironment, system_prompt: str | None = None) -> Iterator[dict[str, Any]]:
    for idx in range(len(env)):
        yield gym_row(env, idx, system_prompt)


def export_data(env: EvalEnvironment, directory: str | Path, system_prompt: str | None = None) -> Path:
    """Write ``DIRECTORY/<benchmark>.jsonl`` atomically (a reader never sees half a file); return its path."""
    folder = Path(directory)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--export-data: {folder} is a file; it names the directory to write the rows into")
    target = folder / f"{_file_stem(env.name)}.jsonl"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise path_error(folder, exc, "write the exported rows there") from None
    try:
        with os.fdopen(fd, "wb") as out:
            for row in gym_rows(env, system_prompt):
                out.write(orjson.dumps(row, default=str) + b"\n")
        os.replace(tmp, target)
    except OSError as exc:  # a full disk: one line naming the file, and no half of it left behind
        Path(tmp).unlink(missing_ok=True)
        raise path_error(target, exc, "write the exported rows") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def _file_stem(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "benchmark"
