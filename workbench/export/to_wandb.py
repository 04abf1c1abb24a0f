"""A stored run as one Weights & Biases run: config, summary metrics, a table of tasks and the artifact files.

With ``WANDB_MODE=offline`` (the only mode an air-gapped machine has) the run is written under
``OUT/wandb/offline-run-*`` and uploaded later with ``wandb sync DIR``; online, ``wandb`` reads
``WANDB_API_KEY`` from the environment itself (nothing of it is passed, stored or printed). The W&B run id is
derived from nel's run id, so exporting twice and syncing both updates one W&B run rather than making two.

What wandb collects about the machine on its own (command line, environment, git state, console output, system
metrics) is turned off: an export carries the run's facts, not the exporting process's.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import wandb

from workbench.export.artifacts import step_ranges
from workbench.export.run_facts import run_metrics, run_params
from workbench.store import Store
from workbench.store.queries.export_rows import step_range

TABLE_COLUMNS = ["task_idx", "task_id", "question", "pass_rate", "attempts", "passes", "mean_reward"]
QUESTION_CHARS = 200


@dataclass(frozen=True, slots=True)
class WandbExport:
    """Where the run went: its directory (``wandb sync`` it when offline), the W&B run id and the mode."""

    run_dir: Path
    wandb_run_id: str
    offline: bool
    n_tasks: int


def wandb_run_id(run_id: str) -> str:
    """A W&B run id (letters, digits, ``-``/``_``, at most 64) that is the same every time for ``run_id``."""
    slug = re.sub(r"[^A-Za-z0-9_-]", "-", run_id)
    return slug if len(slug) <= 64 else f"{slug[:47]}-{hashlib.sha256(run_id.encode()).hexdigest()[:16]}"


def first_line(text: str | None) -> str:
    """The question's first non-empty line, cut to ``QUESTION_CHARS``; the table shows what the task was."""
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()[:QUESTION_CHARS]
    return ""


def task_rows(store: Store, run_id: str) -> list[list[Any]]:
    """One row per task (``TABLE_COLUMNS``), read range by range. The question is the task's last user message
    (the benchmark's own text, after any instructions the prompt template puts first), else its prompt."""
    rows: list[list[Any]] = []

    def render(steps: list[dict[str, Any]]) -> list[tuple[int, str, str, bool, float]]:
        return [(s["task_idx"], s["task_id"], s["prompt"], bool(s["passed"]), float(s["reward"])) for s in steps]

    for first, last in step_ranges(store, run_id):
        for batch in step_range(store, run_id, first, last, render):
            for idx, task_id, prompt, passed, reward in batch:
                if not rows or rows[-1][0] != idx:
                    text = (prompt or "").rsplit("\n\n", 1)[-1]
                    rows.append([idx, task_id, first_line(text), 0.0, 0, 0, 0.0])
                row = rows[-1]
                row[4] += 1
                row[5] += int(passed)
                row[6] += reward
    for row in rows:
        row[3], row[6] = row[5] / row[4], row[6] / row[4]
    return rows


def export_wandb(store: Store, bundle: dict[str, Any], files: list[Path], out_dir: Path, *,
                 project: str | None = None, entity: str | None = None, name: str | None = None,
                 tags: list[str] | None = None) -> WandbExport:
    """Log ``bundle``'s run to W&B (offline when ``WANDB_MODE=offline``); see the module docstring."""
    out_dir.mkdir(parents=True, exist_ok=True)
    run_id = bundle["run_id"]
    settings = wandb.Settings(console="off", disable_git=True, disable_code=True, save_code=False,
                              x_disable_meta=True, x_disable_stats=True, x_disable_machine_info=True,
                              x_save_requirements=False, silent=True)
    run = wandb.init(project=project or bundle["benchmark"], entity=entity, name=name or run_id,
                     id=wandb_run_id(run_id), dir=str(out_dir), config=run_params(bundle), job_type="eval",
                     tags=tags, resume="allow", reinit="create_new", settings=settings)
    try:
        run.summary.update(run_metrics(bundle))
        rows = task_rows(store, run_id)
        run.log({"tasks": wandb.Table(columns=list[str | int](TABLE_COLUMNS), data=rows)})
        artifact = wandb.Artifact(f"nel-{wandb_run_id(run_id)}", type="nel-eval")
        for path in files:
            if path.is_dir():
                artifact.add_dir(str(path), name=path.name)
            else:
                artifact.add_file(str(path))
        run.log_artifact(artifact)
        offline = run.settings.mode in ("offline", "dryrun")
        run_dir = Path(run.settings.sync_dir)
    finally:
        run.finish(exit_code=0 if bundle["status"] == "complete" else 1)
    return WandbExport(run_dir, run.id, offline, len(rows))

