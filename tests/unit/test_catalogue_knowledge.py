"""The knowledge and maths half of the standard catalogue, from upstream-schema rows to scored answers.

Each benchmark's converter reads its fixture as the upstream file holds it (tests/catalogue_fixtures.py);
the frozen rows then go through the benchmark's own ``benchmark.toml`` (its prompt, fields and scorer)
with the ``[hub]`` table swapped for a local file of those rows, as the frozen form is served.
"""

from __future__ import annotations

import importlib
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from catalogue_fixtures import upstream_rows

from workbench.catalogue import triviaqa
from workbench.catalogue.choices import LETTERS, content_seed, mcq_row, shuffled
from workbench.catalogue.gpqa_diamond import convert as convert_gpqa
from workbench.environments.dataset import DatasetEnvironment
from workbench.errors import UsageError
from workbench.resources import benchmarks_dir
from workbench.scoring import get_scorer
from workbench.scoring.aliases import SEPARATOR, normalize, score_aliases, split_aliases

MCQ = ("mmlu", "mmlu_pro", "gpqa_diamond", "arc_challenge")
MATHS = ("math500", "aime24", "aime25")
ALL = (*MCQ, "triviaqa", *MATHS)


def hub_table(name: str) -> dict[str, Any]:
    table: dict[str, Any] = tomllib.loads((benchmarks_dir() / name / "benchmark.toml").read_text())["hub"]
    return table


def frozen_rows(name: str) -> list[dict[str, Any]]:
    """The fixture's rows through the converter the benchmark's ``[hub]`` table names."""
    module, _, function = hub_table(name)["convert"].partition(":")
    convert = getattr(importlib.import_module(module), function)
    return [row for row in map(convert, upstream_rows(name)) if row is not None]


def environment(name: str, tmp_path: Path) -> DatasetEnvironment:
    """The benchmark as its frozen form serves it: its toml with the frozen rows in a local file."""
    text = (benchmarks_dir() / name / "benchmark.toml").read_text(encoding="utf-8")
    frozen = tmp_path / "frozen.jsonl"
    frozen.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in frozen_rows(name)))
    local = tmp_path / "benchmark.toml"
    local.write_text(f'dataset = "{frozen.name}"\n' + text.split("\n[hub]", 1)[0], encoding="utf-8")
    return DatasetEnvironment.from_definition(local)


class TestEveryBenchmark:
    """What each of the eight benchmarks promises, on its fixture."""

    @pytest.mark.parametrize("name", ALL)
    def test_its_hub_table_names_a_dataset_a_split_and_a_converter_that_imports(self, name: str) -> None:
        hub = hub_table(name)
        assert "/" in hub["repo"] and hub["split"] and hub["revision"]
        module, _, function = hub["convert"].partition(":")
        assert module == f"workbench.catalogue.{name}" and callable(getattr(importlib.import_module(module), function))

    @pytest.mark.parametrize("name", ALL)
    def test_its_readme_cites_source_licence_prompt_and_grading(self, name: str) -> None:
        readme = (benchmarks_dir() / name / "README.md").read_text(encoding="utf-8")
        for heading in ("## Source", "## Licence", "## Prompt and grading", "## Repeats and categories"):
            assert heading in readme, f"{name}/README.md lacks {heading!r}"
        assert hub_table(name)["repo"] in readme

    @pytest.mark.parametrize("name", ALL)
    def test_every_expected_answer_scores_full_marks(self, name: str, tmp_path: Path) -> None:
        env = environment(name, tmp_path)
        assert len(env) == len(upstream_rows(name)) >= 5
        for idx in range(len(env)):
            ok, how = env.check_answer_key(idx)
            assert ok, f"{name}[{idx}]: {how}"

    @pytest.mark.parametrize("name", ALL)
    def test_conversion_is_deterministic(self, name: str) -> None:
        assert frozen_rows(name) == frozen_rows(name)

    @pytest.mark.parametrize("name", ALL)
    def test_the_prompt_holds_the_question_verbatim(self, name: str, tmp_path: Path) -> None:
        env = environment(name, tmp_path)
        for idx, entry in enumerate(env.answer_key()):
            assert entry.question in env.seed(idx).prompt


