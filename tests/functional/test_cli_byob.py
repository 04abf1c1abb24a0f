"""BYOB from the command line: --bench FILE.py, --benchmark-file, nel list and validate."""

import textwrap

import pytest
from nel_helpers import assert_ok, assert_one_line_error, nel

from workbench import open_store

BENCH = '''\
from workbench.environments.byob import ScorerInput, benchmark, scorer

@benchmark(name="echo-words", dataset="words.jsonl", prompt="Repeat the word {word}.", target_field="word")
@scorer
def said_it(sample: ScorerInput) -> dict:
    """Does the reply say anything at all?"""
    return {"correct": bool(sample.response.strip())}
'''


@pytest.fixture
def project(tmp_path):
    (tmp_path / "words.jsonl").write_text("".join(f'{{"word": "w{i}"}}\n' for i in range(8)))
    (tmp_path / "my_bench.py").write_text(BENCH)
    return tmp_path


@pytest.mark.timeout(60)
def test_list_and_validate_see_a_user_benchmark(project):
    listed = nel("list", "--benchmark-file", "my_bench.py", "--search", "echo", cwd=project)
    assert_ok(listed)
    assert "echo-words" in listed.stdout and "gsm8k" not in listed.stdout
    validated = nel("validate", "-b", "my_bench.py", "--samples", "3", cwd=project)
    assert_ok(validated)
    assert "3/3 sampled expected answers score 1.0" in validated.stdout


@pytest.mark.timeout(60)
def test_eval_run_evaluates_a_user_benchmark_file(mock, project):
    proc = nel("eval", "run", "-b", "./my_bench.py", "--model-url", mock.base_url, "--model-id", "nel-mock",
               "--repeats", "2", "--no-progress", "--output-dir", "out", cwd=project)
    assert_ok(proc)
    steps = open_store(project / "out").sql("SELECT count(*) AS n, sum(reward) AS r, any_value(scoring_method) AS m "
                                           "FROM steps")
    assert steps.rows() == [(16, 16.0, "byob:said_it")]


@pytest.mark.timeout(60)
def test_a_cpu_heavy_scorer_runs_in_scoring_processes_that_load_the_users_file(mock, project):
    in_a_worker = "import multiprocessing\n    assert multiprocessing.parent_process() is not None"  # not nel's own
    (project / "heavy.py").write_text(BENCH.replace('target_field="word")', 'target_field="word", scoring="process")')
                                      .replace('"""Does the reply say anything at all?"""', in_a_worker))
    proc = nel("eval", "run", "-b", "heavy.py", "--model-url", mock.base_url, "--model-id", "nel-mock",
               "--no-progress", "--output-dir", "out", cwd=project)
    assert_ok(proc)
    steps = open_store(project / "out").sql("SELECT count(*) AS n, sum(reward) AS r, count(failure_category) AS f "
                                           "FROM steps")
    assert steps.rows() == [(8, 8.0, 0)]


def test_an_unknown_scoring_mode_is_named(project):
    (project / "odd.py").write_text(BENCH.replace('target_field="word")', 'target_field="word", scoring="gpu")'))
    proc = nel("list", "--benchmark-file", "odd.py", cwd=project)
    assert proc.returncode == 2  # shown as the user's own traceback, pointing at their line
    assert 'odd.py", line 3, in <module>' in proc.stderr
    assert "@benchmark echo-words: scoring='gpu'; use one of inline, thread, process" in proc.stderr


@pytest.mark.timeout(60)
def test_a_user_file_that_raises_shows_its_own_traceback(project):
    (project / "broken.py").write_text(textwrap.dedent("""\
        def load():
            raise RuntimeError("my data is missing")
        load()
        """))
    proc = nel("list", "--benchmark-file", "broken.py", cwd=project)
    assert proc.returncode == 2
    assert 'broken.py", line 2, in load' in proc.stderr and "RuntimeError: my data is missing" in proc.stderr


@pytest.mark.timeout(60)
def test_a_config_can_load_benchmark_files(mock, project):
    (project / "suite.yaml").write_text(textwrap.dedent(f"""\
        benchmark_files: [my_bench.py]
        services:
          m: {{url: "{mock.base_url}", model: nel-mock}}
        benchmarks:
          - name: echo-words
            repeats: 1
        output: {{dir: out}}
        """))
    assert_ok(nel("eval", "run", "suite.yaml", "--no-progress", cwd=project))
    bad = nel("eval", "run", "suite.yaml", "-O", "benchmark_files.0=nope.py", cwd=project)
    assert "benchmark_files.0" in assert_one_line_error(bad, 2)
