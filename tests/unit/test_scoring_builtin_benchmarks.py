"""The generated built-in benchmarks: reproducible data, and every expected answer scores 1.0."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from workbench.environments import get_environment

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
GENERATED = ["unit_conversion_mc", "element_symbols_qa"]


def _prepare_module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_prepare_{name}", BENCHMARKS / name / "prepare.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", GENERATED)
def test_prepare_reproduces_the_shipped_data_byte_for_byte(name: str) -> None:
    module = _prepare_module(name)
    assert module.render(module.generate()) == (BENCHMARKS / name / "data.jsonl").read_bytes()


@pytest.mark.parametrize("name", GENERATED)
def test_each_folder_has_its_definition_data_readme_and_licence(name: str) -> None:
    folder = BENCHMARKS / name
    for file in ("benchmark.toml", "data.jsonl", "prepare.py", "README.md", "LICENSE"):
        assert (folder / file).is_file(), file
    assert "Apache License" in (folder / "LICENSE").read_text()
    assert get_environment(name).describe()["license"] == "Apache-2.0"


@pytest.mark.parametrize("name", GENERATED)
def test_every_expected_answer_scores_one_through_the_benchmarks_own_scorer(name: str) -> None:
    env = get_environment(name)
    for i in range(len(env)):
        seed = env.seed(i)
        assert env.verify(seed.expected_answer, seed.expected_answer).reward == 1.0, i


def test_unit_conversion_questions_have_four_distinct_options_one_of_them_right() -> None:
    rows = [json.loads(line) for line in (BENCHMARKS / "unit_conversion_mc" / "data.jsonl").read_text().splitlines()]
    assert len(rows) >= 150
    assert len({r["question"] for r in rows}) == len(rows)
    assert {r["answer"] for r in rows} == set("ABCD")
    for row in rows:
        assert len(set(row["choices"])) == 4
        assert row["choices_text"].splitlines()[0].startswith("(A) ")
    assert {"length", "mass", "time", "volume", "temperature"} <= {r["category"] for r in rows}


def test_unit_conversion_right_options_are_right() -> None:
    rows = {
        json.loads(line)["question"]: json.loads(line)
        for line in (BENCHMARKS / "unit_conversion_mc" / "data.jsonl").read_text().splitlines()
    }
    row = rows.get("How many centimetres are there in 2.5 metres?") or next(
        r for q, r in rows.items() if q.startswith("What is") and "°C in degrees Fahrenheit" in q
    )
    right = row["choices"]["ABCD".index(row["answer"])]
    if "centimetres" in row["question"]:
        assert right == "250 centimetres"
    else:
        celsius = float(row["question"].split()[2])
        assert float(right.split()[0]) == pytest.approx(celsius * 9 / 5 + 32, abs=1e-3)


def test_element_questions_go_both_ways_for_all_118_elements() -> None:
    rows = [json.loads(line) for line in (BENCHMARKS / "element_symbols_qa" / "data.jsonl").read_text().splitlines()]
    assert len(rows) == 236
    by_question = {r["question"]: r["answer"] for r in rows}
    assert by_question["What is the chemical symbol for iron?"] == "Fe"
    assert by_question["Which element has the chemical symbol Na?"] == "Sodium"
    assert {r["atomic_number"] for r in rows} == set(range(1, 119))
