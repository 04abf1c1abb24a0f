"""Hub datasets from the Hugging Face cache, offline: BYOB's hf://, built-ins' [hub] tables frozen on first load,
`nel list`'s facts without reading data, and the one-line errors (not present, missing field, damaged)."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from hub_cache import hub_environment, jsonl_bytes, parquet_bytes, place_dataset

from workbench.datasources import DataNotPresent, data_dir, load_hub, parse_hub_uri
from workbench.environments import registry
from workbench.environments.dataset import DatasetEnvironment
from workbench.errors import UsageError

ROWS = [{"q": f"What is {i} + {i}?", "a": i + i, "topic": "sums" if i % 2 else "doubles"} for i in range(6)]
CONVERTER = '''
def convert(row):
    """Upstream {q, a, topic} -> the frozen {question, answer, category}; odd rows of topic 'skip' dropped."""
    if row["topic"] == "skip":
        return None
    return {"question": row["q"], "answer": str(row["a"]), "category": row["topic"]}
'''
TOML = '''
name = "{name}"
description = "sums from the hub"
domain = "math"
prompt = "Q: {{question}}\\nA:"
input_field = "question"
target_field = "answer"
metadata_fields = {{ category = "category" }}
scorer = "numeric"
default_repeats = 3
license = "CC-BY-4.0"
{extra}
[hub]
repo = "test-org/sums"
split = "test"
convert = "nel_test_sums:convert"
'''


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An offline Hugging Face cache and NEL_DATA_DIR of this test's own."""
    return hub_environment(monkeypatch, tmp_path)


