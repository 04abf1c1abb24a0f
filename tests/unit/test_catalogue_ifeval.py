"""IFEval from its upstream JSONL: the converter, lm-eval's checkers reused offline, and the mock's replies."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nltk
import orjson
import pytest
from catalogue_fixtures import frozen_environment, upstream_rows

from workbench.catalogue.ifeval import convert
from workbench.environments.ifeval import IFEvalEnvironment
from workbench.mock.ifeval_replies import right_reply, wrong_reply
from workbench.scoring import ifeval as scoring
from workbench.scoring.ifeval import ifeval_figures, score_ifeval

UNSUPPORTED = {"language:response_language"}
"""Instructions the mock does not write for (text in another language): left to chance, and to the checkers."""


@pytest.fixture
def punkt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A minimal valid punkt_tab (empty learned parameters: Punkt's rules alone) in a private NLTK data dir."""
    english = tmp_path / "nltk_data" / "tokenizers" / "punkt_tab" / "english"
    english.mkdir(parents=True)
    for name in ("collocations.tab", "sent_starters.txt", "abbrev_types.txt", "ortho_context.tab"):
        (english / name).write_text("")
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path / "nltk_data")])
    return english


@pytest.fixture
def no_punkt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path / "empty")])


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> IFEvalEnvironment:
    built = frozen_environment("ifeval", tmp_path_factory.mktemp("ifeval"))
    assert isinstance(built, IFEvalEnvironment)
    return built


def test_rows_convert_with_their_instructions_as_the_expected_answer_and_the_first_group_as_category() -> None:
    row = upstream_rows("ifeval")[0]
    out = convert(row)
    assert out is not None and out["prompt"] == row["prompt"] and out["category"] == "punctuation"
    assert orjson.loads(out["instructions"]) == {"instruction_id_list": row["instruction_id_list"],
                                                 "kwargs": row["kwargs"]}


def test_the_hub_parquet_views_null_arguments_are_dropped() -> None:
    out = convert({"key": 1, "prompt": "p", "instruction_id_list": ["punctuation:no_comma"],
                   "kwargs": [{"num_words": None, "relation": None}]})
    assert out is not None and out["kwargs"] == [{}]


def test_the_prompt_is_the_authors_verbatim_and_the_category_is_the_instruction_group(env: IFEvalEnvironment) -> None:
    seed = env.seed(3)
    assert seed.prompt == upstream_rows("ifeval")[3]["prompt"]
    assert seed.metadata["category"] == "detectable_format" and seed.metadata["ifeval_key"] == 1012


def test_importing_lm_evals_checkers_downloads_nothing_and_prints_nothing(tmp_path: Path) -> None:
    """lm-eval's module calls nltk.download("punkt_tab") at import when it is missing; ours must not."""
    code = ("import nltk, sys\n"
            "nltk.download = lambda *a, **k: sys.exit('nltk.download was called')\n"
            "from workbench.scoring.ifeval import checkers, punkt_available\n"
            "assert not punkt_available()\n"
            "checkers()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**_env(), "NLTK_DATA": str(tmp_path), "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and "punkt" not in proc.stderr.lower()


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "LOCAL_RANK"}


def test_without_punkt_the_sentence_count_is_recorded_as_unchecked_not_passed_or_crashed(no_punkt: None) -> None:
    verdict = score_ifeval("One. Two.", "p", ["length_constraints:number_sentences", "punctuation:no_comma"],
                           [{"relation": "less than", "num_sentences": 5}, {}])
    assert verdict.reward == 0.0 and verdict.metadata == {"failure_category": "scorer_error"}
    assert verdict.scoring_details["unchecked"] == ["length_constraints:number_sentences"]
    assert "nel benchmarks pull ifeval" in verdict.scoring_details["reason"]
    assert verdict.scoring_details["instructions"] == [{"id": "punctuation:no_comma", "strict": True, "loose": True}]


def test_with_punkt_sentences_are_counted(punkt: Path) -> None:
    ids, kwargs = ["length_constraints:number_sentences"], [{"relation": "less than", "num_sentences": 3}]
    assert score_ifeval("One sentence. Two sentences.", "p", ids, kwargs).reward == 1.0
    assert score_ifeval("One. Two. Three. Four.", "p", ids, kwargs).reward == 0.0


def test_scores_agree_with_lm_evals_own_process_results(env: IFEvalEnvironment, punkt: Path) -> None:
    """The oracle: lm-eval's ifeval task's process_results on the same document and response."""
    utils = scoring.checkers()
    for idx, row in enumerate(env.rows):
        for reply in (right_reply(row["instructions"]), wrong_reply(row["instructions"], 1 << 8), "A, b"):
            doc = {"key": row["key"], "prompt": row["prompt"], "instruction_id_list": row["instruction_id_list"],
                   "kwargs": row["kwargs"]}
            theirs = utils.process_results(doc, [reply])
            ours = env.verify(reply, row["instructions"], idx=idx).scoring_details
            assert ours["prompt_level_strict_acc"] == theirs["prompt_level_strict_acc"]
            assert ours["prompt_level_loose_acc"] == theirs["prompt_level_loose_acc"]
            assert [i["strict"] for i in ours["instructions"]] == theirs["inst_level_strict_acc"]
            assert [i["loose"] for i in ours["instructions"]] == theirs["inst_level_loose_acc"]


def test_the_mocks_right_replies_follow_every_instruction_and_its_wrong_ones_do_not(
        env: IFEvalEnvironment, punkt: Path) -> None:
    checked = 0
    for idx, row in enumerate(env.rows):
        if UNSUPPORTED & set(row["instruction_id_list"]):
            continue
        right = env.verify(right_reply(row["instructions"]), row["instructions"], idx=idx)
        assert right.reward == 1.0, (row["key"], right.scoring_details, right_reply(row["instructions"]))
        for choice in range(0, 40 << 8, 1 << 8):
            wrong = env.verify(wrong_reply(row["instructions"], choice), row["instructions"], idx=idx)
            assert wrong.reward == 0.0, (row["key"], wrong_reply(row["instructions"], choice))
        checked += 1
    assert checked == len(env) - 1


def test_run_figures_pool_instructions_and_average_prompts() -> None:
    details = [{"prompt_level_strict_acc": True, "prompt_level_loose_acc": True,
                "inst_level_strict": [2, 2], "inst_level_loose": [2, 2]},
               {"prompt_level_strict_acc": False, "prompt_level_loose_acc": True,
                "inst_level_strict": [0, 2], "inst_level_loose": [2, 2]}]
    assert ifeval_figures(details) == {"prompt_level_strict_acc": 0.5, "inst_level_strict_acc": 0.5,
                                       "prompt_level_loose_acc": 1.0, "inst_level_loose_acc": 1.0}


def test_every_fixture_instruction_is_known_to_lm_eval(env: IFEvalEnvironment) -> None:
    assert all(env.check_answer_key(i)[0] for i in range(len(env)))


def test_without_the_lm_eval_extra_building_ifeval_names_the_install_command(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from workbench.extras import MissingExtra

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "lm_eval" else real(name, *a))
    with pytest.raises(MissingExtra, match=r"pip install 'nel-workbench\[lm-eval\]'"):
        frozen_environment("ifeval", tmp_path)
