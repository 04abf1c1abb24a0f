"""mbpp, ifeval and simpleqa end to end: upstream-schema fixtures placed in the Hugging Face hub's cache layout
(offline), listed by `nel list`, and run against the mock model by `nel eval run`; ifeval's and simpleqa's own
run-level figures (lm-eval's, simple-evals') in summary.json, the export's bundle, the printed summary and
`nel eval stats`.

Needs the hub loader (``tests/hub_cache.py``, the registry honouring ``[hub]`` and ``environment =``).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from catalogue_fixtures import upstream_files
from hub_cache import place_dataset
from nel_helpers import assert_ok, assert_one_line_error, clean_env, nel

from workbench import open_store
from workbench.mock import MockHandle, mock_model
from workbench.scoring.ifeval import ifeval_figures
from workbench.scoring.simpleqa import simpleqa_figures

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


def run_files(root: Path) -> tuple[dict[str, object], dict[str, object]]:
    """The one run's summary.json and export bundle under ``root`` (an output directory)."""
    [summary] = root.glob("runs/*/summary.json")
    [bundle] = summary.parent.glob("eval-*.json")
    return orjson.loads(summary.read_bytes()), orjson.loads(bundle.read_bytes())


def assert_figures_shown(expected: dict[str, float], source: str, n_steps: int, over: str, output: Path,
                         printed: str) -> None:
    """The figures are in summary.json and the bundle as computed, and printed to 4 places under their names."""
    summary, bundle = run_files(output)
    for figures in (summary["benchmark_figures"], bundle["benchmark_figures"]):
        assert figures == {"source": source, "values": expected, "n_steps": n_steps, "over": over}
        assert list(figures["values"]) == list(expected)  # type: ignore[index]  # the authors' order
    assert f"{source}' figures over {n_steps} {over}:" in printed or f"{source}'s figures over {n_steps} {over}:" \
        in printed
    assert "  ".join(f"{name} {value:.4f}" for name, value in expected.items()) in printed


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


def _judged_simpleqa_run(mock: MockHandle, hub: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """simpleqa × 6 repeats answered by the mock and graded by the mock judge (a judge metric on its own service)."""
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
    return proc


def test_simpleqa_is_graded_by_the_mock_judge_into_three_grades(mock: MockHandle, hub: dict[str, str],
                                                                tmp_path: Path) -> None:
    proc = _judged_simpleqa_run(mock, hub, tmp_path)
    assert_ok(proc)
    grades = open_store(tmp_path / "out").rows("SELECT extracted_answer, count(*) FROM steps GROUP BY ALL")
    assert {grade for grade, _ in grades} == {"CORRECT", "INCORRECT", "NOT_ATTEMPTED"}


def test_ifeval_shows_lm_evals_four_figures_over_every_scored_attempt(mock: MockHandle, hub: dict[str, str],
                                                                     tmp_path: Path) -> None:
    proc = nel("eval", "run", "-b", "ifeval", "--model-url", mock.base_url, "--model-id", "nel-mock", "--repeats",
               "3", "--store", str(tmp_path / "nel.duckdb"), "--output-dir", str(tmp_path / "out"), "--no-progress",
               cwd=tmp_path, env=clean_env(**hub), timeout=150)
    assert_ok(proc)
    details = [orjson.loads(d) for (d,) in open_store(tmp_path / "nel.duckdb").rows(
        "SELECT scoring_details FROM steps")]
    assert len(details) == 30 and all("unchecked" not in d for d in details)
    expected = ifeval_figures(details)
    assert 0 < expected["prompt_level_strict_acc"] < expected["inst_level_loose_acc"] <= 1  # not a constant
    assert list(expected) == ["prompt_level_strict_acc", "inst_level_strict_acc", "prompt_level_loose_acc",
                              "inst_level_loose_acc"]
    assert_figures_shown(expected, "lm-eval", 30, "scored attempts, every repeat pooled", tmp_path / "out",
                         proc.stdout)
    [run_id] = [p.name for p in (tmp_path / "out" / "runs").iterdir()]
    stats = nel("eval", "stats", run_id, "--store", str(tmp_path / "nel.duckdb"), cwd=tmp_path,
                env=clean_env(**hub))
    assert_ok(stats)
    assert "lm-eval's figures over 30 scored attempts" in stats.stdout
    assert "  ".join(f"{name} {value:.4f}" for name, value in expected.items()) in stats.stdout


def test_simpleqa_shows_simple_evals_figures_over_every_graded_attempt(mock: MockHandle, hub: dict[str, str],
                                                                      tmp_path: Path) -> None:
    proc = _judged_simpleqa_run(mock, hub, tmp_path)
    assert_ok(proc)
    details = [orjson.loads(d) for (d,) in open_store(tmp_path / "out").rows("SELECT scoring_details FROM steps")]
    grades = [d["grade"] for d in details if d.get("grade")]
    assert len(grades) == len(details) and {"CORRECT", "INCORRECT", "NOT_ATTEMPTED"} == set(grades)
    expected = simpleqa_figures(grades)
    assert list(expected) == ["correct", "incorrect", "not_attempted", "correct_given_attempted", "f1"]
    assert_figures_shown(expected, "OpenAI simple-evals", len(grades), "graded attempts, every repeat pooled",
                         tmp_path / "out", proc.stdout)
