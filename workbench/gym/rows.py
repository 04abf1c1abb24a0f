"""A benchmark's problem as a NeMo Gym dataset row: what ``nel serve --export-data`` writes and what a delegated
Gym agent (``solver.type: gym_delegation``) is sent, so both speak one row shape.

``responses_create_params.input`` is the chat the model sees (a system prompt included when there is one),
``expected_answer`` and ``metadata`` are what ``/verify`` needs, ``uuid`` / ``task_id`` join a rollout back to its
problem by content; ``question`` (``math_with_judge`` requires it), ``options`` (``mcqa``) and ``eval_type`` are
what Gym's standard resources servers read.
"""

from __future__ import annotations

import uuid
from typing import Any

from workbench.catalogue.choices import LETTERS
from workbench.environments.base import EvalEnvironment
from workbench.types import SeedResult

_UUID_NAMESPACE = uuid.UUID("6f1d3c52-4b5e-4f0e-9a57-6e656c736572")


def gym_row(env: EvalEnvironment, idx: int, system_prompt: str | None = None,
            seed: SeedResult | None = None) -> dict[str, Any]:
    """Problem ``idx`` as a Gym dataset row; ``system_prompt`` is added unless the benchmark has its own.
    ``seed``: the problem already seeded (it is not seeded again)."""
    seed = env.seed(idx) if seed is None else seed
    messages = [dict(m) for m in seed.messages]
    if system_prompt and not any(m.get("role") in ("system", "developer") for m in messages):
        messages.insert(0, {"role": "system", "content": system_prompt})
    row: dict[str, Any] = {
        "responses_create_params": {"input": messages},
        "question": seed.prompt,
        "expected_answer": seed.expected_answer,
        # stable across exports of the same data; the index keeps identical problems apart
        "uuid": str(uuid.uuid5(_UUID_NAMESPACE, f"{env.name}\0{idx}\0{seed.task_id}")),
        "eval_type": env.name,
        "task_id": seed.task_id,
        "benchmark": env.name,
        "metadata": dict(seed.metadata),
    }
    options = mcq_options(env, idx)
    if options is not None:
        row["options"] = options
    return row


def mcq_options(env: EvalEnvironment, idx: int) -> list[dict[str, str]] | None:
    """A multiple-choice problem's options as Gym's ``mcqa`` server reads them (``[{"A": text}, ...]``);
    ``None`` for any other benchmark. The letters are the ones the prompt shows."""
    rows = getattr(env, "rows", None)
    if env.describe().get("scorer") != "multiple_choice" or not isinstance(rows, list):
        return None
    texts = rows[idx].get("options", rows[idx].get("choices"))
    if not isinstance(texts, list):
        return None
    return [{LETTERS[i]: str(text)} for i, text in enumerate(texts[: len(LETTERS)])]