class TestMultipleChoice:
    """MMLU, MMLU-Pro, GPQA Diamond and ARC-Challenge: letters, options and categories."""

    def test_mmlu_renders_simple_evals_template_with_four_lettered_options(self, tmp_path: Path) -> None:
        seed = environment("mmlu", tmp_path).seed(0)
        assert seed.prompt.startswith("Answer the following multiple choice question. The last line of your "
                                      "response should be of the following format: 'Answer: $LETTER' (without "
                                      "quotes) where LETTER is one of ABCD. Think step by step before answering.")
        assert seed.prompt.endswith("\n\nA) 3\nB) 4\nC) 6\nD) 12")
        assert seed.expected_answer == "B"
        assert seed.metadata["category"] == "abstract_algebra"

    @pytest.mark.parametrize("name", MCQ)
    def test_a_right_letter_scores_one_and_a_wrong_letter_zero(self, name: str, tmp_path: Path) -> None:
        env = environment(name, tmp_path)
        for idx in range(len(env)):
            seed = env.seed(idx)
            wrong = next(letter for letter in LETTERS if letter != seed.expected_answer)
            assert env.verify(f"Reasoning...\nAnswer: {seed.expected_answer}", seed.expected_answer).reward == 1.0
            assert env.verify(f"Reasoning...\nAnswer: {wrong}", seed.expected_answer).reward == 0.0

    def test_mmlu_pro_offers_up_to_ten_letters_and_only_the_options_a_question_has(self, tmp_path: Path) -> None:
        env = environment("mmlu_pro", tmp_path)
        prompts = [env.seed(i).prompt for i in range(len(env))]
        assert "where LETTER is one of ABCDEFGHIJ." in prompts[0] and prompts[0].endswith("J) 9")
        assert "where LETTER is one of ABCDEF." in prompts[2] and "G)" not in prompts[2].split("\n\n", 2)[2]
        assert env.seed(3).expected_answer == "J"
        assert [env.seed(i).metadata["category"] for i in range(len(env))] == [
            "math", "physics", "law", "computer science", "chemistry"]

    def test_mmlu_pro_refuses_an_answer_letter_that_disagrees_with_its_index(self) -> None:
        from workbench.catalogue.mmlu_pro import convert

        row = {**upstream_rows("mmlu_pro")[0], "answer": "D"}
        with pytest.raises(UsageError, match="question 70: answer 'D' disagrees with answer_index 2"):
            convert(row)

    def test_arc_numeric_labels_become_letters_and_the_exam_is_the_category(self, tmp_path: Path) -> None:
        env = environment("arc_challenge", tmp_path)
        numeric = env.seed(1)
        assert numeric.prompt.endswith("A) condensation\nB) transpiration\nC) precipitation\nD) infiltration")
        assert numeric.expected_answer == "B"
        assert "one of ABC." in env.seed(2).prompt and env.seed(2).expected_answer == "C"
        assert "one of ABCDE." in env.seed(3).prompt and env.seed(3).expected_answer == "E"
        assert [env.seed(i).metadata["category"] for i in range(len(env))] == [
            "Mercury", "NYSEDREGENTS", "MCAS", "Mercury", "ACTAAP"]

    def test_mcq_rows_refuse_too_many_options_and_an_answer_out_of_range(self) -> None:
        with pytest.raises(UsageError, match="2 to 10 options, got 11"):
            mcq_row("q", [str(i) for i in range(11)], 0)
        with pytest.raises(UsageError, match="correct option 4 is not one of the 4 options"):
            mcq_row("q", ["a", "b", "c", "d"], 4)


