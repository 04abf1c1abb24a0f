"""Datasets named by hf:// and local files: the grammar, the split's files, the rows, and the errors a user acts on."""

from __future__ import annotations

from typing import ClassVar

import pytest
from hub_cache import jsonl_bytes, parquet_bytes

from workbench.datasources import HubRef, parse_hub_uri
from workbench.datasources.layout import split_files
from workbench.datasources.rows import read_rows
from workbench.errors import UsageError


class TestHubReferences:
    """NeMo Evaluator's form and huggingface_hub's canonical one parse to the same reference."""

    def test_nemo_evaluators_form_with_every_parameter(self):
        ref = parse_hub_uri("hf://my-org/my-data/sub/dir?split=validation&subset=en&revision=v1.0")
        assert ref == HubRef(repo="my-org/my-data", split="validation", subset="en", revision="v1.0", path="sub/dir")

    def test_defaults_are_the_test_split_on_main(self):
        ref = parse_hub_uri("hf://cais/mmlu")
        assert (ref.split, ref.subset, ref.revision, ref.path, ref.pinned) == ("test", None, "main", None, False)

    def test_huggingface_hubs_canonical_form_with_a_revision(self):
        sha = "a" * 40
        ref = parse_hub_uri(f"hf://datasets/org/name@{sha}/data/test.jsonl?split=test")
        assert (ref.repo, ref.revision, ref.path, ref.pinned) == ("org/name", sha, "data/test.jsonl", True)

    @pytest.mark.parametrize(("uri", "why"), [
        ("hf://only-org", "expected ORG/NAME"),
        ("hf://org/name?spilt=test", "unknown parameter 'spilt'"),
        ("hf://models/org/name", "only dataset repositories"),
        ("hf://datasets/org/name@v1?revision=v2", "two revisions"),
    ])
    def test_a_malformed_reference_is_one_line_with_the_grammar(self, uri, why):
        with pytest.raises(UsageError) as err:
            parse_hub_uri(uri)
        assert why in str(err.value) and "hf://ORG/NAME[/PATH]?split=" in str(err.value)
        assert "\n" not in str(err.value)

    def test_the_canonical_uri_round_trips(self):
        ref = HubRef(repo="o/n", split="dev", subset="x", revision="r", path="p")
        assert parse_hub_uri(ref.uri()) == ref


CARD = """---
configs:
- config_name: default
  data_files:
  - split: test
    path: "raw/eval-*.jsonl"
  - split: train
    path: raw/train.jsonl
- config_name: hard
  data_files:
  - split: test
    path: hard/*.parquet
---
# A dataset
"""


class TestSplitFiles:
    """The split's files: the card's configs when declared, else the usual layouts, else the files seen."""

    FILES: ClassVar[list] = ["README.md", "raw/eval-0.jsonl", "raw/eval-1.jsonl", "raw/train.jsonl", "hard/a.parquet"]

    def test_the_cards_configs_decide(self):
        assert split_files(HubRef("o/n"), self.FILES, CARD) == ["raw/eval-0.jsonl", "raw/eval-1.jsonl"]
        assert split_files(HubRef("o/n", subset="hard"), self.FILES, CARD) == ["hard/a.parquet"]

    def test_an_unknown_subset_lists_the_repos_subsets(self):
        with pytest.raises(UsageError, match=r"no subset 'easy'; the repo's subsets: default, hard"):
            split_files(HubRef("o/n", subset="easy"), self.FILES, CARD)

    @pytest.mark.parametrize(("files", "ref", "expected"), [
        (["all/test-00000-of-00001.parquet", "all/dev-0.parquet", "astronomy/test-0.parquet"],
         HubRef("cais/mmlu", subset="all"), ["all/test-00000-of-00001.parquet"]),
        (["data/test-00000-of-00002.parquet", "data/test-00001-of-00002.parquet", "data/train-0.parquet"],
         HubRef("o/n"), ["data/test-00000-of-00002.parquet", "data/test-00001-of-00002.parquet"]),
        (["test.jsonl", "train.jsonl"], HubRef("o/n"), ["test.jsonl"]),
        (["main/test/0000.parquet", "main/train/0000.parquet"], HubRef("o/n", subset="main"),
         ["main/test/0000.parquet"]),
        (["a/b/questions.csv", "other.csv"], HubRef("o/n", path="a/b/questions.csv"), ["a/b/questions.csv"]),
    ])
    def test_the_usual_layouts(self, files, ref, expected):
        assert split_files(ref, files, None) == expected

    def test_globs_of_a_builtin_select_exactly(self):
        ref = HubRef("o/n", files=("raw/eval-*.jsonl",))
        assert split_files(ref, self.FILES, CARD) == ["raw/eval-0.jsonl", "raw/eval-1.jsonl"]

    def test_no_file_for_the_split_lists_the_data_files_seen(self):
        with pytest.raises(UsageError) as err:
            split_files(HubRef("o/n", split="validation"), ["train.jsonl", "README.md"], None)
        assert "no file holds split 'validation'; data files in the repo: train.jsonl" in str(err.value)


class TestRows:
    """Every format gives the same rows, and a bad one is named by file and row."""

    ROWS: ClassVar[list] = [{"question": "2+2?", "answer": "4"}, {"question": "3+3?", "answer": "6"}]

    def test_parquet_csv_jsonl_and_json_read_alike(self, tmp_path):
        (tmp_path / "d.parquet").write_bytes(parquet_bytes(self.ROWS))
        (tmp_path / "d.jsonl").write_bytes(jsonl_bytes(self.ROWS))
        (tmp_path / "d.json").write_text('[{"question": "2+2?", "answer": "4"}, {"question": "3+3?", "answer": "6"}]')
        (tmp_path / "d.csv").write_text("question,answer\n2+2?,4\n3+3?,6\n")
        for name in ("d.parquet", "d.jsonl", "d.json", "d.csv"):
            assert read_rows(tmp_path / name).rows == self.ROWS, name

    def test_a_bad_line_and_an_unknown_format_are_named(self, tmp_path):
        (tmp_path / "d.jsonl").write_text('{"a": 1}\n{oops\n')
        with pytest.raises(UsageError, match=r"d.jsonl:2: not valid JSON"):
            read_rows(tmp_path / "d.jsonl")
        (tmp_path / "d.xlsx").write_bytes(b"")
        with pytest.raises(UsageError, match=r"d.xlsx: datasets must be .jsonl, .json, .csv, .parquet files"):
            read_rows(tmp_path / "d.xlsx")

    def test_a_damaged_parquet_file_is_one_line(self, tmp_path):
        (tmp_path / "d.parquet").write_bytes(b"PAR1 not really")
        with pytest.raises(UsageError, match=r"d.parquet: not a readable Parquet file"):
            read_rows(tmp_path / "d.parquet")
