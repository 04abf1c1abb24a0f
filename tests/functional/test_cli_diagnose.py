"""`nel diagnose` end to end: real runs of a benchmark with categories against mock models of two skill seeds,
diagnosed by run id and by exported directory, as markdown and as JSON, and refused on bad input in one line."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from nel_helpers import assert_ok, assert_one_line_error, eval_args, nel

from workbench.analysis.diagnosis.report import HEURISTIC, NO_SECOND_RUN, SECTIONS
from workbench.mock import mock_model

pytestmark = pytest.mark.timeout(180)

BENCH, PROBLEMS, REPEATS = "unit_conversion_mc", 40, 3


@dataclass(frozen=True)
class Runs:
    root: Path
    store: Path

    def out(self, run_id: str) -> Path:
        return self.root / f"out-{run_id}"


def _run(url: str, runs: Runs, run_id: str, bench: str, problems: int, repeats: int) -> None:
    args = eval_args(url, problems=problems, repeats=repeats, store=runs.store, output_dir=runs.out(run_id),
                     extra=["--run-id", run_id])
    args[args.index("gsm8k")] = bench
    assert_ok(nel(*args, cwd=runs.root))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    """base: skill seed 1; cand: skill seed 2 (the score shifts); gsm: another benchmark, another metric."""
    root = tmp_path_factory.mktemp("diagnose")
    r = Runs(root=root, store=root / "nel.duckdb")
    with mock_model(latency_ms=0, skill_seed=1) as m:
        _run(m.base_url, r, "base", BENCH, PROBLEMS, REPEATS)
        _run(m.base_url, r, "gsm", "gsm8k", 10, 1)
    with mock_model(latency_ms=0, skill_seed=2) as m:
        _run(m.base_url, r, "cand", BENCH, PROBLEMS, REPEATS)
    yield r


@functools.cache
def _diagnose(runs: Runs, *args: str) -> str:
    """`nel diagnose ARGS --store STORE`'s standard output (cached: the runs do not change within the module)."""
    proc = nel("diagnose", *args, "--store", str(runs.store), cwd=runs.root)
    assert_ok(proc)
    return proc.stdout


def _headings(md: str) -> list[str]:
    return re.findall(r"^## \d+\. (.+)$", md, flags=re.M)


def _section(md: str, name: str) -> str:
    n = SECTIONS.index(name) + 1
    return md.split(f"## {n}. {name}\n", 1)[1].split("\n## ", 1)[0]


