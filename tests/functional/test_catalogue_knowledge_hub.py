"""The knowledge and maths catalogue end to end, offline: upstream-format fixtures in the Hugging Face hub's
own cache layout (tests/hub_cache.py), `nel eval run -b NAME` against the mock model, every verdict checked.

Needs the hub loader (workbench.datasources) and tests/hub_cache.py from the dataset-source branch.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from catalogue_fixtures import description, hub_files
from hub_cache import place_dataset
from nel_helpers import assert_ok, assert_one_line_error, clean_env, nel

from workbench.mock import MockHandle, mock_model
from workbench.mock.skill import SkillProfile
from workbench.resources import benchmarks_dir
from workbench.store import open_store

pytestmark = pytest.mark.timeout(120)

CATALOGUE = ("mmlu", "mmlu_pro", "gpqa_diamond", "arc_challenge", "triviaqa", "math500", "aime24", "aime25")
REPEATS = 3
_SHA = re.compile(r"[0-9a-f]{40}")


def hub_table(name: str) -> dict[str, str]:
    hub: dict[str, str] = tomllib.loads((benchmarks_dir() / name / "benchmark.toml").read_text())["hub"]
    return hub


@pytest.fixture(scope="module")
def offline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Every catalogue fixture in one HF cache (at its pinned commit when the toml pins one), and the environment
    that reads it offline: HF_HOME, HF_HUB_OFFLINE=1, NEL_DATA_DIR (also set here for the mock model's process)."""
    root = tmp_path_factory.mktemp("hub")
    for name in CATALOGUE:
        hub = hub_table(name)
        pinned = hub["revision"] if _SHA.fullmatch(hub["revision"]) else None
        place_dataset(root / "hf", hub["repo"], hub_files(name), revision=pinned)
    env = {"HF_HOME": str(root / "hf"), "HF_HUB_OFFLINE": "1", "NEL_DATA_DIR": str(root / "nel")}
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        yield env


@pytest.fixture(scope="module")
def catalogue_mock(offline: dict[str, str]) -> Iterator[MockHandle]:
    with mock_model(latency_ms=0, benchmarks=CATALOGUE) as handle:
        yield handle


@pytest.mark.parametrize("name", CATALOGUE)
def test_eval_run_reads_the_cache_and_every_verdict_is_the_mocks_intent(
    name: str, offline: dict[str, str], catalogue_mock: MockHandle, tmp_path: Path
) -> None:
    proc = nel("eval", "run", "-b", name, "--model-url", catalogue_mock.base_url, "--model-id", "nel-mock",
               "--repeats", str(REPEATS), "--no-progress", "--output-dir", "out", cwd=tmp_path,
               env=clean_env(**offline), timeout=90)
    assert_ok(proc)
    steps = open_store(tmp_path / "out").sql("SELECT task_id, repeat, reward FROM steps ORDER BY ALL").rows()
    rows = len(description(name)["rows"])
    assert len(steps) == rows * REPEATS
    skill = SkillProfile(catalogue_mock.config.skill_seed)
    for task_id, repeat, reward in steps:
        correct = skill.attempt(f"{name}:{task_id}", None, repeat).correct
        assert reward == (1.0 if correct else 0.0), (name, task_id, repeat)


def test_list_json_describes_the_catalogue_from_the_tomls(offline: dict[str, str], tmp_path: Path) -> None:
    proc = nel("list", "--json", cwd=tmp_path, env=clean_env(**offline))
    assert_ok(proc)
    listed = {entry["name"]: entry for entry in orjson.loads(proc.stdout)}
    for name in CATALOGUE:
        toml = tomllib.loads((benchmarks_dir() / name / "benchmark.toml").read_text())
        assert {k: listed[name][k] for k in ("domain", "scorer", "default_repeats")} == {
            k: toml[k] for k in ("domain", "scorer", "default_repeats")}


def test_a_benchmark_whose_data_is_absent_offline_names_the_dataset_and_the_pull(tmp_path: Path) -> None:
    env = clean_env(HF_HOME=str(tmp_path / "empty-hf"), HF_HUB_OFFLINE="1", NEL_DATA_DIR=str(tmp_path / "nel"))
    proc = nel("eval", "run", "-b", "mmlu", "--model-url", "http://127.0.0.1:9/v1", "--model-id", "m",
               "--no-progress", "--output-dir", "out", cwd=tmp_path, env=env)
    line = assert_one_line_error(proc, 2)
    assert "cais/mmlu" in line and "nel benchmarks pull mmlu" in line
