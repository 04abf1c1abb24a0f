"""Runs whose attempts each get a sandbox: HumanEval's code run against its tests, and an agent (the
tool-calling solver) working on file tasks that are verified by inspecting its sandbox afterwards.

These use the local sandbox (a subprocess with rlimits, in bubblewrap when it works here); the same
runs in Docker containers are in test_sandboxed_docker_runs.py.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from nel_helpers import assert_ok, assert_one_line_error, nel

from workbench.mock import MockHandle
from workbench.store import open_store

pytestmark = pytest.mark.timeout(180)


def run(mock: MockHandle, tmp_path: Path, bench: str, *extra: str, problems: int, repeats: int) -> Path:
    store = tmp_path / "nel.duckdb"
    proc = nel("eval", "run", "-b", bench, "--model-url", mock.base_url, "--model-id", "nel-mock",
               "--max-problems", str(problems), "--repeats", str(repeats), "--store", str(store),
               "--output-dir", str(tmp_path), "--no-progress", "--max-concurrent", "8", *extra,
               cwd=tmp_path, timeout=150)
    assert_ok(proc)
    return store


def test_humaneval_runs_each_answer_against_its_tests_in_a_sandbox(mock: MockHandle, tmp_path: Path) -> None:
    store = run(mock, tmp_path, "humaneval", "--sandbox", "local", problems=8, repeats=2)
    s = open_store(store)
    runs = s.runs()
    assert runs["status"].to_list() == ["complete"] and runs["n_steps"].to_list() == [16]
    rows = s.dicts("SELECT passed, extracted_answer, scoring_details->>'outcome' AS outcome, "
                   "scoring_details->>'sandbox' AS sandbox, scoring_details->>'extraction' AS extraction FROM steps")
    outcomes = {r["outcome"] for r in rows}
    assert "passed" in outcomes and outcomes - {"passed"}, outcomes  # the mock gets some wrong
    assert all(r["passed"] == (r["outcome"] == "passed") for r in rows)
    assert all("weaker isolation" in r["sandbox"] for r in rows)  # the local sandbox says what it is
    assert all(r["extraction"] in ("fenced_python", "fenced", "bare", "none") for r in rows)
    identity = s.dicts("SELECT identity->'sandbox'->>'type' AS t FROM runs")[0]["t"]
    assert identity == "local"


def test_an_agent_works_in_its_sandbox_and_every_tool_call_is_kept(mock: MockHandle, tmp_path: Path) -> None:
    store = run(mock, tmp_path, "file_tasks", "--sandbox", "local", problems=24, repeats=3)
    s = open_store(store)
    buckets = set(s.tasks(s.runs()["run_id"][0])["bucket"].to_list())
    assert "sometimes" in buckets and "always" in buckets
    calls = s.dicts("SELECT name, exit_code, error, turn FROM step_tool_calls")
    assert {c["name"] for c in calls} >= {"bash", "file_write", "str_replace_editor", "file_read"}
    failed = s.dicts("SELECT scoring_details->'tool_failures' AS f, scoring_details->'failed' AS checks "
                     "FROM steps WHERE NOT passed AND (scoring_details->'tool_failures') IS NOT NULL")
    assert failed and any("bash exited 1 on turn 1" in str(r["f"]) for r in failed)
    passed = s.dicts("SELECT count(*) AS n FROM steps WHERE passed AND turns IS NOT NULL")[0]["n"]
    assert passed > 0
    categories = set(s.dicts("SELECT list(DISTINCT failure_category) AS c FROM steps")[0]["c"])
    assert "max_turns_exhausted" in categories  # the mock's looping agent ran out of turns


def test_a_config_sets_the_sandbox_and_the_agent_loop(mock: MockHandle, tmp_path: Path) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text(textwrap.dedent(f"""\
        services:
          m: {{url: "{mock.base_url}", model: nel-mock}}
        sandboxes:
          box: {{type: local, timeout: 5, memory: 256m}}
        benchmarks:
          - name: file_tasks
            sandbox: box
            max_problems: 6
            repeats: 2
            solver: {{type: tool_calling, max_turns: 2, tool_timeout: 5, max_output_chars: 500,
                      response_mode: sandbox_artifact}}
          - name: humaneval
            sandbox: box
            max_problems: 3
            solver: {{type: tool_calling, max_turns: 3, response_mode: sandbox_artifact}}
        output: {{dir: "{tmp_path}"}}
        """))
    proc = nel("eval", "run", str(config), "--no-progress", cwd=tmp_path, timeout=150)
    assert proc.returncode in (0, 1), proc.stderr
    s = open_store(tmp_path / "nel.duckdb")
    agent = s.dicts("SELECT identity->>'max_turns' AS turns FROM runs WHERE benchmark = 'file_tasks'")[0]
    assert agent["turns"] == "2"
    turns = s.dicts("SELECT max(json_array_length(turns)) AS n FROM steps s JOIN runs r USING (run_id) "
                    "WHERE r.benchmark = 'file_tasks'")[0]["n"]
    assert turns == 2  # max_turns bounds every attempt
    # humaneval in sandbox_artifact mode scores solution.py as the agent left it; the mock answers in its
    # message instead, so there is no artifact, and the details say so
    missing = s.dicts("SELECT bool_and(CAST(scoring_details->>'artifact_missing' AS BOOLEAN)) AS all_missing, "
                      "bool_or(passed) AS any_passed FROM steps s JOIN runs r USING (run_id) "
                      "WHERE r.benchmark = 'humaneval'")[0]
    assert missing == {"all_missing": True, "any_passed": False}


def test_a_benchmark_that_needs_a_sandbox_is_refused_without_one(mock: MockHandle, tmp_path: Path) -> None:
    for bench in ("humaneval", "file_tasks"):
        proc = nel("eval", "run", "-b", bench, "--model-url", mock.base_url, "--model-id", "nel-mock",
                   "--store", str(tmp_path / "nel.duckdb"), cwd=tmp_path)
        line = assert_one_line_error(proc, 2)
        assert "sandbox" in line and "--sandbox docker|local" in line, line


def test_a_sandbox_for_a_benchmark_that_runs_no_code_is_refused(mock: MockHandle, tmp_path: Path) -> None:
    proc = nel("eval", "run", "-b", "gsm8k", "--model-url", mock.base_url, "--model-id", "nel-mock",
               "--sandbox", "local", "--store", str(tmp_path / "nel.duckdb"), cwd=tmp_path)
    assert "not scored in a sandbox" in assert_one_line_error(proc, 2)
