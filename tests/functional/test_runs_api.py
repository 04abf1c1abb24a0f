"""``workbench.runs.run``: the composition root every front end and worker calls, used from Python. A suite's
benchmarks run in turn, each one's outcome (or the error that stopped it) is returned, and whoever launched the
process learns the run ids from its result file."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from recording_model import recording_model, url_of

from workbench.errors import NelError
from workbench.runs import BenchmarkOutcome, run
from workbench.spec import load_config
from workbench.spec.io import RESULT_ENV


def test_a_suite_runs_every_benchmark_and_reports_its_run_ids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result_file = tmp_path / "result.json"
    monkeypatch.setenv(RESULT_ENV, str(result_file))
    with recording_model() as model:
        config = tmp_path / "suite.yaml"
        config.write_text(f"""\
services:
  main: {{url: {url_of(model)}, model: m}}
benchmarks:
  - {{name: gsm8k, max_problems: 2, repeats: 1}}
  - {{name: humaneval, max_problems: 1, repeats: 1}}   # needs a sandbox: fails, the suite goes on
  - {{name: unit_conversion_mc, max_problems: 3, repeats: 2}}
output: {{dir: {tmp_path / "out"}}}
""")
        spec, _ = load_config(config)
        seen: list[str] = []
        done = run(spec, on_benchmark=lambda bench: seen.append(bench.name))
    assert seen == ["gsm8k", "humaneval", "unit_conversion_mc"]
    kinds = [type(outcome) for _, outcome in done.results]
    assert kinds[0] is BenchmarkOutcome and kinds[2] is BenchmarkOutcome and issubclass(kinds[1], NelError)
    assert "sandbox" in str(done.results[1][1])
    assert done.failed == 1 and len(done.run_ids) == 2 and len(model.bodies) == 2 + 6
    assert orjson.loads(result_file.read_bytes()) == {"run_ids": list(done.run_ids), "status": "failed"}


def test_from_flags_a_failing_benchmark_is_raised(tmp_path: Path) -> None:
    from workbench.cli import build_parser
    from workbench.spec.flags import spec_from_flags

    args = build_parser().parse_args(["eval", "run", "-b", "humaneval", "--model-url", "http://127.0.0.1:9/v1",
                                      "--model-id", "m", "--output-dir", str(tmp_path)])
    with pytest.raises(NelError, match="sandbox"):
        run(spec_from_flags(args))


def _run_gsm8k(tmp_path: Path, model_url: str, *extra: str) -> BenchmarkOutcome:
    config = tmp_path / "one.yaml"
    config.write_text(f"""\
services:
  main: {{url: {model_url}, model: m}}
benchmarks:
  - {{name: gsm8k, max_problems: 6, repeats: 2}}
output: {{dir: {tmp_path / "out"}}}
""" + "".join(extra))
    spec, _ = load_config(config)
    [(_, outcome)] = run(spec).results
    assert isinstance(outcome, BenchmarkOutcome)
    return outcome


class TestTheEndOfASmallRun:
    """A small run's summary and export are written from its own files while the ingest writes the store in a
    thread (the two overlap on two cores): the files are the same as the store gives once the ingest is done."""

    def test_its_files_are_what_the_store_gives_after_the_ingest(self, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
        from workbench.engine import run as engine_run
        from workbench.export.artifacts import bundle_file_name, export_run
        from workbench.runs import read_summary
        from workbench.store.background import BackgroundIngest
        from workbench.store.layout import segments_root

        started: list[BackgroundIngest] = []

        class Spy(BackgroundIngest):
            def __init__(self, store: Path, run_id: str) -> None:
                started.append(self)
                super().__init__(store, run_id)

        monkeypatch.setattr(engine_run, "BackgroundIngest", Spy)
        with recording_model() as model:
            outcome = _run_gsm8k(tmp_path, url_of(model))
        assert len(started) == 1 and outcome.export is not None
        store, run_id = outcome.result.store, outcome.result.run_id
        assert not (segments_root(store) / run_id).exists()  # ingested, files gone
        again = export_run(store, run_id, tmp_path / "again")
        for name in ("results.jsonl", "trajectories.jsonl", "runtime_stats.json", "failure_analysis.json",
                     bundle_file_name(run_id)):
            assert (outcome.export.out_dir / name).read_bytes() == (again.out_dir / name).read_bytes(), name
        assert outcome.summary == read_summary(store, run_id)

    def test_a_resumed_run_reads_the_store_for_the_steps_it_holds_already(self, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
        from workbench.engine import run as engine_run
        from workbench.store.database import connect_rw

        with recording_model() as model:
            first = _run_gsm8k(tmp_path, url_of(model))
            con = connect_rw(first.result.store)
            con.execute("DELETE FROM steps WHERE task_idx >= 3")  # as if it had been stopped half-way
            con.close()
            monkeypatch.setattr(engine_run, "BackgroundIngest", None)  # must not be used: its files hold half
            spec, _ = load_config(tmp_path / "one.yaml")
            [(_, outcome)] = run(spec, resume=True).results
        assert isinstance(outcome, BenchmarkOutcome) and outcome.result.run_id == first.result.run_id
        assert outcome.result.steps_written == 6 and outcome.result.steps_skipped == 6
        assert outcome.export is not None and outcome.export.n_results == 12
        assert outcome.summary.n_tasks == 6

    def test_a_run_too_large_to_hold_in_memory_reads_the_store_after_its_ingest(
            self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        from workbench.engine import run as engine_run

        monkeypatch.setattr(engine_run, "BACKGROUND_INGEST_MAX_BYTES", 1)
        monkeypatch.setattr(engine_run, "BackgroundIngest", None)  # must not be used
        with recording_model() as model:
            outcome = _run_gsm8k(tmp_path, url_of(model))
        assert outcome.result.ingested and outcome.export is not None and outcome.export.n_results == 12
