"""mbpp, ifeval and simpleqa end to end: upstream-schema fixtures placed in the Hugging Face hub's cache layout
(offline), listed by `nel list`, and run against the mock model by `nel eval run`.

Needs the hub loader (``tests/hub_cache.py``, the registry honouring ``[hub]`` and ``environment =``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from catalogue_fixtures import upstream_files
from hub_cache import place_dataset
from nel_helpers import assert_ok, assert_one_line_error, clean_env, nel

from workbench import open_store
from workbench.mock import MockHandle, mock_model

pytestmark = pytest.mark.timeout(180)

REPOS = {"mbpp": "google-research-datasets/mbpp", "ifeval": "google/IFEval", "simpleqa": "basicv8vc/SimpleQA"}


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """HF_HOME holding the three fixtures, offline; NEL_DATA_DIR empty; a minimal punkt_tab for ifeval."""
    root = tmp_path_factory.mktemp("hub")
    for name, repo in REPOS.items():
        place_dataset(root / "hf", repo, upstream_files(name))
    english = root / "nltk_data" / "tokenizers" / "punkt_tab" / "english"
    english.mkdir(parents=True)
    for file in ("collocations.tab", "sent_starters.txt", "abbrev_types.txt", "ortho_context.tab"):
        (english / file).write_text("")
    return {"HF_HOME": str(root / "hf"), "HF_HUB_OFFLINE": "1", "NEL_DATA_DIR": str(root / "nel"),
            "NLTK_DATA": str(root / "nltk_data")}


@pytest.fixture(scope="module")
def mock(hub: dict[str, str]) -> Iterator[MockHandle]:
    """The mock model started where the fixtures are its data (it reads the same cache)."""
    with pytest.MonkeyPatch.context() as patch:
        for key, value in hub.items():
            patch.setenv(key, value)
        with mock_model(latency_ms=0) as handle:
            yield handle


def run(mock: MockHandle, hub: dict[str, str], tmp_path: Path, bench: str, *extra: str) -> list[dict[str, object]]:
    proc = nel("eval", "run", "-b", bench, "--model-url", mock.base_url, "--model-id", "nel-mock", "--repeats", "3",
               "--store", str(tmp_path / "nel.duckdb"), "--output-dir", str(tmp_path), "--no-progress", *extra,
               cwd=tmp_path, env=clean_env(**hub), timeout=150)
    assert_ok(proc)
    steps: list[dict[str, object]] = open_store(tmp_path / "nel.duckdb").dicts(
        "SELECT task_idx, reward, failure_category, scoring_details FROM steps ORDER BY task_idx, repeat")
    return steps


def test_nel_list_shows_the_three_with_domain_scorer_and_presence(hub: dict[str, str], tmp_path: Path) -> None:
    proc = nel("list", "--json", cwd=tmp_path, env=clean_env(**hub))
    assert_ok(proc)
    info = {i["name"]: i for i in orjson.loads(proc.stdout)}
    assert info["mbpp"]["domain"] == "code" and info["mbpp"]["scorer"] == "code_execution"
    assert info["ifeval"]["scorer"] == "ifeval" and info["simpleqa"]["scorer"] == "simpleqa_grader"
    assert info["simpleqa"]["domain"] == "knowledge" and info["simpleqa"]["default_repeats"] == 1


def test_mbpp_runs_the_mocks_code_in_a_local_sandbox(mock: MockHandle, hub: dict[str, str], tmp_path: Path) -> None:
    steps = run(mock, hub, tmp_path, "mbpp", "--sandbox", "local")
    assert len(steps) == 15
    assert {s["reward"] for s in steps} == {0.0, 1.0}
    assert not [s for s in steps if s["failure_category"] == "scorer_error"]


def test_ifeval_scores_the_mocks_replies_with_lm_evals_checkers(mock: MockHandle, hub: dict[str, str],
                                                                 tmp_path: Path) -> None:
    steps = run(mock, hub, tmp_path, "ifeval")
    assert len(steps) == 30 and {s["reward"] for s in steps} == {0.0, 1.0}
    assert not [s for s in steps if s["failure_category"] == "scorer_error"]  # punkt_tab is there


def test_simpleqa_without_a_judge_is_refused_in_one_line(mock: MockHandle, hub: dict[str, str],
                                                         tmp_path: Path) -> None:
    proc = nel("eval", "run", "-b", "simpleqa", "--model-url", mock.base_url, "--model-id", "nel-mock",
               "--store", str(tmp_path / "nel.duckdb"), cwd=tmp_path, env=clean_env(**hub))
    line = assert_one_line_error(proc, 2)
    assert "graded by an LLM judge" in line and "type: judge" in line


def test_simpleqa_is_graded_by_the_mock_judge_into_three_grades(mock: MockHandle, hub: dict[str, str],
                                                                tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text(f"""\
services:
  solver: {{type: api, url: "{mock.base_url}", model: nel-mock}}
  grader: {{type: api, url: "{mock.base_url}", model: nel-mock-judge}}
benchmarks:
  - name: simpleqa
    repeats: 6
    solver: {{type: simple, service: solver}}
    scoring: {{include_defaults: false, metrics: [{{type: judge, name: grade, service: grader}}]}}
output: {{dir: out}}
""")
    proc = nel("eval", "run", "suite.yaml", "--no-progress", cwd=tmp_path, env=clean_env(**hub))
    assert_ok(proc)
    grades = open_store(tmp_path / "out").rows("SELECT extracted_answer, count(*) FROM steps GROUP BY ALL")
    assert {grade for grade, _ in grades} == {"CORRECT", "INCORRECT", "NOT_ATTEMPTED"}
