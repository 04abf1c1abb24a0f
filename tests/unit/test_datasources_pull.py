"""`nel benchmarks pull` in process, against a real local HTTP hub: a converter module's pull_extras() runs after
the rows are frozen, and its failure is one line naming the benchmark."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hub_cache import FakeHub, hub_environment, jsonl_bytes

from workbench.cli import main
from workbench.environments import registry

TOML = '''
name = "sums"
prompt = "{question}"
input_field = "question"
target_field = "answer"
scorer = "exact"
license = "MIT"
[hub]
repo = "test-org/sums"
convert = "nel_test_extras:convert"
'''
MODULE = '''
from pathlib import Path

def convert(row):
    return {"question": row["q"], "answer": row["a"]}

def pull_extras():
    marker = Path(__file__).with_name("extras.txt")
    if marker.with_name("fail").exists():
        raise OSError("punkt_tab: connection refused\\n(retried 3 times)")
    marker.write_text("fetched")
'''


@pytest.fixture
def pulling(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """A hub with the dataset, online settings pointing at it, and a benchmarks folder holding `sums`."""
    with FakeHub() as hub:
        hub.commit("test-org/sums", {"test.jsonl": jsonl_bytes([{"q": "one?", "a": "1"}, {"q": "two?", "a": "2"}])})
        hub_environment(monkeypatch, tmp_path, offline=False, endpoint=hub.url)
        modules = tmp_path / "modules"
        modules.mkdir()
        (modules / "nel_test_extras.py").write_text(MODULE)
        monkeypatch.syspath_prepend(str(modules))
        monkeypatch.delitem(sys.modules, "nel_test_extras", raising=False)  # this test's copy, not an earlier one's
        (tmp_path / "benchmarks" / "sums").mkdir(parents=True)
        (tmp_path / "benchmarks" / "sums" / "benchmark.toml").write_text(TOML)
        monkeypatch.setattr(registry, "benchmarks_dir", lambda: tmp_path / "benchmarks")
        for table in ("_REGISTRY", "_TOML", "_WITH_DATASET"):
            monkeypatch.setattr(registry, table, {})
        registry.get_environment.cache_clear()
        yield modules
        registry.get_environment.cache_clear()


def test_pull_runs_the_converters_pull_extras_after_freezing(pulling, capsys):
    assert main(["benchmarks", "pull", "--all"]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("sums  revision ") and "2 rows" in out.out and "licence MIT  pulled" in out.out
    assert (pulling / "extras.txt").read_text() == "fetched"


def test_a_failing_pull_extras_is_one_line_naming_the_benchmark(pulling, capsys):
    (pulling / "fail").write_text("")
    assert main(["benchmarks", "pull", "sums"]) == 1
    [line] = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("nel: error:")]
    assert line == ("nel: error: benchmark 'sums': fetching what its scoring needs failed: OSError: punkt_tab: "
                    "connection refused (retried 3 times)")


def test_a_benchmark_whose_data_ships_with_nel_has_nothing_to_pull(pulling, capsys):
    (pulling.parent / "benchmarks" / "local").mkdir()
    (pulling.parent / "benchmarks" / "local" / "benchmark.toml").write_text(
        TOML.replace('name = "sums"', 'name = "local"').split("[hub]")[0] + 'dataset = "d.jsonl"\n')
    assert main(["benchmarks", "pull", "local"]) == 2
    assert "'local' has no hub data to pull (its data ships with nel)" in capsys.readouterr().err


def test_an_hf_uri_as_a_benchmark_says_how_to_use_it(capsys):
    assert main(["validate", "-b", "hf://org/name?split=test"]) == 2
    assert "an hf:// URI names a dataset, not a benchmark" in capsys.readouterr().err
