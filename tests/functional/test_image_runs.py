"""Images end to end: what a model receives, what the store keeps (each image once), an image that cannot be
decoded, a v4 store opened by this nel, and the shape_count benchmark against the mock model."""

from __future__ import annotations

import asyncio
import base64
import re
import signal
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest
from nel_helpers import assert_ok, nel, nel_popen, wait_for_steps
from recording_model import recording_model, url_of

from workbench.engine import run_evaluation
from workbench.environments import get_environment
from workbench.environments.dataset import BenchmarkDefinition
from workbench.environments.shape_count import ImageDatasetEnvironment
from workbench.errors import UsageError
from workbench.images import inspect_image, png_bytes
from workbench.mock import MockHandle, mock_model
from workbench.mock.skill import SkillProfile
from workbench.model.config import ModelConfig
from workbench.solvers import SimpleSolver
from workbench.store.database import SCHEMA_VERSION, connect_rw

pytestmark = pytest.mark.timeout(90)
PICTURE = png_bytes(2, 2, bytes([0, 0, 255]) * 4)


async def _send(config: ModelConfig, seed_index: int = 0) -> None:
    env = get_environment("shape_count")
    async with SimpleSolver(config).worker() as worker:
        await worker.solve(env.seed(seed_index), 0)


def test_chat_completions_sends_the_image_as_an_image_url_part_at_the_runs_detail():
    with recording_model() as server:
        asyncio.run(_send(ModelConfig(url=url_of(server), model_id="m", image_detail="low", max_retries=0)))
    (body,) = server.bodies
    text, image = body["messages"][0]["content"]
    assert text["type"] == "text" and "How many" in text["text"]
    assert image["type"] == "image_url" and image["image_url"]["detail"] == "low"
    assert inspect_image(base64.b64decode(image["image_url"]["url"].split(",", 1)[1])).mime == "image/png"


def test_responses_sends_input_text_and_input_image_parts():
    with recording_model() as server:
        asyncio.run(_send(ModelConfig(url=url_of(server), model_id="m", protocol="responses", max_retries=0)))
    (body,) = server.bodies
    text, image = body["input"][0]["content"]
    assert text["type"] == "input_text" and "How many" in text["text"]
    assert image["type"] == "input_image" and image["detail"] == "auto"
    assert image["image_url"].startswith("data:image/png;base64,")


def test_image_detail_is_part_of_the_runs_identity_only_when_set():
    plain = ModelConfig(url="http://127.0.0.1:1/v1", model_id="m")
    assert "image_detail" not in plain.identity()
    assert ModelConfig(url="http://127.0.0.1:1/v1", model_id="m", image_detail="high").identity()["image_detail"] \
        == "high"


def _image_benchmark(folder: Path, images: list[str]) -> ImageDatasetEnvironment:
    rows = [{"question": f"How many blue squares? ({i})", "answer": "4", "image": image}
            for i, image in enumerate(images)]
    (folder / "data.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    (folder / "benchmark.toml").write_text(
        'name = "pictures"\ndataset = "data.jsonl"\ninput_field = "question"\ntarget_field = "answer"\n'
        'scorer = "numeric"\nprompt = "{question}"\n')
    return ImageDatasetEnvironment(BenchmarkDefinition.load(folder / "benchmark.toml"))


def test_an_undecodable_image_is_an_image_error_step_and_the_run_goes_on(tmp_path: Path, mock: MockHandle):
    good = base64.b64encode(PICTURE).decode()
    env = _image_benchmark(tmp_path, [good, "!!not base64!!", base64.b64encode(b"plain text").decode(),
                                      base64.b64encode(PICTURE[:-15]).decode()])
    store = tmp_path / "nel.duckdb"
    solver = SimpleSolver(ModelConfig(url=mock.base_url, model_id="nel-mock", max_retries=0))
    result = asyncio.run(run_evaluation(env, solver, store=store, n_repeats=2, max_error_rate=1.0))
    assert result.status == "complete"
    con = duckdb.connect(str(store), read_only=True)
    rows = con.execute("SELECT task_idx, failure_category, error, http_status FROM steps ORDER BY ALL").fetchall()
    assert [r[1] == "image_error" for r in rows] == [False, False] + [True] * 6
    assert {r[3] for r in rows[2:]} == {None}  # never sent: the model was not called
    assert "bad base64" in rows[2][2] and "not an image" in rows[4][2] and "cut short" in rows[6][2]
    assert con.execute("SELECT count(*), any_value(n_bytes) FROM images").fetchone() == (1, len(PICTURE))


def test_the_completions_protocol_records_image_error_rather_than_dropping_the_image(tmp_path: Path,
                                                                                    mock: MockHandle):
    env = _image_benchmark(tmp_path, [base64.b64encode(PICTURE).decode()])
    solver = SimpleSolver(ModelConfig(url=mock.base_url, model_id="nel-mock", protocol="completions"))
    asyncio.run(run_evaluation(env, solver, store=tmp_path / "nel.duckdb", max_error_rate=1.0))
    con = duckdb.connect(str(tmp_path / "nel.duckdb"), read_only=True)
    category, error = con.execute("SELECT failure_category, error FROM steps").fetchone()  # type: ignore[misc]
    assert category == "image_error" and "completions protocol cannot carry images" in error


