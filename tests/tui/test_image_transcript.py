"""A prompt's picture in the TUI: the transcript and the diff show a placeholder (type, size, short hash),
never base64. The store is written by the engine's own shard writer and merged, as a run does."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from pilot_helpers import open_screen, screen_text, settle

from workbench.images import data_url, inspect_image, png_bytes
from workbench.store import ShardWriter
from workbench.store.columns import STEP_COLUMNS
from workbench.store.ingest import ingest
from workbench.tui.app import NelApp
from workbench.tui.screens.diff import DiffScreen
from workbench.tui.screens.task import TaskScreen

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(30)]
RUN = "pictures"
PICTURE = png_bytes(3, 3, bytes([0, 200, 0]) * 9)


def _picture_store(store: Path) -> Path:
    header = {"run_id": RUN, "benchmark": "pictures", "model_id": "m", "model_url": "http://mock/v1",
              "protocol": "chat_completions", "identity_hash": "0" * 64, "identity": {}, "config": {},
              "n_tasks": 1, "n_repeats": 2, "problem_start": 0, "problem_end": 1, "total_shards": 1,
              "created_at": time.time(), "nel_version": "test"}
    writer = ShardWriter(store, RUN, 0)
    writer.begin(header, {"shard_idx": 0, "total_shards": 1, "problem_start": 0, "problem_end": 1},
                 [{"run_id": RUN, "task_idx": 0, "task_id": "pic0", "benchmark": "pictures",
                   "prompt": "How many green squares?", "expected_answer": "1", "metadata": None}])
    content = [{"type": "text", "text": "How many green squares?"},
               {"type": "image_url", "image_url": {"url": data_url(PICTURE)}}]
    for rep, answer in enumerate(("1", "4")):
        row: dict[str, Any] = dict.fromkeys(STEP_COLUMNS)
        row.update(run_id=RUN, task_idx=0, repeat=rep, task_id="pic0", shard_idx=0, started_at=time.time(),
                   messages=orjson.dumps([{"role": "user", "content": content}]).decode(),
                   response=f"The answer is: {answer}", reward=float(answer == "1"), passed=answer == "1",
                   expected_answer="1", extracted_answer=answer, latency_ms=1.0)
        writer.append(row)
    writer.finish("complete")
    ingest(store)
    return store


async def test_the_transcript_and_the_diff_show_the_picture_as_a_placeholder(tmp_path: Path) -> None:
    app = NelApp(_picture_store(tmp_path / "nel.duckdb"))
    mark = f"[image png {len(PICTURE)} B sha256:{inspect_image(PICTURE).sha256[:8]}]"
    async with app.run_test(size=(100, 40)) as pilot:
        await open_screen(pilot, TaskScreen(RUN, 0))
        text = screen_text(app)
        assert mark in text and "How many green squares?" in text and "base64" not in text
        await pilot.press("d")
        await settle(pilot)
        assert isinstance(app.screen, DiffScreen)
        assert screen_text(app).count(mark) == 2 and "base64" not in screen_text(app)  # one per side
