"""`nel import inspect`: what inspect_ai itself wrote (a GSM8K task over nel's own gsm8k problems, 4 epochs, run by
inspect_ai against the mock model on loopback) becomes a run whose pass rate is inspect's accuracy exactly and whose
samples pair, task by task, with a native ``nel eval run -b gsm8k`` of the same problems against the same mock.

inspect_ai talks to the mock through its own ``openai-api`` provider (the ``openai`` package, in the ``[inspect]``
extra), with ``NELMOCK_BASE_URL`` / ``NELMOCK_API_KEY`` as that provider reads them. It sends neither a seed nor nel's
attempt header, so the mock samples inspect's epochs as it samples any harness's repeats.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from nel_helpers import assert_ok, eval_args, nel

from workbench.environments import get_environment
from workbench.environments.dataset import DatasetEnvironment
from workbench.importers.inspect_log import import_inspect
from workbench.mock import MockHandle, mock_model
from workbench.store import open_store

pytestmark = pytest.mark.timeout(240)
N_PROBLEMS = 12
EPOCHS = 4
TEMPLATE = ("Solve the following math problem step by step. The last line of your response should be of the form "
            "\"ANSWER: $ANSWER\" (without quotes) where $ANSWER is the answer to the problem.\n\n{prompt}")


_FINAL = re.compile(r"(?:####|answer is:?|ANSWER:|Answer:)\s*\$?(-?[\d,]*\.?\d+)|\\boxed\{\$?(-?[\d,]*\.?\d+)\}")


def final_number() -> Any:
    """GSM8K's final answer: the last ``#### N`` / ``The answer is: N`` / ``ANSWER: N`` / ``\\boxed{N}``, as a number.

    inspect_ai's ``match(numeric=True)`` (what inspect_evals' gsm8k uses) reads the last number of the text, so it
    misses ``\\boxed{540}``, one of the final-answer forms the mock writes: the scorer here is one that reads every
    form GSM8K answers take, so inspect and nel judge the same replies alike."""
    from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer, stderr

    @scorer(metrics=[accuracy(), stderr()], name="final_number")
    def build() -> Any:
        async def score(state: Any, target: Target) -> Score:
            found = _FINAL.findall(state.output.completion)
            answer = (found[-1][0] or found[-1][1]).replace(",", "") if found else ""
            try:
                right = answer != "" and float(answer) == float(target.text)
            except ValueError:
                right = False
            return Score(value=CORRECT if right else INCORRECT, answer=answer, explanation=state.output.completion)
        return score

    return build()


@pytest.fixture(scope="module")
def mock() -> Iterator[MockHandle]:
    """A mock of this module's own: its per-prompt attempt counters start with inspect's epochs."""
    with mock_model(latency_ms=0) as handle:
        yield handle


@pytest.fixture(scope="module")
def inspect_log(mock: MockHandle, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """inspect_ai's own run of GSM8K (a GSM8K final-answer scorer, ``final_number``) and its log."""
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.solver import generate, prompt_template

    env = get_environment("gsm8k")
    assert isinstance(env, DatasetEnvironment)
    rows = env.rows[:N_PROBLEMS]
    samples = [Sample(id=i, input=r["question"], target=r["answer"].split("####")[-1].strip().replace(",", ""),
                      metadata={"row": i}) for i, r in enumerate(rows)]
    task = Task(dataset=MemoryDataset(samples, name="gsm8k"), solver=[prompt_template(TEMPLATE), generate()],
                scorer=final_number(), epochs=EPOCHS, name="gsm8k")
    log_dir = tmp_path_factory.mktemp("inspect-logs")
    with pytest.MonkeyPatch.context() as env_vars:
        env_vars.setenv("NELMOCK_BASE_URL", mock.base_url)
        env_vars.setenv("NELMOCK_API_KEY", "sk-not-a-real-key")
        [log] = inspect_eval(task, model="openai-api/nelmock/nel-mock", display="none", log_dir=str(log_dir),
                             max_connections=4)
    assert log.status == "success", log.error
    return Path(log.location), log


def _steps(store: Path, run_id: str) -> list[dict[str, Any]]:
    return open_store(store).dicts("SELECT * EXCLUDE (started_at) FROM steps WHERE run_id = ? "
                                   "ORDER BY task_idx, repeat", [run_id])


def _stats(store: Path, run_id: str) -> dict[str, Any]:
    return open_store(store).dicts("SELECT * FROM run_scores WHERE run_id = ?", [run_id])[0]


