"""A run reports only the success it had: errored attempts fail a run past --max-error-rate and can be retried,
failure categories say what happened, sizes past nel's limits are refused before they cost memory, a closed
standard output costs no artifact, and an unwritable or full disk is one line naming the path."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from nel_helpers import NEL, assert_ok, assert_one_line_error, clean_env, eval_args, free_port, nel

from workbench.mock import mock_model
from workbench.store import open_store

pytestmark = pytest.mark.timeout(120)


def _artifacts(output_dir: Path) -> list[str]:
    return sorted(p.name for p in output_dir.glob("runs/*/*"))


def _bundle(output_dir: Path) -> dict:
    (path,) = output_dir.glob("runs/*/eval-*.json")
    return orjson.loads(path.read_bytes())


class TestErroredRuns:
    """A run whose attempts mostly reached no verdict is ``failed``, exit 1, with its artifacts and its errors."""

    def test_a_run_whose_every_attempt_errored_fails_and_says_so_first(self, tmp_path):
        with mock_model(fail_rate=1.0, faults=("500",)) as m:
            proc = nel(*eval_args(m.base_url, problems=10, repeats=2, output_dir=tmp_path / "o",
                                  extra=["--max-retries", "0"]), cwd=tmp_path)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr
        title = proc.stdout.splitlines()[0]
        assert " failed: 20 of 20 attempts errored" in title, title
        assert "more than --max-error-rate 0.5" in proc.stderr
        assert _bundle(tmp_path / "o")["status"] == "failed", "the artifacts are written, and say failed"
        assert open_store(tmp_path / "o").rows("SELECT status FROM runs") == [("failed",)]

    def test_max_error_rate_1_never_fails_a_run_on_errors(self, tmp_path):
        with mock_model(fail_rate=1.0, faults=("500",)) as m:
            proc = nel(*eval_args(m.base_url, problems=5, repeats=1, output_dir=tmp_path / "o",
                                  extra=["--max-retries", "0", "--max-error-rate", "1"]), cwd=tmp_path)
        assert_ok(proc)
        assert "5 of 5 attempts errored" in proc.stdout.splitlines()[0]

    def test_a_max_error_rate_outside_0_to_1_is_refused(self, tmp_path):
        proc = nel(*eval_args("http://127.0.0.1:9/v1", problems=5, repeats=1, extra=["--max-error-rate", "1.5"]),
                   cwd=tmp_path)
        assert proc.returncode == 2 and "--max-error-rate" in proc.stderr

    def test_retry_errors_attempts_the_errored_steps_again_and_keeps_the_earlier_record(self, tmp_path):
        port = free_port()
        args = eval_args(f"http://127.0.0.1:{port}/v1", problems=8, repeats=2, output_dir=tmp_path / "o",
                         extra=["--max-retries", "0"])
        with mock_model(port=port, fail_rate=0.5, faults=("500",), fault_seed=3):
            first = nel(*args, cwd=tmp_path)
        store = open_store(tmp_path / "o")
        errored = store.rows("SELECT count(*) FROM steps WHERE failure_category = 'server_error'")[0][0]
        assert 0 < errored < 16, first.stdout
        (run_id,) = store.rows("SELECT run_id FROM runs")[0]
        with mock_model(port=port):  # the endpoint is healthy again, at the same URL (the run's identity)
            plain = nel(*args, "--resume", cwd=tmp_path)
            assert_ok(plain)
            assert "0 new steps" in plain.stdout, "errored attempts count as done: --resume alone keeps them"
            retried = nel(*args, "--resume", "--retry-errors", cwd=tmp_path)
        assert_ok(retried)
        assert f"{errored} errored, attempted again" in retried.stderr
        assert store.rows("SELECT count(*), count(failure_category), max(attempt) FROM steps") == [(16, 0, 1)]
        assert store.rows("SELECT count(*), min(failure_category) FROM superseded_steps WHERE run_id = ?",
                          [run_id]) == [(errored, "server_error")]
        assert _bundle(tmp_path / "o")["n_errors"] == 0, "the export shows the run as it is now"

    def test_retry_errors_needs_resume(self, tmp_path):
        proc = nel(*eval_args("http://127.0.0.1:9/v1", problems=2, repeats=1, extra=["--retry-errors"]),
                   cwd=tmp_path)
        assert "--retry-errors: only with --resume" in assert_one_line_error(proc, 2)


SCORERS = '''\
from workbench.environments.byob import ScorerInput, benchmark, scorer

@benchmark(name="strict-words", dataset="words.jsonl", prompt="Repeat the word {word}.", target_field="word")
@scorer
def never_right(sample: ScorerInput) -> dict:
    """A well-formed answer, judged wrong."""
    return {"correct": False}

@benchmark(name="broken-scorer", dataset="words.jsonl", prompt="Repeat the word {word}.", target_field="word")
@scorer
def always_raises(sample: ScorerInput) -> dict:
    """A scorer with a bug."""
    raise ValueError("cannot parse " + sample.target)
'''


class TestFailureCategories:
    @pytest.fixture
    def project(self, tmp_path: Path) -> Path:
        (tmp_path / "words.jsonl").write_text("".join(f'{{"word": "w{i}"}}\n' for i in range(6)))
        (tmp_path / "benches.py").write_text(SCORERS)
        return tmp_path

    def _run(self, mock, project: Path, bench: str) -> subprocess.CompletedProcess[str]:
        return nel("eval", "run", "-b", bench, "--benchmark-file", "benches.py", "--model-url", mock.base_url,
                   "--model-id", "nel-mock", "--no-progress", "--output-dir", bench, cwd=project)

    def test_a_wrong_well_formed_answer_has_no_failure_category(self, mock, project):
        assert_ok(self._run(mock, project, "strict-words"))
        rows = open_store(project / "strict-words").rows("SELECT count(*), count(failure_category) FROM steps")
        assert rows == [(6, 0)], "wrong, not a format error"

    def test_a_scorer_that_raises_is_a_scorer_error_with_its_message_and_fails_the_run(self, mock, project):
        proc = self._run(mock, project, "broken-scorer")
        assert proc.returncode == 1 and "6 of 6 attempts errored" in proc.stdout
        rows = open_store(project / "broken-scorer").rows(
            "SELECT DISTINCT failure_category, scoring_details->>'error' FROM steps WHERE task_idx = 0")
        assert rows == [("scorer_error", "ValueError: cannot parse w0")]


class TestLimits:
    def test_a_trillion_repeats_are_refused_naming_the_limit(self, tmp_path):
        proc = nel(*eval_args("http://127.0.0.1:9/v1", problems=5, repeats=10**12), cwd=tmp_path)
        line = assert_one_line_error(proc, 2)
        assert "--repeats" in line and "1,000,000,000,000" in line and "NEL_MAX_REPEATS" in line

    def test_a_configs_repeats_past_the_limit_name_the_file_and_line(self, tmp_path):
        (tmp_path / "suite.yaml").write_text(
            "services:\n  main: {type: api, url: 'http://127.0.0.1:9/v1', model: m}\n"
            "benchmarks:\n  - name: gsm8k\n    solver: {service: main}\n    repeats: 1000000000000\n")
        line = assert_one_line_error(nel("eval", "run", "suite.yaml", cwd=tmp_path), 2)
        assert "suite.yaml:6: benchmarks.0.repeats: 1,000,000,000,000 is more than" in line

    def test_problems_times_repeats_past_the_limit_are_refused(self, tmp_path):
        proc = nel(*eval_args("http://127.0.0.1:9/v1", problems=1000, repeats=100_000), cwd=tmp_path)
        assert "NEL_MAX_STEPS" in assert_one_line_error(proc, 2)

    def test_with_the_limits_raised_a_huge_run_streams_in_bounded_memory(self, mock, tmp_path):
        env = clean_env(NEL_MAX_REPEATS=str(10**12), NEL_MAX_STEPS=str(10**12))
        proc = subprocess.Popen([NEL, *eval_args(mock.base_url, problems=1, repeats=10**12, output_dir=tmp_path)],
                                cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(4)  # the run streams for a while: still alive then, and its memory is what is measured
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            rss_mb = _rss_mb(proc.pid)
            proc.terminate()
            # A fast endpoint under uvloop: asyncio.wait_for (Python 3.11) swallowed the cancellation that
            # SIGTERM asks for whenever the answer arrived at the same moment, and the run never stopped.
            code = proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert rss_mb < 400, f"{rss_mb:.0f} MB after 4 s: the work is planned lazily"
        assert code == 130, "SIGTERM interrupts the run, which records itself as interrupted"


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


class TestClosedStandardOutput:
    def test_a_run_piped_into_head_keeps_its_artifacts_and_exit_code(self, mock, tmp_path):
        proc = subprocess.Popen([NEL, *eval_args(mock.base_url, problems=10, repeats=2, output_dir=tmp_path / "o")],
                                cwd=tmp_path, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # `| head -0`: the reader is gone before the first line
        err = proc.stderr.read().decode()
        assert proc.wait(60) == 0, err
        assert "Traceback" not in err and "BrokenPipe" not in err
        assert {"summary.json", "results.jsonl", "trajectories.jsonl"} <= set(_artifacts(tmp_path / "o"))
        assert any(name.startswith("eval-") for name in _artifacts(tmp_path / "o"))

    def test_a_suite_piped_into_head_runs_every_benchmark(self, mock, tmp_path):
        (tmp_path / "suite.yaml").write_text(
            f"services:\n  main: {{type: api, url: '{mock.base_url}', model: nel-mock}}\n"
            "benchmarks:\n  - {name: gsm8k, solver: {service: main}, max_problems: 4}\n"
            "  - {name: unit_conversion_mc, solver: {service: main}, max_problems: 4}\n"
            "output:\n  dir: o\n")
        result = subprocess.run(f"{NEL} eval run suite.yaml --no-progress | head -1", shell=True, cwd=tmp_path,
                                env=clean_env(), capture_output=True, text=True, timeout=120)
        assert len(result.stdout.splitlines()) == 1
        assert open_store(tmp_path / "o").rows("SELECT count(*), count(DISTINCT benchmark) FROM runs") == [(2, 2)]
        assert len(list((tmp_path / "o").glob("runs/*/eval-*.json"))) == 2


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 400 KB filesystem (tmpfs): room for a few hundred steps, then ENOSPC."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=400k", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


class TestDisksAndDirectories:
    def test_a_full_disk_under_the_journal_is_one_line_naming_it(self, mock, tiny_disk, tmp_path):
        proc = nel(*eval_args(mock.base_url, problems=500, repeats=4, output_dir=tiny_disk / "o"), cwd=tmp_path)
        line = assert_one_line_error(proc, 1)
        assert "No space left on device" in line and "journal-" in line, line
        assert not [p for p in tiny_disk.rglob("summary*.json") if p.stat().st_size == 0]

    def test_a_full_disk_under_the_summary_leaves_no_empty_file(self, mock, tiny_disk, tmp_path):
        filler = tiny_disk / "filler"
        with open(filler, "wb", buffering=0) as fh:  # fill it: the store lives elsewhere, the summary goes here
            try:
                while True:
                    fh.write(b"\0" * 4096)
            except OSError:
                pass
        proc = nel(*eval_args(mock.base_url, problems=5, repeats=1, output_dir=tiny_disk / "o",
                              store=tmp_path / "store" / "nel.duckdb"), cwd=tmp_path)
        line = assert_one_line_error(proc, 1)
        assert "summary.json" in line and "No space left on device" in line, line
        assert not list(tiny_disk.rglob("summary.json")), "no zero-byte summary.json"
        assert open_store(tmp_path / "store").rows("SELECT count(*) FROM steps") == [(5,)], "no step lost"

    def test_a_read_only_output_directory_is_a_usage_error(self, mock, tiny_disk, tmp_path):
        subprocess.run(["mount", "-o", "remount,ro", str(tiny_disk)], check=True)
        proc = nel(*eval_args(mock.base_url, problems=2, repeats=1, output_dir=tiny_disk / "o"), cwd=tmp_path)
        line = assert_one_line_error(proc, 2)
        assert str(tiny_disk / "o") in line and "Read-only file system" in line, line

    @pytest.mark.parametrize("flag", ["--output-dir", "--store"])
    def test_a_file_where_a_directory_belongs_is_a_usage_error(self, mock, tmp_path, flag):
        blocker = tmp_path / "a-file"
        blocker.write_text("x")
        target = blocker if flag == "--output-dir" else blocker / "nel.duckdb"
        proc = nel(*eval_args(mock.base_url, problems=2, repeats=1), flag, str(target), cwd=tmp_path)
        assert str(blocker) in assert_one_line_error(proc, 2)
        assert os.path.isfile(blocker)


def test_a_response_longer_than_the_benchmark_bound_is_not_scored(mock, tmp_path):
    import asyncio
    import copy

    from workbench.engine import run_evaluation
    from workbench.environments import get_environment
    from workbench.model.config import ModelConfig
    from workbench.solvers import SimpleSolver

    env = copy.copy(get_environment("gsm8k"))  # the registry's instance is shared by the process
    env.max_response_chars = 10  # every mock reply is longer: none is handed to the scorer
    result = asyncio.run(run_evaluation(env, SimpleSolver(ModelConfig(url=mock.base_url, model_id="nel-mock")),
                                        store=tmp_path / "nel.duckdb", n_repeats=1, max_problems=3,
                                        max_error_rate=1.0))
    assert result.status == "complete"
    rows = open_store(tmp_path).rows("SELECT DISTINCT reward, scoring_method, failure_category, "
                                     "scoring_details->>'reason' LIKE 'response exceeds 10 characters%' FROM steps")
    assert rows == [(0.0, "too_long", "format_error", True)]


@pytest.mark.parametrize("where", ["a file", "a read-only directory"])
def test_serve_export_data_to_a_place_it_cannot_write_is_one_line(tmp_path, tiny_disk, where):
    if where == "a file":
        target = tmp_path / "rows"
        target.write_text("x")
    else:
        subprocess.run(["mount", "-o", "remount,ro", str(tiny_disk)], check=True)
        target = tiny_disk / "rows"
    proc = nel("serve", "-b", "gsm8k", "--export-data", str(target), "--port", "0", cwd=tmp_path)
    assert str(target) in assert_one_line_error(proc, 2)
