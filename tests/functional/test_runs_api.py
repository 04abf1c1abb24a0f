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
