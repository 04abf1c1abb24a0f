"""The seed's BYOB example end to end on a hub dataset in the Hugging Face cache (offline), `dataset:` in a config
running a built-in's prompt and scorer over other data, and `--resume` against a new upstream commit refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from hub_cache import jsonl_bytes, parquet_bytes, place_dataset
from nel_helpers import assert_ok, assert_one_line_error, clean_env, nel

from workbench import open_store

BENCH = '''\
from workbench import benchmark, scorer, ScorerInput, answer_line

@benchmark(name="squares", dataset="hf://my-org/my-data?split=test", prompt="Question: {question}\\nAnswer:",
           target_field="answer")
@scorer
def check(sample: ScorerInput) -> dict:
    """The last Answer: line, with math normalisation."""
    return answer_line(sample)
'''
ROWS = [{"question": f"What is {i} squared?", "answer": str(i * i)} for i in range(6)]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "squares.py").write_text(BENCH)
    return tmp_path


def offline_env(root: Path) -> dict[str, str]:
    return clean_env(HF_HOME=str(root / "hf"), NEL_DATA_DIR=str(root / "nel"), HF_HUB_OFFLINE="1")


def run_args(mock_url: str, *extra: str) -> list[str]:
    return ["eval", "run", "--bench", "./squares.py", "--model-url", mock_url, "--model-id", "nel-mock",
            "--no-progress", "--output-dir", "out", *extra]


@pytest.mark.timeout(120)
def test_the_byob_example_runs_on_a_cached_hub_dataset_and_resume_refuses_a_new_commit(mock, project):
    first = place_dataset(project / "hf", "my-org/my-data", {"data/test-00000-of-00001.parquet": parquet_bytes(ROWS)})
    assert_ok(nel(*run_args(mock.base_url), cwd=project, env=offline_env(project)))
    store = open_store(project / "out")
    assert store.sql("SELECT count(*) AS n, any_value(scoring_method) AS m FROM steps").rows() == [(6, "byob:check")]
    identity = store.sql("SELECT identity FROM runs")["identity"][0]
    assert first in identity and "hf://my-org/my-data?split=test&revision=main" in identity

    second = place_dataset(project / "hf", "my-org/my-data",
                           {"data/test-00000-of-00001.parquet": parquet_bytes(ROWS[:5])})
    line = assert_one_line_error(nel(*run_args(mock.base_url, "--resume"), cwd=project, env=offline_env(project)), 2)
    assert f"dataset_revision: '{first}' -> '{second}'" in line


@pytest.mark.timeout(60)
def test_offline_with_the_dataset_not_cached_is_one_line(mock, project):
    line = assert_one_line_error(nel(*run_args(mock.base_url), cwd=project, env=offline_env(project)), 2)
    assert "dataset hf://my-org/my-data?split=test&revision=main is not present here" in line
    assert "hf download my-org/my-data --repo-type dataset" in line


@pytest.mark.timeout(120)
def test_a_configs_dataset_runs_a_builtins_prompt_and_scorer_over_another_source(mock, tmp_path):
    rows = [{"question": "Tom has 3 apples and buys 4 more. How many apples does he have?", "answer": "#### 7"},
            {"question": "A box holds 6 eggs. How many eggs are in 2 boxes?", "answer": "#### 12"}]
    sha = place_dataset(tmp_path / "hf", "my-org/tiny-math", {"test.jsonl": jsonl_bytes(rows)})
    (tmp_path / "local.jsonl").write_bytes(jsonl_bytes(rows[:1]))
    (tmp_path / "suite.yaml").write_text(f"""\
services:
  mock: {{url: {mock.base_url}, model: nel-mock}}
benchmarks:
  - name: gsm8k
    dataset: hf://my-org/tiny-math?split=test
    solver: {{service: mock}}
    repeats: 1
  - name: gsm8k
    dataset: local.jsonl
    solver: {{service: mock}}
    repeats: 1
output:
  dir: results
""")
    assert_ok(nel("eval", "run", "suite.yaml", "--no-progress", cwd=tmp_path, env=offline_env(tmp_path)))
    runs = open_store(tmp_path / "results").sql("SELECT identity FROM runs")["identity"].to_list()
    assert len(runs) == 2 and [sha in r for r in runs].count(True) == 1  # the hub one pins its commit
    assert ["dataset_revision" in r for r in runs].count(True) == 1  # the local one has no revision
    steps = open_store(tmp_path / "results").sql("SELECT count(*) AS n, any_value(scoring_method) AS m FROM steps")
    assert steps["n"][0] == 3

    (tmp_path / "suite.yaml").write_text((tmp_path / "suite.yaml").read_text().replace(
        "hf://my-org/tiny-math?split=test", "hf://my-org/tiny-math?spilt=test"))
    line = assert_one_line_error(nel("eval", "run", "suite.yaml", cwd=tmp_path, env=offline_env(tmp_path)), 2)
    assert "benchmarks.0.dataset" in line and "unknown parameter 'spilt'" in line
