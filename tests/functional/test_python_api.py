"""NeMo Evaluator's API reference, typed as its users type it (``nemo_evaluator`` → ``workbench``), against the
mock model: each snippet of docs/api/index.md (and of docs/python-api.md) runs here for real — an environment
with ``async`` seed/verify registered by name, the client, ``run_evaluation`` into the default store, the
artifacts, a regression comparison from globs, and an environment served with ``generate_app`` then evaluated
over HTTP (``gym://``)."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from nel_helpers import free_port

from workbench.errors import UsageError
from workbench.mock.process import MockHandle

SECRET = "sk-python-api-test-0123456789"


# ---- docs/api/index.md, "EvalEnvironment" (its `...` filled in: five GSM8K problems, the last number scored)
from workbench.environments import EvalEnvironment, SeedResult, VerifyResult, register  # noqa: E402


@register("my_benchmark")
class MyBenchmark(EvalEnvironment):
    def __init__(self):
        super().__init__()
        from workbench import get_environment

        gsm8k = get_environment("gsm8k")
        self._dataset = [{"question": s.prompt, "answer": s.expected_answer} for s in map(gsm8k.seed, range(5))]

    def __len__(self) -> int:
        return len(self._dataset)

    async def seed(self, idx: int) -> SeedResult:  # type: ignore[override]  # run as a plain call
        row = self._dataset[idx]
        return SeedResult(prompt=row["question"], expected_answer=row["answer"], metadata={"category": "math"})

    async def verify(self, response: str, expected: str, **metadata) -> VerifyResult:  # type: ignore[override]
        numbers = re.findall(r"-?\d+(?:\.\d+)?", response.replace(",", ""))
        extracted = numbers[-1] if numbers else None
        return VerifyResult(reward=float(extracted is not None and float(extracted) == float(expected)),
                            extracted_answer=extracted, scoring_details={"method": "last_number"})


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A working directory of its own, with no $NEL_STORE: the default store is ./nel-results/nel.duckdb."""
    path = tmp_path_factory.mktemp("python-api")
    before, env_store = Path.cwd(), os.environ.pop("NEL_STORE", None)
    os.chdir(path)
    yield path
    os.chdir(before)
    if env_store is not None:
        os.environ["NEL_STORE"] = env_store


@pytest.fixture(scope="module")
def session(mock: MockHandle, workdir: Path) -> dict[str, Any]:
    """Every snippet of the reference, in order, in one event loop; what they returned."""
    # ---- "ModelClient" ----
    from workbench import ModelClient

    async def snippets() -> dict[str, Any]:
        client = ModelClient(
            base_url=mock.base_url,
            model="mock-model",
            api_key=SECRET,
            max_concurrent=16,
        )
        response = await client.chat("What is 2+2?", system="Answer briefly.")

        # ---- "run_evaluation()" with the environment registered above, and "write_all()" ----
        from workbench import get_environment, run_evaluation, write_all
        from workbench.solvers import ChatSolver

        env = get_environment("my_benchmark")
        solver = ChatSolver(client)
        bundle = await run_evaluation(env, solver, n_repeats=4, config={"experiment": "snippets"})
        write_all(bundle, "./eval_results")

        # ---- "compare_runs()": a baseline and a candidate, each exported to its own directory ----
        gsm8k = get_environment("gsm8k")
        write_all(await run_evaluation(gsm8k, ChatSolver(client), n_repeats=2, max_problems=10), "baseline")
        write_all(await run_evaluation(gsm8k, ChatSolver(client, system_prompt="Think step by step."),
                                       n_repeats=2, max_problems=10), "candidate")
        from workbench import compare_runs, write_regression

        report = compare_runs("baseline/eval-*.json", "candidate/eval-*.json")
        write_regression(report, "regression.json")

        # ---- "generate_app()" serving gsm8k, then "GymEnvironment"'s snippet: evaluated over HTTP ----
        from workbench import generate_app

        app = generate_app(gsm8k, gym_compat=True)
        with serving(app) as port:
            env = get_environment(f"gym://127.0.0.1:{port}")
            solver = ChatSolver(client)
            served = await run_evaluation(env, solver, n_repeats=4, max_problems=5)
        await client.close()
        return {"response": response, "bundle": bundle, "report": report, "served": served, "client": client}

    return asyncio.run(snippets())