def test_the_pass_rate_nel_computes_is_inspects_accuracy_exactly(inspect_log, tmp_path):
    path, log = inspect_log
    store = tmp_path / "nel.duckdb"
    [result] = import_inspect(store, path)
    accuracy = log.results.scores[0].metrics["accuracy"].value

    steps = _steps(store, result.run_id)
    assert result.benchmark == "gsm8k" and result.metric == "numeric"
    assert len(steps) == N_PROBLEMS * EPOCHS and result.n_unpaired_tasks == 0
    assert {s["repeat"] for s in steps} == set(range(EPOCHS))
    assert 0 < accuracy < 1, "a mock that solves some and misses some: a real comparison"
    assert _stats(store, result.run_id)["mean_reward"] == accuracy
    assert result.reported == accuracy
    step = steps[0]
    assert step["response"] and step["prompt_tokens"] and step["latency_ms"] > 0
    assert orjson.loads(step["messages"])[0]["role"] == "user"
    assert TEMPLATE.split("{")[0][:40] in orjson.loads(step["messages"])[0]["content"]


def test_reimport_writes_nothing_and_both_readers_store_the_same_steps(inspect_log, tmp_path):
    path, _ = inspect_log
    store_a, store_b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    [a] = import_inspect(store_a, path, use_reader=True)
    [b] = import_inspect(store_b, path, use_reader=False)
    [again] = import_inspect(store_a, path)

    assert a.run_id == b.run_id and again.already_imported and again.run_id == a.run_id
    steps_a, steps_b = _steps(store_a, a.run_id), _steps(store_b, b.run_id)
    differing = {k for x, y in zip(steps_a, steps_b, strict=True) for k in x if x[k] != y[k]}
    assert not differing, differing
    assert steps_a == steps_b
    assert len(_steps(store_a, a.run_id)) == N_PROBLEMS * EPOCHS


def test_compare_with_a_native_run_of_the_same_problems_finds_no_difference(inspect_log, mock, tmp_path):
    path, _ = inspect_log
    store = tmp_path / "nel.duckdb"
    [imported] = import_inspect(store, path)
    assert_ok(nel(*eval_args(mock.base_url, problems=N_PROBLEMS, repeats=EPOCHS, store=store,
                             extra=["--run-id", "native"]), cwd=tmp_path))
    proc = nel("compare", "native", imported.run_id, "--store", str(store), "--show-flips", cwd=tmp_path)
    assert_ok(proc)
    assert "compare gsm8k, metric numeric" in proc.stdout
    assert f"paired     {N_PROBLEMS} tasks; 0 only in the baseline, 0 only in the candidate" in proc.stdout, proc.stdout
    native = {s["task_id"]: s["reward"] for s in _steps(store, "native")}
    theirs = {s["task_id"]: s["reward"] for s in _steps(store, imported.run_id)}
    assert native.keys() == theirs.keys()
    per_task: dict[str, dict[str, list[float]]] = {}
    for run in ("native", imported.run_id):
        for s in _steps(store, run):
            per_task.setdefault(s["task_id"], {}).setdefault(run, []).append(s["reward"])
    assert all(sum(v["native"]) == sum(v[imported.run_id]) for v in per_task.values()), per_task



def test_the_cli_refuses_a_file_that_is_not_an_inspect_log_in_one_line(tmp_path):
    bad = tmp_path / "notes.eval"
    bad.write_text("not a log")
    proc = nel("import", "inspect", str(bad), "--store", str(tmp_path / "nel.duckdb"), cwd=tmp_path)
    assert proc.returncode == 2 and "notes.eval: not an inspect_ai .eval log (not a zip archive)" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_an_eval_set_directory_imports_its_logs_past_eval_set_json(mock, tmp_path):
    """inspect_ai's own ``eval_set`` writes ``eval-set.json`` (and a ``logs.json`` listing) beside its logs: they are
    not logs, so the import skips them instead of refusing the directory (it exited 2 on eval-set.json)."""
    from inspect_ai import Task, eval_set
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.solver import generate

    env = get_environment("gsm8k")
    assert isinstance(env, DatasetEnvironment)
    samples = [Sample(id=i, input=r["question"], target=r["answer"].split("####")[-1].strip().replace(",", ""))
               for i, r in enumerate(env.rows[:2])]
    task = Task(dataset=MemoryDataset(samples, name="gsm8k"), solver=[generate()], scorer=final_number(),
                name="gsm8k")
    log_dir = tmp_path / "logs"
    with pytest.MonkeyPatch.context() as env_vars:
        env_vars.setenv("NELMOCK_BASE_URL", mock.base_url)
        env_vars.setenv("NELMOCK_API_KEY", "sk-not-a-real-key")
        ok, _ = eval_set([task], log_dir=str(log_dir), model="openai-api/nelmock/nel-mock", display="none",
                         retry_attempts=0)
    assert ok and (log_dir / "eval-set.json").is_file()
    proc = nel("import", "inspect", str(log_dir), "--store", str(tmp_path / "nel.duckdb"), cwd=tmp_path)
    assert_ok(proc)
    assert proc.stdout.count("run inspect-gsm8k-") == 1 and "samples    2, up to 1 epoch(s) each" in proc.stdout
    assert "files that are not inspect logs:" in proc.stdout and "  eval-set.json: " in proc.stdout, proc.stdout
    [run] = open_store(tmp_path / "nel.duckdb").dicts("SELECT n_tasks FROM runs")
    assert run["n_tasks"] == 2