class TestGpqaShuffle:
    """GPQA's options are shuffled once per question, from the question's own text."""

    def test_the_correct_answer_is_under_the_letter_the_shuffle_gave_it(self) -> None:
        for upstream, frozen in zip(upstream_rows("gpqa_diamond"), frozen_rows("gpqa_diamond"), strict=True):
            assert frozen["options"][LETTERS.index(frozen["answer"])] == upstream["Correct Answer"]
            assert sorted(frozen["options"]) == sorted(upstream[c] for c in (
                "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3"))

    def test_the_same_question_gets_the_same_order_whatever_its_position(self) -> None:
        rows = upstream_rows("gpqa_diamond")
        assert [convert_gpqa(r) for r in reversed(rows)] == list(reversed([convert_gpqa(r) for r in rows]))

    def test_different_questions_get_different_orders(self) -> None:
        letters = Counter(row["answer"] for row in frozen_rows("gpqa_diamond"))
        assert len(letters) >= 2, f"every correct answer landed under the same letter: {letters}"
        orders = {tuple(shuffled(["w", "x", "y", "z"], 0, content_seed(str(i)))[0]) for i in range(50)}
        assert len(orders) > 10

    def test_the_order_is_a_function_of_the_seed(self) -> None:
        assert shuffled(list("abcd"), 2, 12345) == shuffled(list("abcd"), 2, 12345)
        assert content_seed("q", "a") == content_seed("q", "a") != content_seed("q", "b")

    def test_the_domain_is_the_category_and_the_subdomain_is_kept(self, tmp_path: Path) -> None:
        env = environment("gpqa_diamond", tmp_path)
        assert {env.seed(i).metadata["category"] for i in range(len(env))} == {"Physics", "Chemistry", "Biology"}
        assert env.seed(0).metadata["subdomain"] == "Quantum Mechanics"


class TestTriviaQA:
    """Any alias of the answer counts, normalised as the TriviaQA authors' script does."""

    def test_expected_answer_is_readable_canonical_first(self, tmp_path: Path) -> None:
        seed = environment("triviaqa", tmp_path).seed(5)
        assert seed.expected_answer == "Sunset Boulevard | Sunset Blvd. | Sunset Boulevard (film)"
        assert seed.prompt.endswith("Question: Which 1950 film features the line 'I am big. It's the pictures "
                                    "that got small'?\nAnswer:")

    @pytest.mark.parametrize("response", ["Sunset Blvd", "sunset boulevard.", "**Sunset Boulevard (film)**",
                                          "The answer is: Sunset Blvd.", "I think so.\nAnswer: SUNSET BOULEVARD"])
    def test_any_alias_in_any_case_and_punctuation_scores_one(self, response: str) -> None:
        expected = "Sunset Boulevard | Sunset Blvd. | Sunset Boulevard (film)"
        verdict = score_aliases(response, expected)
        assert verdict.reward == 1.0, verdict.scoring_details

    @pytest.mark.parametrize("response", ["Sunset", "Mulholland Drive", "", "Boulevard of Broken Dreams"])
    def test_another_answer_scores_zero(self, response: str) -> None:
        assert score_aliases(response, "Sunset Boulevard | Sunset Blvd.").reward == 0.0

    def test_articles_and_underscores_do_not_count(self) -> None:
        assert normalize("The  Eternal_City!") == "eternal city"
        assert score_aliases("the eternal city", "Rome | Roma | The Eternal City").reward == 1.0

    def test_the_answer_is_read_from_the_first_line_without_a_marker(self) -> None:
        verdict = score_aliases("Mars\nIt is red because of iron oxide.", "Mars | Planet Mars")
        assert verdict.reward == 1.0 and verdict.extracted_answer == "Mars"

    def test_the_converter_and_the_scorer_agree_on_the_separator(self) -> None:
        assert triviaqa.SEPARATOR == SEPARATOR
        assert split_aliases("Au | AU | Gold (element)") == ["Au", "AU", "Gold (element)"]

    def test_duplicate_aliases_are_kept_once_and_a_row_without_answer_is_dropped(self) -> None:
        row = upstream_rows("triviaqa")[0]
        frozen = triviaqa.convert({**row, "answer": {**row["answer"], "aliases": ["Mars", "Mars", "Planet Mars"]}})
        assert frozen is not None and frozen["answers"] == "Mars | Planet Mars"
        assert triviaqa.convert({**row, "answer": {**row["answer"], "value": "", "aliases": []}}) is None

    def test_the_aliases_scorer_is_registered(self) -> None:
        assert get_scorer("aliases")("Roma", "Rome | Roma").reward == 1.0