def test_shape_count_against_the_mock_scores_as_its_skill_says_and_stores_each_image_once(
        tmp_path: Path, mock: MockHandle):
    problems, repeats = 12, 3
    args = ["eval", "run", "-b", "shape_count", "--model-url", mock.base_url, "--model-id", "nel-mock",
            "--max-problems", str(problems), "--repeats", str(repeats), "--no-progress",
            "--output-dir", str(tmp_path)]
    assert_ok(nel(*args, cwd=tmp_path))
    assert_ok(nel(*args, "--protocol", "responses", cwd=tmp_path))  # a second run: the same images
    con = duckdb.connect(str(tmp_path / "nel.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM images").fetchone() == (problems,)
    assert con.execute("SELECT count(*) FROM steps WHERE messages::VARCHAR LIKE '%base64%'").fetchone() == (0,)
    env, skill = get_environment("shape_count"), SkillProfile(mock.config.skill_seed)
    expected = {(i, r): skill.attempt(f"shape_count:{env.seed(i).task_id}", None, r).correct
                for i in range(problems) for r in range(repeats)}
    for (run_id,) in con.execute("SELECT run_id FROM runs").fetchall():
        passed = {(i, r): p for i, r, p in con.execute(
            "SELECT task_idx, repeat, passed FROM steps WHERE run_id = ?", [run_id]).fetchall()}
        assert passed == expected
    refs = {orjson.loads(m)[0]["content"][1]["sha256"] for (m,) in con.execute("SELECT messages FROM steps").fetchall()}
    assert refs == {r[0] for r in con.execute("SELECT sha256 FROM images").fetchall()}
    for export in tmp_path.glob("runs/*"):  # the references stay; the pictures come along, once each, by hash
        trajectories = (export / "trajectories.jsonl").read_text()
        assert '"type":"image","sha256":' in trajectories and "base64" not in trajectories
        files = sorted(export.glob("images/*.png"))
        assert [f.name for f in files] == sorted(f"{sha}.png" for sha in refs)
        assert all(inspect_image(f.read_bytes()).sha256 == f.stem for f in files)


def test_a_version_4_store_gains_the_images_table_when_opened_for_writing(tmp_path: Path):
    store = tmp_path / "nel.duckdb"
    connect_rw(store).close()
    con = duckdb.connect(str(store))
    con.execute("DROP TABLE images")
    con.execute("UPDATE nel_meta SET value = '4' WHERE key = 'schema_version'")
    con.close()
    con = connect_rw(store)
    try:
        assert con.execute("SELECT value FROM nel_meta WHERE key = 'schema_version'").fetchone() == \
            (str(SCHEMA_VERSION),)
        assert con.execute("SELECT count(*) FROM images").fetchone() == (0,)
    finally:
        con.close()


def test_every_shape_count_picture_decodes_and_is_part_of_its_tasks_identity():
    shape = get_environment("shape_count")
    hashes = set()
    for i in range(len(shape)):
        url: Any = shape.seed(i).messages[0]["content"][1]["image_url"]["url"]
        info = inspect_image(base64.b64decode(url.split(",", 1)[1]))
        assert (info.width, info.height) == (96, 96)
        hashes.add(info.sha256)
    assert len(hashes) == len({shape.seed(i).task_id for i in range(len(shape))}) == len(shape)
    assert shape.describe()["modality"] == "image"


def test_a_row_without_its_image_is_refused_naming_the_file_and_row(tmp_path: Path):
    _image_benchmark(tmp_path, [base64.b64encode(PICTURE).decode()])
    (tmp_path / "data.jsonl").write_text('{"question": "q", "answer": "1"}\n')
    with pytest.raises(UsageError, match=r"data.jsonl: row 1 has no field 'image'"):
        ImageDatasetEnvironment(BenchmarkDefinition.load(tmp_path / "benchmark.toml"))


def test_a_run_killed_mid_way_leaves_every_stored_reference_with_its_image(tmp_path: Path):
    """Each image reaches the shard's folder before the step that references it: after ``kill -9`` and
    ``--resume``, every reference in ``steps`` has its row in ``images``."""
    args = ["eval", "run", "-b", "shape_count", "--model-id", "nel-mock", "--repeats", "2", "--max-concurrent",
            "4", "--no-progress", "--output-dir", str(tmp_path)]
    with mock_model(latency_ms=40) as slow:
        args += ["--model-url", slow.base_url]
        proc = nel_popen(*args, cwd=tmp_path)
        try:
            wait_for_steps(tmp_path / "nel.duckdb", 12, proc)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.communicate()
        journals = list(tmp_path.glob("nel.duckdb.segments/*/shard-*/journal-*.jsonl"))  # what the kill left
        assert journals
        for journal in journals:
            refs = re.findall(r'"sha256\\?":\\?"([0-9a-f]{64})', journal.read_text())
            assert refs and all((journal.parent / "images" / sha).is_file() for sha in refs)
        assert_ok(nel(*args, "--resume", cwd=tmp_path))
    con = duckdb.connect(str(tmp_path / "nel.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM steps").fetchone() == (120,)
    missing = con.execute(
        "SELECT count(*) FROM (SELECT unnest(json_extract_string(messages, '$[*].content[*].sha256')) AS h "
        "FROM steps) WHERE h NOT IN (SELECT sha256 FROM images)").fetchone()
    assert missing == (0,) and con.execute("SELECT count(*) FROM images").fetchone() == (60,)
