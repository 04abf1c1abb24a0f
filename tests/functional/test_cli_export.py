"""`nel eval export` and `nel eval report` end to end: a real run against the mock model, exported and
reported through the CLI."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
from nel_helpers import assert_ok, assert_one_line_error, eval_args, nel

from workbench.mock import MockHandle
from workbench.store import open_store

pytestmark = pytest.mark.timeout(60)

PROBLEMS, REPEATS = 20, 3
SECRET = "sk-secret-123"
FILES = ("results.jsonl", "trajectories.jsonl", "runtime_stats.json", "failure_analysis.json")


@pytest.fixture(scope="module")
def run(mock: MockHandle, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Path]:
    """A finished gsm8k run made with an API key on the command line, and its export: (root, run id, dir)."""
    root = tmp_path_factory.mktemp("export")
    store = root / "results" / "nel.duckdb"
    assert_ok(nel(*eval_args(mock.base_url, problems=PROBLEMS, repeats=REPEATS, store=store,
                             extra=["--api-key", SECRET]), cwd=root))
    run_id = open_store(store).runs()["run_id"][0]
    proc = nel("eval", "export", run_id, "-o", str(root / "export"), "--store", str(store), cwd=root)
    assert_ok(proc)
    return root, run_id, root / "export"


def _lines(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def _report(root: Path, *args: str) -> str:
    proc = nel("eval", "report", *args, cwd=root)
    assert_ok(proc)
    return proc.stdout


class TestExport:
    """`nel eval export RUN -o DIR`."""

    def test_writes_every_artifact_and_says_where(self, run):
        root, run_id, out = run
        assert sorted(p.name for p in out.iterdir()) == sorted([*FILES, f"eval-{run_id}.json"])
        proc = nel("eval", "export", run_id, "-o", str(root / "again"), "--store", str(root / "results"), cwd=root)
        assert_ok(proc)
        assert f"{PROBLEMS * REPEATS} steps" in proc.stdout
        assert all(str(root / "again" / name) in proc.stdout for name in FILES)

    def test_results_have_one_line_per_step_with_the_seed_fields(self, run):
        lines = _lines(run[2] / "results.jsonl")
        assert len(lines) == PROBLEMS * REPEATS
        assert sorted((r["problem_idx"], r["repeat"]) for r in lines) == [
            (i, r) for i in range(PROBLEMS) for r in range(REPEATS)]
        assert all(isinstance(r["reward"], float) and r["task_id"] for r in lines)

    def test_trajectories_carry_the_request_hash_and_latency_breakdown(self, run):
        lines = _lines(run[2] / "trajectories.jsonl")
        assert len(lines) == PROBLEMS * REPEATS
        for t in lines:
            assert re.fullmatch(r"[0-9a-f]{64}", t["request_hash"])
            assert set(t["latency"]) == {"seed_ms", "model_ms", "verify_ms", "latency_ms"}
            assert t["latency"]["latency_ms"] >= t["latency"]["model_ms"] > 0
            assert t["started_at"].endswith("Z") and t["messages"][-1]["role"] == "user"

    def test_the_api_key_is_in_no_file(self, run):
        root, _, out = run
        _report(root, str(out), "--all-formats", "-o", str(root / "reports"))
        for path in [*out.iterdir(), *(root / "reports").iterdir()]:
            assert SECRET not in path.read_text(), path

    def test_bundle_pass_at_1_equals_the_stores_run_metrics(self, run):
        root, run_id, out = run
        bundle = orjson.loads((out / f"eval-{run_id}.json").read_bytes())
        metrics = open_store(root / "results").sql("SELECT * FROM run_metrics WHERE run_id = ?", [run_id])
        assert bundle["pass_at_k"]["1"]["value"] == pytest.approx(metrics["pass_at_1"][0], abs=1e-12)
        assert bundle["pass_at_k"]["1"]["low"] == pytest.approx(metrics["pass_at_1_low"][0], abs=1e-4)
        assert sorted(bundle["pass_at_k"]) == [str(k) for k in range(1, REPEATS + 1)]
        assert bundle["n_steps"] == metrics["n_steps"][0] and bundle["status"] == "complete"


class TestReport:
    """`nel eval report RUN_OR_DIR`."""

    @pytest.mark.parametrize("fmt", ["markdown", "html", "csv", "json", "latex"])
    def test_a_report_from_the_directory_equals_one_from_the_run_id(self, run, fmt):
        root, run_id, out = run
        from_dir = _report(root, str(out), "-f", fmt)
        assert from_dir == _report(root, run_id, "-f", fmt, "--store", str(root / "results"))
        assert ("pass@1" if fmt != "json" else "\"pass_at_k\"") in from_dir

    def test_a_directory_needs_no_store(self, run):
        root, run_id, out = run
        text = _report(root, str(out), "--store", str(root / "no-such-store"))
        assert f"| run | {run_id} |" in text and "| pass@3 |" in text

    def test_all_formats_writes_five_files(self, run):
        root, _, out = run
        proc = nel("eval", "report", str(out), "--all-formats", "-o", str(root / "all"), cwd=root)
        assert_ok(proc)
        names = sorted(p.name for p in (root / "all").iterdir())
        assert names == ["report.csv", "report.html", "report.json", "report.md", "report.tex"]
        assert len(proc.stdout.strip().splitlines()) == 5

    def test_o_writes_the_chosen_format_to_a_file(self, run):
        root, _, out = run
        proc = nel("eval", "report", str(out), "-f", "html", "-o", str(root / "r" / "x.html"), cwd=root)
        assert_ok(proc)
        assert (root / "r" / "x.html").read_text().startswith("<!DOCTYPE html>")


class TestBadInputs:
    """Mistakes a user can fix get one line and exit code 2."""

    def test_an_unknown_run_names_the_store(self, run):
        root = run[0]
        for cmd in ("export", "report"):
            args = ["-o", str(root / "x")] if cmd == "export" else []
            line = assert_one_line_error(
                nel("eval", cmd, "no-such-run", *args, "--store", str(root / "results"), cwd=root), 2)
            assert "no run 'no-such-run'" in line and "nel.duckdb" in line

    def test_a_directory_without_a_bundle(self, run):
        root = run[0]
        (root / "empty").mkdir(exist_ok=True)
        line = assert_one_line_error(nel("eval", "report", str(root / "empty"), cwd=root), 2)
        assert "no eval-*.json" in line

    def test_all_formats_without_an_output_directory(self, run):
        line = assert_one_line_error(nel("eval", "report", str(run[2]), "--all-formats", cwd=run[0]), 2)
        assert "--all-formats needs -o DIR" in line

    def test_an_output_that_is_a_file_where_a_directory_is_needed(self, run):
        root, run_id, out = run
        target = root / "a-file"
        target.write_text("")
        line = assert_one_line_error(nel("eval", "report", str(out), "--all-formats", "-o", str(target), cwd=root), 2)
        assert "is a file" in line
        line = assert_one_line_error(
            nel("eval", "export", run_id, "-o", str(target), "--store", str(root / "results"), cwd=root), 2)
        assert "is a file" in line

    def test_a_run_id_without_any_store(self, run):
        root = run[0]
        line = assert_one_line_error(nel("eval", "report", "nope", "--store", str(root / "none.duckdb"), cwd=root), 2)
        assert "no such directory" in line