class TestMaths:
    """MATH-500, AIME 2024 and AIME 2025: boxed answers compared as mathematics."""

    def test_math500_renders_nemo_skills_prompt(self, tmp_path: Path) -> None:
        seed = environment("math500", tmp_path).seed(0)
        assert seed.prompt == ("Solve the following math problem. Make sure to put the answer (and only answer) "
                               "inside \\boxed{}.\n\nWhat is $\\frac{1}{2} + \\frac{1}{4}$?")
        assert seed.expected_answer == "\\frac{3}{4}"

    def test_math500_subject_is_the_category_and_level_is_kept(self, tmp_path: Path) -> None:
        env = environment("math500", tmp_path)
        assert env.seed(3).metadata == {"idx": 3, "category": "Algebra", "level": 3}

    @pytest.mark.parametrize(("name", "idx", "right", "wrong"), [
        ("math500", 0, "... so the sum is $\\boxed{0.75}$.", "$\\boxed{\\frac{2}{3}}$"),
        ("math500", 2, "The diagonal is \\boxed{\\sqrt{2}}", "\\boxed{2}"),
        ("math500", 3, "They meet at \\boxed{(1,2)}.", "\\boxed{(2,1)}"),
        ("math500", 5, "\\boxed{9\\pi}", "\\boxed{6\\pi}"),
        ("aime24", 0, "The remainder is \\boxed{24}.", "\\boxed{240}"),
        ("aime25", 3, "Therefore the answer is \\boxed{986}.", "\\boxed{985}"),
    ])
    def test_equivalent_answers_score_one_and_others_zero(self, name: str, idx: int, right: str, wrong: str,
                                                         tmp_path: Path) -> None:
        env = environment(name, tmp_path)
        expected = env.seed(idx).expected_answer
        assert env.verify(right, expected).reward == 1.0
        assert env.verify(wrong, expected).reward == 0.0

    def test_aime24_paper_is_the_category(self, tmp_path: Path) -> None:
        env = environment("aime24", tmp_path)
        assert [env.seed(i).metadata["category"] for i in range(len(env))] == [
            "AIME 2024 I", "AIME 2024 I", "AIME 2024 II", "AIME 2024 II", "AIME 2024 II"]

    @pytest.mark.parametrize("name", MATHS)
    def test_math_benchmarks_score_with_math_verify_and_repeat(self, name: str, tmp_path: Path) -> None:
        description = environment(name, tmp_path).describe()
        assert description["scorer"] == "math" and description["domain"] == "math"
        assert description["default_repeats"] >= 4


class TestScorerEdges:
    """The two scorer rules the catalogue relies on beyond their usual cases."""

    def test_a_list_of_forms_is_right_only_when_every_form_is_an_alias(self) -> None:
        assert score_aliases("Mars | Planet Mars", "Mars | Planet Mars | Fourth planet").reward == 1.0
        assert score_aliases("Mars | Venus", "Mars | Planet Mars | Fourth planet").reward == 0.0

    @pytest.mark.parametrize(("response", "expected", "reward"), [
        ("9\\pi", "9\\pi", 1.0), ("9", "9\\pi", 0.0), ("\\sqrt{2}", "\\sqrt{2}", 1.0), ("(1, 2)", "(1,2)", 1.0),
        ("The answer is 9", "9\\pi", 0.0),
    ])
    def test_a_bare_latex_answer_is_read_as_latex(self, response: str, expected: str, reward: float) -> None:
        assert get_scorer("math")(response, expected).reward == reward
