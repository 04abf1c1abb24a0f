"""`nel import gym`: NeMo Gym rollout files become a run every workbench feature reads."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest
from nel_helpers import ROOT, assert_ok, assert_one_line_error, eval_args, nel

from workbench import open_store
from workbench.analysis.diagnosis.api import diagnose
from workbench.analysis.sources import load_run
from workbench.analysis.triage import task_detail, task_list, transcript
from workbench.gym.importer import import_gym

SECRET = "sk-SECRET-do-not-store"
NEW = ("_ng_task_index", "_ng_rollout_index")
OLD = ("_task_index", "_rollout_index")


def _input(task: int) -> dict[str, Any]:
    """A task row as Gym's datasets hold it."""
    return {
        "responses_create_params": {
            "input": [{"role": "system", "content": "Answer with a number."},
                      {"role": "user", "content": f"What is {task} + 1?"}],
            "model": "policy-model", "temperature": 0.6, "metadata": {"api_key": SECRET},
        },
        "expected_answer": str(task + 1),
        "category": "algebra" if task % 2 == 0 else "geometry",
        "agent_ref": {"name": "math_simple_agent"},
    }


def _response(task: int, rollout: int, answer: str, *, tool: bool = False) -> dict[str, Any]:
    """A Responses-API object as Gym's agents return it: reasoning, an optional tool round, the message."""
    output: list[dict[str, Any]] = [
        {"id": f"rs_{task}_{rollout}", "type": "reasoning", "summary": [{"type": "summary_text", "text": "add one"}]},
    ]
    if tool:
        output += [
            {"id": f"fc_{task}", "type": "function_call", "call_id": f"call_{task}", "name": "calculator",
             "arguments": '{"expr": "1+1"}', "status": "completed"},
            {"type": "function_call_output", "call_id": f"call_{task}", "output": "2"},
        ]
    output.append({"id": f"msg_{task}_{rollout}", "type": "message", "role": "assistant", "status": "completed",
                   "content": [{"type": "output_text", "text": f"The answer is {answer}.", "annotations": []}]})
    return {"id": f"resp_{task}_{rollout}", "object": "response", "created_at": 1_700_000_000.0 + task,
            "model": "policy-model", "status": "completed", "output": output, "parallel_tool_calls": True,
            "tool_choice": "auto", "tools": [],
            "usage": {"input_tokens": 20, "output_tokens": 6, "total_tokens": 26,
                      "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 2}}}


def _rollout(task: int, rollout: int, reward: float, keys: tuple[str, str] = NEW, **extra: Any) -> dict[str, Any]:
    answer = str(task + 1) if reward else "7"
    return {**_input(task), keys[0]: task, keys[1]: rollout, "reward": reward, "extracted_answer": answer,
            "response": _response(task, rollout, answer, tool=task == 1), "api_key": SECRET, **extra}


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


def _files(root: Path, keys: tuple[str, str] = NEW) -> tuple[Path, Path, Path]:
    """Tasks 0-3, two rollouts each materialized; task 3 never ran, task 2's second rollout failed twice."""
    inputs = _write(root / "rollouts_materialized_inputs.jsonl",
                    [{**_input(t), keys[0]: t, keys[1]: r} for t in range(4) for r in range(2)])
    rollouts = _write(root / "rollouts.jsonl", [
        _rollout(1, 1, 0.0, keys), _rollout(0, 0, 1.0, keys), _rollout(0, 1, 1.0, keys), _rollout(1, 0, 1.0, keys),
        _rollout(2, 0, 0.0, keys),
    ])
    failures = _write(root / "rollouts_failures.jsonl", [
        {keys[0]: 2, keys[1]: 1, "_ng_failure_class": "timeout_exceeded", "error": "rollout timed out"},
        {keys[0]: 2, keys[1]: 1, "_ng_failure_class": "agent_run_error", "error": "sandbox died", "api_key": SECRET},
    ])
    return rollouts, inputs, failures


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """The fixture files imported with `nel import gym`; returns the store, the run id and the output."""
    root = tmp_path_factory.mktemp("gym")
    rollouts, inputs, failures = _files(root)
    proc = nel("import", "gym", str(rollouts), "--inputs", str(inputs), "--failures", str(failures),
               "--store", str(root / "nel.duckdb"), cwd=root)
    assert_ok(proc)
    run_id = proc.stdout.split()[1].rstrip(":")
    return root / "nel.duckdb", run_id, proc.stdout


def test_import_reports_tasks_rollouts_missing_and_failures_and_the_next_commands(imported):
    _, run_id, out = imported
    assert run_id.startswith("gym-math_simple_agent-")
    assert "4 (1 missing: no rollout)" in out
    assert "5 imported, 2 per task at most, 2 materialized but missing" in out
    assert "failures   1" in out
    assert f"nel eval stats {run_id}" in out and "nel tui" in out


def test_load_run_numbers_match_the_rows(imported):
    store, run_id, _ = imported
    run = load_run(run_id, store=store)
    assert (run.benchmark, run.model_id, run.n_repeats) == ("math_simple_agent", "policy-model", 2)
    attempts = run.attempts.sort("task_idx", "repeat")
    assert attempts.select("task_idx", "repeat").rows() == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]
    assert attempts["passed"].to_list() == [True, True, True, False, False, False]
    assert attempts["total_tokens"].to_list()[:5] == [26] * 5
    assert run.tasks.height == 4
    assert "category" in run.metadata_columns
    metrics = open_store(store).dicts("SELECT * FROM run_metrics WHERE run_id = ?", [run_id])[0]
    assert (metrics["status"], metrics["n_tasks"], metrics["n_missing"], metrics["n_steps"]) == ("complete", 4, 1, 6)
    assert metrics["n_errors"] == 1  # the failed rollout, kept as a failure


def test_failed_rollout_keeps_its_last_error_and_attempt_count(imported):
    store, run_id, _ = imported
    row = open_store(store).dicts(
        "SELECT failure_category, error, n_retries, passed, reward FROM steps WHERE run_id = ? AND task_idx = 2 "
        "AND repeat = 1", [run_id])[0]
    assert row == {"failure_category": "server_error", "error": "sandbox died", "n_retries": 1, "passed": False,
                   "reward": 0.0}


def test_eval_stats_and_diagnose_run_on_the_imported_run(imported):
    store, run_id, _ = imported
    proc = nel("eval", "stats", run_id, "--store", str(store), "--bootstrap", "0", cwd=store.parent)
    assert_ok(proc)
    assert run_id in proc.stdout
    diagnosis = diagnose(load_run(run_id, store=store))
    assert diagnosis.baseline is not None
    proc = nel("diagnose", run_id, "--store", str(store), cwd=store.parent)
    assert_ok(proc)


def test_tui_queries_show_the_transcript_with_tool_calls(imported):
    store, run_id, _ = imported
    s = open_store(store)
    listing = task_list(s, run_id)
    assert listing.run is not None
    assert {r.task_idx: r.bucket for r in listing.page.rows}[3] == "missing"
    detail = task_detail(s, run_id, 1)
    assert detail is not None and detail.prompt == "What is 1 + 1?" and detail.expected_answer == "2"
    text = "\n".join(b.text for b in transcript(detail.attempts[0]))
    for expected in ("Answer with a number.", "What is 1 + 1?", "calculator", "The answer is 2.", "add one"):
        assert expected in text
    kinds = [b.kind for b in transcript(detail.attempts[0])]
    assert kinds.count("tool") == 2 and "reasoning" in kinds  # the call and its result


def test_no_secret_reaches_the_store(imported):
    store, _, _ = imported
    dump = open_store(store).rows(
        "SELECT string_agg(CAST(s AS VARCHAR), '') FROM (SELECT steps AS s FROM steps UNION ALL "
        "SELECT tasks FROM tasks UNION ALL SELECT runs FROM runs)")[0][0]
    assert "SECRET" not in dump and "api_key" not in dump


def test_older_index_spellings_import_the_same_steps(tmp_path, imported):
    store, run_id, _ = imported
    rollouts, inputs, failures = _files(tmp_path, OLD)
    result = import_gym(tmp_path / "nel.duckdb", rollouts, inputs=inputs, failures=failures)
    assert (result.n_tasks, result.n_rollouts, result.n_failures, result.n_missing_tasks) == (4, 5, 1, 1)
    query = "SELECT task_idx, repeat, task_id, passed, failure_category FROM steps WHERE run_id = ? ORDER BY ALL"
    assert open_store(tmp_path).rows(query, [result.run_id]) == open_store(store).rows(query, [run_id])


def test_rollouts_without_a_rollout_index_are_numbered_per_task(tmp_path):
    rows = [_rollout(0, 0, 1.0), _rollout(0, 0, 0.0), _rollout(1, 0, 1.0)]
    for row in rows:
        del row["_ng_rollout_index"]
    result = import_gym(tmp_path / "nel.duckdb", _write(tmp_path / "r.jsonl", rows), benchmark="bench")
    assert (result.n_repeats, result.n_rollouts, result.run_id.startswith("gym-bench-")) == (2, 3, True)


def test_reimporting_the_same_files_writes_nothing(imported):
    store, run_id, _ = imported
    rollouts, inputs, failures = (store.parent / n for n in (
        "rollouts.jsonl", "rollouts_materialized_inputs.jsonl", "rollouts_failures.jsonl"))
    before = open_store(store).rows("SELECT count(*) FROM steps")[0][0]
    proc = nel("import", "gym", str(rollouts), "--inputs", str(inputs), "--failures", str(failures),
               "--store", str(store), cwd=store.parent)
    assert_ok(proc)
    assert f"run {run_id}: already imported" in proc.stdout
    assert open_store(store).rows("SELECT count(*) FROM steps")[0][0] == before


def test_a_run_id_taken_by_other_content_is_refused(imported, tmp_path):
    store, run_id, _ = imported
    other = _write(tmp_path / "other.jsonl", [_rollout(0, 0, 0.0)])
    proc = nel("import", "gym", str(other), "--run-id", run_id, "--store", str(store), cwd=tmp_path)
    line = assert_one_line_error(proc, 2)
    assert f"run {run_id} is already in the store with other content" in line and "content_sha256" in line


def test_a_malformed_line_names_the_file_and_line(tmp_path):
    path = tmp_path / "rollouts.jsonl"
    path.write_bytes(orjson.dumps(_rollout(0, 0, 1.0)) + b"\n\n{not json\n")
    proc = nel("import", "gym", str(path), "--store", str(tmp_path), cwd=tmp_path)
    assert f"{path}:3: not valid JSON" in assert_one_line_error(proc, 2)
    assert not (tmp_path / "nel.duckdb").exists()  # validated before anything was written


def test_a_row_without_a_task_index_names_the_field(tmp_path):
    row = _rollout(0, 0, 1.0)
    del row["_ng_task_index"]
    path = _write(tmp_path / "rollouts.jsonl", [_rollout(1, 0, 1.0), row])
    line = assert_one_line_error(nel("import", "gym", str(path), "--store", str(tmp_path), cwd=tmp_path), 2)
    assert f"{path}:2: no task index" in line and "_ng_task_index" in line and "_task_index" in line


def test_an_empty_file_says_so(tmp_path):
    path = tmp_path / "rollouts.jsonl"
    path.write_bytes(b"\n")
    line = assert_one_line_error(nel("import", "gym", str(path), "--store", str(tmp_path), cwd=tmp_path), 2)
    assert "no rollouts in this file (it is empty)" in line


GYM_PYTHON = ROOT / ".venv-gym" / "bin" / "python"
needs_gym = pytest.mark.skipif(not GYM_PYTHON.exists(), reason="needs NeMo Gym in .venv-gym")
_GYM_SCRIPT = """
import sys, orjson
from nemo_gym.base_resources_server import BaseVerifyResponse
rows = [orjson.loads(line) for line in open(sys.argv[1], "rb")]
with open(sys.argv[2], "wb") as out:
    for row in rows:
        verified = BaseVerifyResponse.model_validate(row).model_dump(mode="json")
        extra = {k: v for k, v in row.items() if k not in verified}  # the row's own fields travel along
        out.write(orjson.dumps({**extra, **verified}) + b"\\n")
"""


@pytest.mark.skipif(not GYM_PYTHON.exists(), reason="needs NeMo Gym in .venv-gym")
def test_rows_validated_by_gyms_own_models_import(tmp_path):
    """A row shaped by nemo_gym's own pydantic models (BaseVerifyResponse, NeMoGymResponse) imports as is."""
    source = _write(tmp_path / "draft.jsonl", [_rollout(0, 0, 1.0), _rollout(1, 0, 0.0), _rollout(1, 1, 1.0)])
    rollouts = tmp_path / "rollouts.jsonl"
    proc = subprocess.run([str(GYM_PYTHON), "-c", _GYM_SCRIPT, str(source), str(rollouts)],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    first = orjson.loads(rollouts.read_bytes().splitlines()[0])
    assert first["response"]["output"][-1]["content"][0]["type"] == "output_text"  # Gym filled its defaults
    result = import_gym(tmp_path / "nel.duckdb", rollouts)
    assert (result.n_tasks, result.n_rollouts, result.model_id) == (2, 3, "policy-model")
    detail = task_detail(open_store(tmp_path), result.run_id, 0)
    assert detail is not None and detail.attempts[0].response == "The answer is 1."
    assert detail.attempts[0].passed and detail.attempts[0].total_tokens == 26


# ---- pairing with a native run: same task ids, same metric ------------------------------------------
PAIRED_PROBLEMS, PAIRED_REPEATS = 10, 2


def _gym_reward(task: int, rollout: int) -> float:
    """Gym's verdicts in the fixture rollouts: a pattern with passes and fails on both repeats."""
    return 0.0 if (task + rollout) % 3 == 0 else 1.0


def _exported_rollouts(*, drop: tuple[str, ...] = (), **extra: Any) -> list[dict[str, Any]]:
    """Rollouts of gsm8k's first problems as Gym writes them for the rows `nel serve --export-data` exports:
    the row's fields, the indices, Gym's verdict and a Responses-API response; ``drop`` removes row fields."""
    from workbench.environments import get_environment
    from workbench.serve.export import gym_row

    env = get_environment("gsm8k")
    out = []
    for task in range(PAIRED_PROBLEMS):
        row = {k: v for k, v in gym_row(env, task).items() if k not in drop}
        for rollout in range(PAIRED_REPEATS):
            reward = _gym_reward(task, rollout)
            answer = row.get("expected_answer", "0") if reward else "-1"
            out.append({**row, "_ng_task_index": task, "_ng_rollout_index": rollout, "reward": reward,
                        "response": _response(task, rollout, str(answer)), **extra})
    return out


def _validated_by_gym(tmp_path: Path, rows: list[dict[str, Any]], name: str = "rollouts.jsonl") -> Path:
    """``rows`` passed through Gym's own BaseVerifyResponse (as its agents write rollouts): the file it wrote."""
    source = _write(tmp_path / f"draft-{name}", rows)
    out = tmp_path / name
    proc = subprocess.run([str(GYM_PYTHON), "-c", _GYM_SCRIPT, str(source), str(out)],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def native_run(mock, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A native `nel eval run -b gsm8k --max-problems 10 --repeats 2` against the mock: its store and run id."""
    root = tmp_path_factory.mktemp("native")
    store = root / "nel.duckdb"
    assert_ok(nel(*eval_args(mock.base_url, problems=PAIRED_PROBLEMS, repeats=PAIRED_REPEATS, store=store), cwd=root))
    return store, open_store(store).rows("SELECT run_id FROM runs")[0][0]


def _native_ids(store: Path, run_id: str) -> list[str]:
    return [r[0] for r in open_store(store).rows(
        "SELECT task_id FROM run_tasks WHERE run_id = ? ORDER BY task_idx", [run_id])]


def _import_into(store: Path, rollouts: Path, *args: str) -> tuple[str, str]:
    proc = nel("import", "gym", str(rollouts), *args, "--store", str(store), cwd=rollouts.parent)
    assert_ok(proc)
    return proc.stdout.split()[1].rstrip(":"), proc.stdout


@needs_gym
class TestPairingWithANativeRun:
    """Same model and data, nel's loop vs Gym's harness: one `nel compare` pairs them task by task."""

    def test_exported_rows_keep_nels_task_ids_and_the_benchmarks_metric(self, native_run, tmp_path):
        store, native = native_run
        rollouts = _validated_by_gym(tmp_path, _exported_rollouts())
        gym_run, out = _import_into(store, rollouts)
        assert "metric     numeric (gsm8k's own" in out and "paired     10 of 10 tasks" in out
        assert "unpaired" not in out
        assert _native_ids(store, gym_run) == _native_ids(store, native)
        run = load_run(gym_run, store=store)
        assert (run.benchmark, run.metric, run.metrics) == ("gsm8k", "numeric", ("numeric",))

        proc = nel("compare", native, gym_run, "--store", str(store), cwd=tmp_path)
        assert_ok(proc)
        assert "metric numeric" in proc.stdout
        assert f"paired     {PAIRED_PROBLEMS} tasks; 0 only in the baseline, 0 only in the candidate" in proc.stdout
        assert_ok(nel("diagnose", native, gym_run, "--store", str(store), cwd=tmp_path))

    def test_reimporting_exported_rollouts_writes_nothing(self, native_run, tmp_path):
        store, _ = native_run
        rollouts = _validated_by_gym(tmp_path, _exported_rollouts())
        first, _ = _import_into(store, rollouts)
        before = open_store(store).rows("SELECT count(*) FROM steps")[0][0]
        again, out = _import_into(store, rollouts)
        assert again == first and "already imported" in out
        assert open_store(store).rows("SELECT count(*) FROM steps")[0][0] == before

    def test_rows_that_lost_the_task_id_pair_by_their_prompt(self, native_run, tmp_path):
        """Gym's own verifiers echo only the fields they know: the prompt finds nel's task in the benchmark
        that `eval_type` (the benchmark's name) or --benchmark names."""
        store, native = native_run
        by_eval_type = _validated_by_gym(tmp_path, _exported_rollouts(drop=("task_id", "benchmark"),
                                                                      eval_type="gsm8k"), "a.jsonl")
        gym_run, out = _import_into(store, by_eval_type)
        assert "paired     10 of 10 tasks" in out
        assert _native_ids(store, gym_run) == _native_ids(store, native)
        bare = _validated_by_gym(tmp_path, _exported_rollouts(drop=("task_id", "benchmark", "eval_type")), "b.jsonl")
        gym_run, out = _import_into(store, bare, "--benchmark", "gsm8k")
        assert "paired     10 of 10 tasks" in out and _native_ids(store, gym_run) == _native_ids(store, native)

    def test_the_materialized_inputs_lend_their_task_ids_to_rollouts_without_one(self, native_run, tmp_path):
        store, native = native_run
        rollouts = _validated_by_gym(tmp_path, _exported_rollouts(drop=("task_id", "benchmark", "eval_type")))
        inputs = _write(tmp_path / "rollouts_materialized_inputs.jsonl", [
            {**{k: v for k, v in r.items() if k not in ("reward", "response")}} for r in _exported_rollouts()])
        gym_run, out = _import_into(store, rollouts, "--inputs", str(inputs))
        assert "paired     10 of 10 tasks" in out and _native_ids(store, gym_run) == _native_ids(store, native)


@needs_gym
def test_rows_without_a_task_id_or_a_known_prompt_are_imported_unpaired_and_named(native_run, tmp_path):
    """Not guessed: the rows are imported under ids of their own, and the report names rows and reasons."""
    store, native = native_run
    rows = _exported_rollouts()
    for n in (2, 3, 4, 5, 6, 11):  # row n is line n + 1: tasks 1 and 2, task 3's first rollout, task 5's second
        rows[n].pop("task_id")
    for n in (2, 3, 4, 5):  # tasks 1 and 2: a prompt gsm8k does not hold
        rows[n]["responses_create_params"] = {"input": [{"role": "user", "content": f"Not a gsm8k problem {n // 2}"}]}
    rows[10]["responses_create_params"] = rows[11]["responses_create_params"] = {"input": []}
    rows[10].pop("task_id")  # task 5: no id and no prompt at all; task 3 keeps a gsm8k prompt, so it pairs
    rollouts = _validated_by_gym(tmp_path, rows)
    gym_run, out = _import_into(store, rollouts)
    assert "paired     7 of 10 tasks" in out and "unpaired   3 tasks" in out
    assert "rollouts.jsonl rows 3-6: no task_id, and the prompt is none of gsm8k's problems" in out
    assert "rollouts.jsonl rows 11-12: no task_id and no prompt (responses_create_params.input)" in out
    ids = _native_ids(store, gym_run)
    assert [i.startswith("gym-") for i in ids] == [False, True, True, False, False, True, False, False, False, False]
    proc = nel("compare", native, gym_run, "--store", str(store), cwd=tmp_path)
    assert_ok(proc)
    assert "paired     7 tasks; 3 only in the baseline, 3 only in the candidate" in proc.stdout