class serving:
    """``uvicorn.run(app, port=…)``, in a thread, stopped at the end of the block."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> int:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, "the app did not start"
            time.sleep(0.02)
        return self.port

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)


class TestModelClient:
    def test_chat_answers_with_the_seeds_response_fields(self, session: dict[str, Any]) -> None:
        r = session["response"]
        assert r.content and r.model == "mock-model" and r.finish_reason == "stop"
        assert r.prompt_tokens > 0 and r.completion_tokens > 0
        assert r.total_tokens == r.prompt_tokens + r.completion_tokens
        assert r.latency_ms > 0 and r.raw_response["choices"][0]["message"]["content"] == r.content

    def test_the_key_is_never_shown(self, session: dict[str, Any]) -> None:
        assert SECRET not in repr(session["client"]) and SECRET not in repr(session["client"].config)


class TestRunEvaluation:
    def test_an_async_registered_environment_runs_into_the_default_store(self, session: dict[str, Any],
                                                                        workdir: Path) -> None:
        b = session["bundle"]
        assert (b["benchmark"], b["status"], b["n_tasks"], b["n_repeats"], b["n_steps"]) == (
            "my_benchmark", "complete", 5, 4, 20)
        assert Path(b["store"]) == Path("nel-results/nel.duckdb") and (workdir / b["store"]).exists()
        assert 0.0 <= b["pass_at_k"]["1"]["value"] <= 1.0 and b["pass_at_k"]["1"]["low"] is not None
        assert b["config"]["run"]["user"] == {"experiment": "snippets"}

    def test_each_step_keeps_the_seeds_metadata_and_the_verdict_of_the_async_verify(
            self, workdir: Path, session: dict[str, Any]) -> None:
        rows = [orjson.loads(line) for line in (workdir / "eval_results" / "results.jsonl").read_bytes().splitlines()]
        assert len(rows) == 20 and {r["repeat"] for r in rows} == {0, 1, 2, 3}
        assert all(r["metadata"] == {"category": "math"} for r in rows)
        assert all(r["scoring_details"] == {"method": "last_number"} for r in rows)
        assert all(r["reward"] == float(r["extracted_answer"] == r["expected_answer"]) for r in rows)
        responses_per_task = {i: {r["model_response"] for r in rows if r["problem_idx"] == i} for i in range(5)}
        assert any(len(answers) > 1 for answers in responses_per_task.values())  # repeats are samples, not copies

    def test_write_all_writes_the_seeds_artifacts(self, workdir: Path, session: dict[str, Any]) -> None:
        names = {p.name for p in (workdir / "eval_results").iterdir()}
        assert {"results.jsonl", "trajectories.jsonl", "runtime_stats.json", "failure_analysis.json",
                f"eval-{session['bundle']['run_id']}.json"} <= names

    def test_no_file_holds_the_api_key(self, workdir: Path, session: dict[str, Any]) -> None:
        leaks = [p for p in workdir.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
        assert leaks == []


class TestCompareRuns:
    def test_globs_name_the_two_bundles_and_tasks_pair(self, session: dict[str, Any]) -> None:
        report = session["report"]
        assert report.coverage.n_paired == 10 and report.verdict in {"PASS", "WARN", "BLOCK", "INCONCLUSIVE"}

    def test_write_regression_writes_the_comparison(self, workdir: Path, session: dict[str, Any]) -> None:
        data = orjson.loads((workdir / "regression.json").read_bytes())
        assert data["verdict"] == session["report"].verdict and data["coverage"]["n_paired"] == 10

    def test_a_glob_that_matches_nothing_is_one_line(self, workdir: Path) -> None:
        from workbench import compare_runs

        with pytest.raises(UsageError, match=r"^nothing/eval-\*\.json: no file matches$"):
            compare_runs("nothing/eval-*.json", "candidate/eval-*.json")


class TestGenerateApp:
    def test_a_served_environment_evaluates_over_http_with_the_native_task_ids(self, session: dict[str, Any]) -> None:
        from workbench import get_environment, open_store

        served = session["served"]
        assert (served["status"], served["n_steps"]) == ("complete", 20)
        stored = open_store(served["store"]).rows("SELECT DISTINCT task_id FROM steps WHERE run_id = ?",
                                                  [served["run_id"]])
        native = get_environment("gsm8k")
        assert {r[0] for r in stored} == {native.seed(i).task_id for i in range(5)}

    def test_without_the_serve_extra_it_says_what_to_install(self) -> None:
        code = ("import sys; sys.modules['fastapi'] = None\n"
                "from workbench import generate_app\n"
                "from workbench.extras import MissingExtra\n"
                "try:\n    generate_app('gsm8k')\nexcept MissingExtra as exc:\n    print(exc)\n")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
        assert "pip install 'nel-workbench[serve]'" in out.stdout and len(out.stdout.strip().splitlines()) == 1


def test_every_documented_name_imports_from_workbench_and_the_cli_imports_none_of_them() -> None:
    import workbench

    names = ("benchmark", "scorer", "ScorerInput", "answer_line", "EvalEnvironment", "SeedResult", "VerifyResult",
             "register", "get_environment", "ModelClient", "run_evaluation", "write_all", "compare_runs",
             "write_regression", "generate_app")
    assert all(getattr(workbench, n) is not None for n in names)
    from workbench.solvers import ChatSolver  # noqa: F401

    code = ("import sys\nfrom workbench.cli import build_parser\nbuild_parser()\n"
            "print(sorted(m for m in sys.modules if m.startswith(('workbench.api', 'workbench.engine', 'fastapi'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"