@pytest.fixture
def catalogue(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """A benchmarks directory of this test's own, with the converter importable, and a fresh registry."""
    bench_dir, modules = tmp_path / "benchmarks", tmp_path / "modules"
    bench_dir.mkdir()
    modules.mkdir()
    (modules / "nel_test_sums.py").write_text(CONVERTER)
    monkeypatch.syspath_prepend(str(modules))
    for module in ("nel_test_sums", "nel_test_env"):  # this test's copies, not an earlier test's
        monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.setattr(registry, "benchmarks_dir", lambda: bench_dir)
    for table in ("_REGISTRY", "_TOML", "_WITH_DATASET"):
        monkeypatch.setattr(registry, table, {})
    registry.get_environment.cache_clear()
    yield bench_dir
    registry.get_environment.cache_clear()


def add_benchmark(bench_dir: Path, name: str = "sums", extra: str = "") -> Path:
    folder = bench_dir / name
    folder.mkdir()
    (folder / "benchmark.toml").write_text(TOML.format(name=name, extra=extra))
    return folder


def test_a_placed_dataset_is_what_huggingface_hubs_own_cache_scan_sees(hub):
    sha = place_dataset(hub, "test-org/sums", {"data/test-00000-of-00001.parquet": parquet_bytes(ROWS)})
    from huggingface_hub import scan_cache_dir

    scanned = scan_cache_dir(hub / "hub")
    assert not scanned.warnings
    [repo] = scanned.repos
    assert (repo.repo_id, repo.repo_type) == ("test-org/sums", "dataset")
    [revision] = repo.revisions
    assert revision.commit_hash == sha and revision.refs == frozenset({"main"})
    assert [f.file_name for f in revision.files] == ["test-00000-of-00001.parquet"]


class TestByobStyleLoads:
    """An hf:// dataset read from the cache offline, pinned to the commit it came from."""

    def test_rows_and_the_commit_they_came_from(self, hub):
        sha = place_dataset(hub, "test-org/sums", {"data/test-00000-of-00001.parquet": parquet_bytes(ROWS)})
        loaded = load_hub(parse_hub_uri("hf://test-org/sums?split=test"))
        assert loaded.rows == ROWS
        assert loaded.identity() == {"source": "hf://test-org/sums?split=test&revision=main", "revision": sha}
        assert loaded.where(4) == "test-org/sums/data/test-00000-of-00001.parquet: row 5"

    def test_a_revision_is_read_at_that_commit_whatever_main_says(self, hub):
        old = place_dataset(hub, "test-org/sums", {"test.jsonl": jsonl_bytes(ROWS[:2])})
        place_dataset(hub, "test-org/sums", {"test.jsonl": jsonl_bytes(ROWS)})
        assert len(load_hub(parse_hub_uri(f"hf://test-org/sums?revision={old}")).rows) == 2
        assert len(load_hub(parse_hub_uri("hf://test-org/sums")).rows) == len(ROWS)

    def test_offline_with_nothing_cached_is_one_line_saying_how_to_fetch_it(self, hub):
        with pytest.raises(DataNotPresent) as err:
            load_hub(parse_hub_uri("hf://test-org/absent?split=test"))
        line = str(err.value)
        assert "hf://test-org/absent?split=test" in line and "not present" in line and "HF_HOME" in line
        assert "hf download test-org/absent --repo-type dataset" in line and "\n" not in line
        assert err.value.exit_code == 2

    def test_a_revision_not_in_the_cache_is_not_present(self, hub):
        place_dataset(hub, "test-org/sums", {"test.jsonl": jsonl_bytes(ROWS)})
        with pytest.raises(DataNotPresent):
            load_hub(parse_hub_uri(f"hf://test-org/sums?revision={'b' * 40}"))


class TestBuiltinHubBenchmarks:
    """A benchmark.toml with a [hub] table: converted and frozen on first load, then read frozen."""

    def test_first_load_converts_and_freezes_with_a_manifest(self, hub, catalogue):
        add_benchmark(catalogue)
        sha = place_dataset(hub, "test-org/sums", {"test.jsonl": jsonl_bytes(ROWS)})
        env = registry.get_environment("sums")
        assert isinstance(env, DatasetEnvironment)
        assert len(env) == len(ROWS)
        seed = env.seed(3)
        assert seed.prompt == "Q: What is 3 + 3?\nA:" and seed.expected_answer == "6"
        assert seed.metadata == {"idx": 3, "category": "sums"}
        assert env.dataset_identity == {"source": "hf://test-org/sums?split=test&revision=main", "revision": sha}
        folder = data_dir() / "benchmarks" / "sums" / sha
        manifest = orjson.loads((folder / "manifest.json").read_bytes())
        assert manifest["repo"] == "test-org/sums" and manifest["revision"] == sha and manifest["rows"] == len(ROWS)
        assert manifest["requested_revision"] == "main" and manifest["license"] == "CC-BY-4.0"
        [upstream] = manifest["files"]
        assert upstream["path"] == "test.jsonl" and upstream["size"] == len(jsonl_bytes(ROWS))
        import hashlib

        body = (folder / "data.jsonl").read_bytes()
        assert manifest["sha256"] == hashlib.sha256(body).hexdigest() and manifest["size"] == len(body)
        assert [orjson.loads(line) for line in body.splitlines()] == env.rows

    def test_once_frozen_the_hub_cache_is_not_needed(self, hub, catalogue):
        import shutil

        add_benchmark(catalogue)
        place_dataset(hub, "test-org/sums", {"test.jsonl": jsonl_bytes(ROWS)})
        first = registry.get_environment("sums")
        shutil.rmtree(hub / "hub")
        registry.get_environment.cache_clear()
        again = registry.get_environment("sums")
        assert isinstance(first, DatasetEnvironment) and isinstance(again, DatasetEnvironment)
        assert again.rows == first.rows and again.data_hash == first.data_hash

    def test_not_present_names_the_benchmark_and_nel_benchmarks_pull(self, hub, catalogue):
        add_benchmark(catalogue)
        with pytest.raises(DataNotPresent) as err:
            registry.get_environment("sums")
        assert "benchmark 'sums'" in str(err.value) and "`nel benchmarks pull sums`" in str(err.value)

    def test_a_converted_row_without_a_field_the_benchmark_reads_names_the_field_and_row(self, hub, catalogue):
        toml = add_benchmark(catalogue) / "benchmark.toml"
        toml.write_text(toml.read_text().replace('{ category = "category" }', '["worked"]'))
        place_dataset(hub, "test-org/sums", {"test.jsonl": jsonl_bytes(ROWS)})
        with pytest.raises(UsageError, match=r"data.jsonl: row 1: row has no field 'worked'"):
            registry.get_environment("sums")

    def test_a_damaged_frozen_file_is_refused_not_read(self, hub, catalogue):
        add_benchmark(catalogue)
        sha = place_dataset(hub, "test-org/sums", {"test.jsonl": jsonl_bytes(ROWS)})
        registry.get_environment("sums")
        frozen = data_dir() / "benchmarks" / "sums" / sha / "data.jsonl"
        frozen.write_bytes(frozen.read_bytes().replace(b"What", b"Whit"))
        registry.get_environment.cache_clear()
        with pytest.raises(UsageError, match=r"SHA-256 differs from its manifest's"):
            registry.get_environment("sums")

    def test_list_facts_come_from_the_toml_and_manifest_without_reading_data(self, hub, catalogue, monkeypatch):
        from workbench.datasources import frozen, rows

        add_benchmark(catalogue)
        assert registry.describe_benchmark("sums")["present"] == "not present"
        assert registry.describe_benchmark("sums")["size"] is None
        place_dataset(hub, "test-org/sums", {"test.jsonl": jsonl_bytes(ROWS)})
        assert registry.describe_benchmark("sums")["present"] == "yes"  # in the HF cache: present, size unknown
        registry.get_environment("sums")

        def no_reading(*args: object, **kwargs: object) -> None:
            raise AssertionError("nel list read a dataset")

        monkeypatch.setattr(rows, "read_rows", no_reading)
        monkeypatch.setattr(frozen, "read_frozen", no_reading)
        info = registry.describe_benchmark("sums")
        assert (info["present"], info["size"], info["domain"], info["default_repeats"]) == ("yes", 6, "math", 3)

    def test_an_environment_class_is_built_with_the_definition(self, hub, catalogue, tmp_path):
        (tmp_path / "modules" / "nel_test_env.py").write_text(textwrap.dedent('''
            from workbench.environments.dataset import DatasetEnvironment
            from workbench.types import VerifyResult

            class Doubled(DatasetEnvironment):
                def verify(self, response, expected, **metadata):
                    row = self.rows[metadata["idx"]]
                    return VerifyResult(float(response == row["answer"] * 2), response, {"method": "doubled"})
            '''))
        add_benchmark(catalogue, extra='environment = "nel_test_env:Doubled"')
        place_dataset(hub, "test-org/sums", {"test.jsonl": jsonl_bytes(ROWS)})
        env = registry.get_environment("sums")
        assert type(env).__name__ == "Doubled"
        seed = env.seed(2)
        assert env.verify("44", seed.expected_answer, **seed.metadata).reward == 1.0

    def test_an_environment_that_is_not_a_dataset_environment_is_refused(self, hub, catalogue):
        add_benchmark(catalogue, extra='environment = "pathlib:Path"')
        with pytest.raises(UsageError, match=r"environment 'pathlib:Path' is not a DatasetEnvironment subclass"):
            registry.get_environment("sums")

    def test_a_toml_with_both_or_neither_data_key_is_refused(self, catalogue):
        folder = add_benchmark(catalogue)
        toml = folder / "benchmark.toml"
        toml.write_text('dataset = "x.jsonl"\n' + toml.read_text())
        with pytest.raises(UsageError, match=r"either dataset = \"FILE\" or a \[hub\] table, not both"):
            registry.get_environment("sums")

    def test_another_dataset_runs_the_same_prompt_and_converter(self, hub, catalogue, tmp_path):
        add_benchmark(catalogue)
        other = place_dataset(hub, "someone/more-sums", {"data/test-0.parquet": parquet_bytes(ROWS[:2])})
        env = registry.get_environment("sums", "hf://someone/more-sums?split=test")
        assert len(env) == 2 and env.seed(1).prompt == "Q: What is 1 + 1?\nA:"
        assert env.dataset_identity is not None and env.dataset_identity["revision"] == other
        (tmp_path / "local.jsonl").write_bytes(jsonl_bytes(ROWS[:3]))
        local = registry.get_environment("sums", str(tmp_path / "local.jsonl"))
        assert len(local) == 3 and local.dataset_identity is None and local.seed(0).expected_answer == "0"


class TestMockModel:
    """The mock model answers what is here and skips what is not, quietly."""

    def test_all_builtins_skip_a_benchmark_whose_data_is_not_present_without_a_warning(self, hub, catalogue,
                                                                                         capsys):
        from workbench.mock.answers import load_tasks

        add_benchmark(catalogue)
        add_benchmark(catalogue, "sums2")
        (catalogue / "sums2" / "benchmark.toml").write_text(
            (catalogue / "sums2" / "benchmark.toml").read_text().replace("test-org/sums", "test-org/absent"))
        place_dataset(hub, "test-org/sums", {"test.jsonl": jsonl_bytes(ROWS)})
        tasks = load_tasks(None)
        assert {t.benchmark for t in tasks} >= {"sums"} and "sums2" not in {t.benchmark for t in tasks}
        assert "warning" not in capsys.readouterr().err
        with pytest.raises(DataNotPresent):
            load_tasks(["sums2"])
