"""BYOB as NeMo Evaluator documents it: `from workbench import benchmark, scorer, ScorerInput, answer_line`, a
dataset="hf://…" or a local .parquet, and the scoring primitives' documented behaviour."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import ClassVar

import pytest
from hub_cache import hub_environment, parquet_bytes, place_dataset

from workbench import ScorerInput, answer_line, exact_match, multichoice_regex, numeric_match
from workbench.environments import registry
from workbench.environments.byob import load_benchmark_file
from workbench.errors import UsageError


def sample(response: str, target: object) -> ScorerInput:
    return ScorerInput(response=response, target=target, metadata={})


class TestScoringPrimitives:
    """Each returns {"correct": bool, "extracted": the answer it read}."""

    def test_exact_match_normalises_case_punctuation_and_articles(self):
        assert exact_match(sample("  Paris.  ", "paris")) == {"correct": True, "extracted": "paris"}
        assert exact_match(sample("The Nile", "nile"))["correct"]
        assert not exact_match(sample("Lyon", "paris"))["correct"]

    def test_multichoice_regex_reads_the_last_answer_letter(self):
        assert multichoice_regex(sample("The answer is B because...\nAnswer: B", "B")) == {"correct": True,
                                                                                          "extracted": "B"}
        assert multichoice_regex(sample("Answer: A\nOn reflection,\nAnswer: C", "C"))["extracted"] == "C"
        assert multichoice_regex(sample("no letter here", "A")) == {"correct": False, "extracted": None}

    def test_multichoice_regex_takes_a_pattern_for_more_choices(self):
        ten = r"(?i)Answer\s*:\s*([A-J])"
        assert not multichoice_regex(sample("Answer: H", "H"))["correct"]  # A-D by default
        assert multichoice_regex(sample("Answer: H", "H"), pattern=ten)["correct"]

    @pytest.mark.parametrize(("response", "target"), [
        ("Let me think.\nAnswer: 42", "42"),
        ("Answer: $\\frac{1}{2}$", "0.5"),
        ("Answer: \\boxed{1/2}.", "1/2"),
        ("**Answer:** 7", "7"),
        ("Final Answer: x + 1", "x+1"),
        (" 12", "12"),  # the continuation of a prompt ending in "Answer:"
    ])
    def test_answer_line_compares_the_last_answer_line_with_math_normalisation(self, response, target):
        assert answer_line(sample(response, target))["correct"], response

    def test_answer_line_takes_the_last_answer_and_tells_what_it_read(self):
        verdict = answer_line(sample("Answer: 3\nwait, no.\nAnswer: 4", "3"))
        assert verdict == {"correct": False, "extracted": "4"}

    def test_numeric_match_reads_the_final_number_within_a_tolerance(self):
        assert numeric_match(sample("so it costs $1,000.", "1000"))["correct"]
        assert not numeric_match(sample("Answer: 10", "1"))["correct"]
        assert numeric_match(sample("about 3.14", "3.1416"), tolerance=0.01)["correct"]
        assert not numeric_match(sample("about 3.14", "3.1416"))["correct"]


SEED_EXAMPLE = '''
from workbench import benchmark, scorer, ScorerInput, answer_line

@benchmark(name="{name}", dataset="{dataset}", prompt="Question: {{question}}\\nAnswer:", target_field="answer")
@scorer
def check(sample: ScorerInput) -> dict:
    return answer_line(sample)
'''


@pytest.fixture
def fresh_registry(monkeypatch):
    for table in ("_REGISTRY", "_TOML", "_WITH_DATASET"):
        monkeypatch.setattr(registry, table, {})
    registry.get_environment.cache_clear()
    yield
    registry.get_environment.cache_clear()


class TestByobDatasets:
    ROWS: ClassVar[list] = [{"question": f"{i} squared?", "answer": str(i * i)} for i in range(5)]

    def test_the_seed_example_works_on_an_hf_dataset(self, monkeypatch, tmp_path, fresh_registry):
        hf = hub_environment(monkeypatch, tmp_path)
        sha = place_dataset(hf, "my-org/my-data", {"data/test-00000-of-00001.parquet": parquet_bytes(self.ROWS)})
        (tmp_path / "b.py").write_text(SEED_EXAMPLE.format(name="squares", dataset="hf://my-org/my-data?split=test"))
        assert load_benchmark_file(tmp_path / "b.py") == ["squares"]
        env = registry.get_environment("squares")
        seed = env.seed(3)
        assert seed.prompt == "Question: 3 squared?\nAnswer:"
        verdict = env.verify(" 9", seed.expected_answer, **seed.metadata)
        assert (verdict.reward, verdict.extracted_answer) == (1.0, "9")
        assert env.dataset_identity == {"source": "hf://my-org/my-data?split=test&revision=main", "revision": sha}

    def test_a_local_parquet_dataset(self, tmp_path, fresh_registry):
        (tmp_path / "rows.parquet").write_bytes(parquet_bytes(self.ROWS))
        (tmp_path / "b.py").write_text(SEED_EXAMPLE.format(name="squares-local", dataset="rows.parquet"))
        load_benchmark_file(tmp_path / "b.py")
        env = registry.get_environment("squares-local")
        assert len(env) == 5 and env.dataset_identity is None

    def test_a_row_missing_a_prompt_field_names_the_row(self, tmp_path, fresh_registry):
        rows = [*self.ROWS[:2], {"answer": "x"}]
        (tmp_path / "rows.parquet").write_bytes(parquet_bytes(rows))  # Parquet: the gap is a null
        (tmp_path / "rows.jsonl").write_bytes(b'{"question": "a", "answer": "1"}\n\n{"answer": "2"}\n')
        for name, dataset, where in (("bad-parquet", "rows.parquet", "rows.parquet: row 3"),
                                     ("bad-jsonl", "rows.jsonl", "rows.jsonl:3")):
            (tmp_path / f"{name}.py").write_text(SEED_EXAMPLE.format(name=name, dataset=dataset))
            load_benchmark_file(tmp_path / f"{name}.py")
            with pytest.raises(UsageError, match=rf"{where}: the prompt uses \{{question\}}, which the row lacks"):
                registry.get_environment(name)


def test_the_byob_names_do_not_load_with_the_package():
    """`nel --help` imports `workbench`: the BYOB names (and the scorers behind them) load only when asked for."""
    code = "import sys, workbench; print('workbench.environments.byob' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    code = textwrap.dedent("""
        import workbench
        try:
            workbench.no_such_name
        except AttributeError as exc:
            print(exc)
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "no attribute 'no_such_name'" in out
