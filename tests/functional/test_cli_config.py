"""`nel eval run CONFIG.yaml`: suites of benchmarks from a NeMo Evaluator-style config."""

import socket

import pytest
from nel_helpers import assert_ok, assert_one_line_error, nel

from workbench import open_store


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def suite(mock_url: str, *, extra_bench: str = "") -> str:
    return f"""\
services:
  mock:
    url: {mock_url}
    model: nel-mock
    generation: {{temperature: 0.7, max_tokens: 512}}
  gone:
    url: http://127.0.0.1:{closed_port()}/v1
    model: nobody
benchmarks:
  - name: gsm8k
    solver: {{service: mock}}
    repeats: 2
    max_problems: 12
  - name: gsm8k
    solver: {{service: mock}}
    max_problems: 6
    system_prompt: Think step by step.
{extra_bench}output:
  dir: results
"""


def run_count(cwd):
    return open_store(cwd / "results").sql("SELECT count(*) AS n FROM runs")["n"][0]


@pytest.mark.timeout(120)
def test_a_suite_runs_every_benchmark_into_one_store(mock, tmp_path):
    (tmp_path / "suite.yaml").write_text(suite(mock.base_url))
    proc = nel("eval", "run", "suite.yaml", "--no-progress", cwd=tmp_path)
    assert_ok(proc)
    assert "benchmarks.0 (gsm8k): complete" in proc.stdout and "benchmarks.1 (gsm8k): complete" in proc.stdout
    steps = open_store(tmp_path / "results").sql("SELECT run_id, count(*) AS n FROM steps GROUP BY ALL ORDER BY n")
    assert steps["n"].to_list() == [6 * 4, 12 * 2]  # gsm8k's default is 4 repeats


@pytest.mark.timeout(120)
def test_a_failing_benchmark_does_not_stop_the_others_and_the_exit_code_says_so(mock, tmp_path):
    failing = "  - name: gsm8k\n    solver: {service: gone}\n    max_problems: 3\n"
    text = suite(mock.base_url, extra_bench=failing).replace("benchmarks:\n", "benchmarks:\n" + failing, 1)
    (tmp_path / "suite.yaml").write_text(text)
    proc = nel("eval", "run", "suite.yaml", "--no-progress", cwd=tmp_path, timeout=90)
    assert proc.returncode == 1, proc.stderr
    assert "benchmarks.0 (gsm8k): failed: cannot reach the model" in proc.stdout
    assert "benchmarks.1 (gsm8k): complete" in proc.stdout and "benchmarks.2 (gsm8k): complete" in proc.stdout
    assert "2 of 4 benchmarks did not complete" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.timeout(120)
def test_resume_continues_each_suite_entry_and_refuses_a_changed_one(mock, tmp_path):
    (tmp_path / "suite.yaml").write_text(suite(mock.base_url))
    assert_ok(nel("eval", "run", "suite.yaml", "--no-progress", cwd=tmp_path))
    again = nel("eval", "run", "suite.yaml", "--no-progress", "--resume", cwd=tmp_path)
    assert_ok(again)
    assert again.stdout.count("0 new steps") == 2
    assert run_count(tmp_path) == 2
    changed = nel("eval", "run", "suite.yaml", "--no-progress", "--resume",
                  "-O", "services.mock.generation.temperature=0.1", cwd=tmp_path)
    assert changed.returncode == 1
    assert "temperature: 0.7 -> 0.1" in changed.stderr


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["suite.yaml", "--model-id", "x", "--repeats", "2"], "--repeats, --model-id: not with a config file"),
        (["suite.yaml", "--output-dir", "elsewhere"], "--output-dir: not with a config file"),
        (["-b", "gsm8k", "--model-url", "http://h/v1", "--model-id", "m", "-O", "a.b=1"], "-O: overrides apply"),
        (["-b", "gsm8k"], "required: --model-url, --model-id"),
        (["suite.yaml", "-O", "benchmarks.0.solver.service=nope"], "benchmarks.0.solver.service"),
        (["missing.yaml"], "missing.yaml: cannot read config"),
    ],
)
def test_misuse_is_a_one_line_usage_error(mock, tmp_path, args, message):
    (tmp_path / "suite.yaml").write_text(suite(mock.base_url))
    line = assert_one_line_error(nel("eval", "run", *args, cwd=tmp_path), 2)
    assert message in line


@pytest.mark.timeout(60)
def test_an_invalid_config_runs_nothing(mock, tmp_path):
    text = suite(mock.base_url).replace("    repeats: 2\n", "    repeats: 2\n    repeat: 3\n")
    (tmp_path / "suite.yaml").write_text(text)
    line = assert_one_line_error(nel("eval", "run", "suite.yaml", cwd=tmp_path), 2)
    assert "suite.yaml:13: benchmarks.0.repeat: unknown key" in line
    assert not (tmp_path / "results").exists()