class TestReport:
    """The markdown report of a baseline and a candidate."""

    def test_written_atomically_to_the_output_with_the_ten_sections(self, runs):
        out = runs.root / "reports" / "report.md"
        stdout = _diagnose(runs, "base", "cand", "-o", str(out))
        assert stdout.strip() == f"wrote {out}"
        md = out.read_text()
        assert _headings(md) == list(SECTIONS)
        assert not list(out.parent.glob("*.tmp*"))

    def test_claims_cite_task_ids_and_counts(self, runs):
        md = _diagnose(runs, "base", "cand")
        data = orjson.loads(_diagnose(runs, "base", "cand", "--format", "json"))
        never = data["baseline"]["profile"]["buckets"]["never"]
        assert f"| never | {len(never)} |" in _section(md, "Task outcome buckets")
        assert ", ".join(f"#{i}" for i in never[:3]) in _section(md, "Task outcome buckets")
        cross = _section(md, "Cross-run comparison")
        assert f"Δ = {data['shift']['delta']:+.4f}" in cross
        for driver in data["shift"]["drivers_down"]:
            assert f"| #{driver['task']['task_idx_b']} |" in cross
        cited = {int(i) for i in re.findall(r"#(\d+)", md)}
        assert cited and max(cited) < PROBLEMS

    def test_findings_are_labelled_heuristic_with_their_rule(self, runs):
        md = _diagnose(runs, "base", "cand")
        data = orjson.loads(_diagnose(runs, "base", "cand", "--format", "json"))
        recs = _section(md, "Recommendations")
        assert data["findings"], "the two skill seeds give a run with sometimes-pass tasks at least"
        for f in data["findings"]:
            assert HEURISTIC.format(rule=f["rule"]) in recs
            assert f["task_idx"] and all(0 <= i < PROBLEMS for i in f["task_idx"])

    def test_the_contributions_add_up_to_the_shift(self, runs):
        data = orjson.loads(_diagnose(runs, "base", "cand", "--format", "json"))
        s = data["shift"]
        assert s["n_paired"] == PROBLEMS and s["delta"] != 0
        assert sum(t["contribution"] for t in s["tasks"]) == pytest.approx(s["delta"], abs=1e-12)
        assert sum(s["transitions"].values()) == PROBLEMS and all("→" in k for k in s["transitions"])

    def test_by_results_directory_gives_the_same_numbers(self, runs):
        by_id = _diagnose(runs, "base", "cand")
        by_dir = _diagnose(runs, str(runs.out("base")), str(runs.out("cand")))
        for name in ("Aggregate results", "Task outcome buckets", "Recommendations"):
            assert _section(by_id, name) == _section(by_dir, name), name
        assert "--store" not in _section(by_dir, "Reproducibility notes").split("To rerun:")[1]

    def test_slices_split_the_shift(self, runs):
        md = _diagnose(runs, "base", "cand", "--slice", "category", "--top", "2")
        assert "| category |" in _section(md, "Cross-run comparison")
        assert "--slice category --top 2" in _section(md, "Reproducibility notes")
        assert "2 read closely" in _section(md, "Sometimes-pass deep dives")

    def test_reproducibility_gives_the_command_and_version(self, runs):
        import workbench

        notes = _section(_diagnose(runs, "base", "cand"), "Reproducibility notes")
        assert f"workbench version {workbench.__version__}" in notes
        assert f"nel diagnose base cand --metric multiple_choice --top 5 --store {runs.store}" in notes


class TestSingleRun:
    """`nel diagnose BASELINE` alone."""

    def test_one_run_has_every_section_and_no_comparison(self, runs):
        md = _diagnose(runs, "base")
        assert _headings(md) == list(SECTIONS)
        assert NO_SECOND_RUN in _section(md, "Cross-run comparison")
        assert "candidate" not in _section(md, "Executive summary")

    def test_json_of_one_run(self, runs):
        data = orjson.loads(_diagnose(runs, str(runs.out("base")), "--format", "json"))
        assert data["candidate"] is None and data["shift"] is None
        assert data["sections"] == list(SECTIONS) and data["baseline"]["profile"]["run_id"] == "base"

    def test_json_to_a_directory(self, runs):
        out = runs.root / "json-out"
        out.mkdir()
        _diagnose(runs, "base", "--format", "json", "-o", str(out))
        assert orjson.loads((out / "diagnosis.json").read_bytes())["baseline"]["profile"]["n_tasks"] == PROBLEMS


class TestBadInput:
    """Mistakes are one `nel: error:` line and exit 2."""

    def _error(self, runs: Runs, *args: str) -> str:
        return assert_one_line_error(nel("diagnose", *args, "--store", str(runs.store), cwd=runs.root), 2)

    def test_an_unknown_run(self, runs):
        assert "no run 'nope'" in self._error(runs, "base", "nope")

    def test_a_directory_without_an_export(self, runs):
        empty = runs.root / "empty"
        empty.mkdir(exist_ok=True)
        assert "no eval-*.json" in self._error(runs, str(empty))

    def test_an_unknown_slice_column_lists_the_columns(self, runs):
        line = self._error(runs, "base", "cand", "--slice", "nope")
        assert "'nope'" in line and "category" in line

    def test_a_metric_the_candidate_lacks(self, runs):
        line = self._error(runs, "base", "gsm")
        assert "no metric 'multiple_choice'" in line and "gsm" in line

    def test_top_must_be_positive(self, runs):
        proc = nel("diagnose", "base", "--top", "0", "--store", str(runs.store), cwd=runs.root)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
