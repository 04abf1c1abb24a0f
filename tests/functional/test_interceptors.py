"""`nel eval run` with a service's interceptors, against the real mock model: a cached re-run makes no model
request and gives the same steps; two runs share one cache at once; --no-cache asks the model again; a user's own
interceptor, named by a dotted path, changes what the model is sent."""

from __future__ import annotations

import json
import statistics
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from nel_helpers import NEL, assert_ok, clean_env, nel
from recording_model import recording_model, url_of

from workbench.mock import MockHandle
from workbench.store import open_store

PROBLEMS, REPEATS = 25, 2
STEPS = PROBLEMS * REPEATS
ANSWER_COLUMNS = ("response", "reasoning", "finish_reason", "tool_calls", "reward", "passed", "extracted_answer",
                  "failure_category", "prompt_tokens", "completion_tokens", "total_tokens", "response_id",
                  "request_hash")


def served(mock: MockHandle) -> int:
    """Chat completions the mock has answered: its response ids count up from 1, so a probe reads the counter."""
    reply = httpx.post(f"{mock.base_url}/chat/completions", timeout=10,
                       json={"model": "nel-mock", "messages": [{"role": "user", "content": "counter probe"}]}).json()
    return int(reply["id"][-16:], 16) - 1


def write_config(path: Path, url: str, out: str, interceptors: str, problems: int = PROBLEMS) -> Path:
    path.write_text(f"""services:
  main:
    type: api
    url: {url}
    model: nel-mock
    interceptors:
{interceptors}benchmarks:
  - name: gsm8k
    max_problems: {problems}
    repeats: {REPEATS}
    max_concurrent: 8
output:
  dir: {out}
""")
    return path


def summary_of(out: Path) -> dict[str, Any]:
    (path,) = out.glob("runs/*/summary.json")
    data: dict[str, Any] = json.loads(path.read_text())
    path.rename(path.with_name("summary.seen.json"))  # the next run's is the only summary.json
    return data


def steps_of(store: Path, run_id: str) -> dict[tuple[int, int], dict[str, Any]]:
    rows = open_store(store).dicts(f"SELECT task_idx, repeat, scoring_details, model_ms, {', '.join(ANSWER_COLUMNS)} "
                                   "FROM steps WHERE run_id = ?", [run_id])
    return {(r["task_idx"], r["repeat"]): r for r in rows}


CACHE = "      - name: cache\n"


class TestCachedReRun:
    """The cache answers a repeated run in full."""

    def test_a_second_run_asks_the_model_nothing_and_stores_the_same_steps(self, mock: MockHandle,
                                                                         tmp_path: Path) -> None:
        config = write_config(tmp_path / "c.yaml", mock.base_url, "out", CACHE)
        assert_ok(nel("eval", "run", str(config), "--no-progress", cwd=tmp_path))
        first = summary_of(tmp_path / "out")
        before = served(mock)
        second_proc = nel("eval", "run", str(config), "--no-progress", cwd=tmp_path)
        assert_ok(second_proc)
        assert served(mock) == before + 1  # the probe alone: the run made no model request
        second = summary_of(tmp_path / "out")
        assert first["cache"]["misses"] == STEPS and first["cache"]["hits"] == 0
        assert second["cache"] == {"hits": STEPS, "misses": 0, "enabled": True,
                                   "path": str(tmp_path / "out" / "nel-cache.duckdb")}
        assert f"cache    {STEPS} hits, 0 misses" in second_proc.stdout
        store = tmp_path / "out" / "nel.duckdb"
        a, b = steps_of(store, first["run_id"]), steps_of(store, second["run_id"])
        assert len(a) == len(b) == STEPS
        for key, row in a.items():
            assert {c: row[c] for c in ANSWER_COLUMNS} == {c: b[key][c] for c in ANSWER_COLUMNS}, key
            assert json.loads(row["scoring_details"])["cache"] == "miss"
            assert json.loads(b[key]["scoring_details"])["cache"] == "hit"
        assert statistics.median(r["model_ms"] for r in b.values()) < 5.0  # a dictionary read, not a request
        assert second["pass_at_k"] == first["pass_at_k"]

    def test_no_cache_asks_the_model_again_and_says_so(self, mock: MockHandle, tmp_path: Path) -> None:
        config = write_config(tmp_path / "c.yaml", mock.base_url, "out", CACHE, problems=5)
        assert_ok(nel("eval", "run", str(config), "--no-progress", cwd=tmp_path))
        summary_of(tmp_path / "out")
        before = served(mock)
        proc = nel("eval", "run", str(config), "--no-progress", "--no-cache", cwd=tmp_path)
        assert_ok(proc)
        assert served(mock) == before + 1 + 5 * REPEATS
        assert summary_of(tmp_path / "out")["cache"]["enabled"] is False
        assert "cache    off this run" in proc.stdout
        proc = nel("eval", "run", str(config), "--no-progress", cwd=tmp_path,
                   env=clean_env(NEL_NO_CACHE="1"))
        assert_ok(proc)
        assert served(mock) == before + 2 + 2 * 5 * REPEATS


def test_a_cached_re_run_needs_no_model_and_without_the_cache_the_run_stops_at_once(tmp_path: Path) -> None:
    """The model is gone (its server stopped): the cache answers every request, the run says why it went on; with
    --no-cache the same run stops before its first step, naming the URL."""
    from workbench.mock import mock_model

    with mock_model() as gone:
        config = write_config(tmp_path / "c.yaml", gone.base_url, "out", CACHE, problems=5)
        assert_ok(nel("eval", "run", str(config), "--no-progress", cwd=tmp_path))
    summary_of(tmp_path / "out")
    proc = nel("eval", "run", str(config), "--no-progress", cwd=tmp_path)
    assert_ok(proc)
    assert "nel: warning: cannot reach the model at" in proc.stderr and "answering from the cache" in proc.stderr
    assert f"holds {5 * REPEATS} answers" in proc.stderr
    assert summary_of(tmp_path / "out")["cache"] == {"hits": 5 * REPEATS, "misses": 0, "enabled": True,
                                                     "path": str(tmp_path / "out" / "nel-cache.duckdb")}
    proc = nel("eval", "run", str(config), "--no-progress", "--no-cache", cwd=tmp_path)
    assert proc.returncode == 1 and "cannot reach the model at" in proc.stderr and "warning" not in proc.stderr


def test_two_runs_at_once_share_one_cache(mock: MockHandle, tmp_path: Path) -> None:
    """Both read the file, both write their batches (one waits for the other's lock), and a third run finds
    every answer either learnt."""
    shared = f"      - name: cache\n        config: {{path: {tmp_path / 'shared.duckdb'}}}\n"
    seed = write_config(tmp_path / "seed.yaml", mock.base_url, "seed", shared, problems=5)
    assert_ok(nel("eval", "run", str(seed), "--no-progress", cwd=tmp_path))  # the file exists when both start
    procs = [subprocess.Popen([NEL, "eval", "run", str(write_config(tmp_path / f"{name}.yaml", mock.base_url, name,
                                                                     shared)), "--no-progress"],
                              cwd=tmp_path, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, stdin=subprocess.DEVNULL) for name in ("a", "b")]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, f"{out}\n{err}"
    counts = [summary_of(tmp_path / name)["cache"] for name in ("a", "b")]
    assert all(c["hits"] >= 5 * REPEATS and c["hits"] + c["misses"] == STEPS for c in counts)
    before = served(mock)
    third = write_config(tmp_path / "c.yaml", mock.base_url, "c", shared)
    assert_ok(nel("eval", "run", str(third), "--no-progress", cwd=tmp_path))
    assert served(mock) == before + 1
    assert summary_of(tmp_path / "c")["cache"]["hits"] == STEPS


def test_a_users_interceptor_named_by_a_dotted_path_changes_the_request(tmp_path: Path) -> None:
    (tmp_path / "house_rules.py").write_text('''
class TopK:
    """Sends every request with the server's own top_k."""

    name = "top_k"

    def __init__(self, config, context):
        if not isinstance(config.get("k"), int):
            raise ValueError("k: expected a whole number")
        self.k = config["k"]

    async def before(self, call):
        body = call.json()
        body["top_k"] = self.k
        call.set_json(body)

    async def after(self, call, response):
        pass

    def close(self):
        pass
''')
    with recording_model() as server:
        config = write_config(tmp_path / "c.yaml", url_of(server), "out",
                              "      - name: house_rules:TopK\n        config: {k: 7}\n", problems=3)
        proc = nel("eval", "run", str(config), "--no-progress", cwd=tmp_path,
                   env=clean_env(PYTHONPATH=f"{tmp_path}:{clean_env().get('PYTHONPATH', '')}"))
        assert_ok(proc)
        assert len(server.bodies) == 3 * REPEATS and all(body["top_k"] == 7 for body in server.bodies)
    bad = write_config(tmp_path / "bad.yaml", "http://127.0.0.1:9/v1", "out",
                       "      - name: house_rules:TopK\n        config: {k: seven}\n", problems=3)
    proc = nel("eval", "run", str(bad), "--no-progress", cwd=tmp_path,
               env=clean_env(PYTHONPATH=f"{tmp_path}:{clean_env().get('PYTHONPATH', '')}"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].endswith(
        "services.main.interceptors.0.config.k: expected a whole number"), proc.stderr


@pytest.mark.parametrize("entry", ["      - name: nosuch.module:Thing\n"])
def test_an_interceptor_that_cannot_be_imported_is_one_line_and_exit_2(tmp_path: Path, entry: str) -> None:
    config = write_config(tmp_path / "c.yaml", "http://127.0.0.1:9/v1", "out", entry)
    proc = nel("eval", "run", str(config), "--no-progress", cwd=tmp_path)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "c.yaml:" in proc.stderr and "services.main.interceptors.0.name: cannot import 'nosuch.module'" in \
        proc.stderr


def test_turn_counter_ends_a_tool_calling_attempt_before_the_solvers_own_limit(tmp_path: Path) -> None:
    """An agent that needs four model calls, under `turn_counter` max_turns 2 and the solver's own max_turns 10:
    the third call is never sent, and the attempt ends as max_turns_exhausted after two tool calls."""
    import asyncio

    from workbench.environments import get_environment
    from workbench.environments.file_tasks import SANDBOX_TOOL_ARGUMENTS
    from workbench.mock import mock_model
    from workbench.mock.skill import SkillProfile
    from workbench.model.config import ModelConfig
    from workbench.model.interceptors import InterceptorContext, attempt_scope, build_chain
    from workbench.solvers.tool_calling import ToolCallingSettings, ToolCallingSolver
    from workbench.solvers.tools import ToolOutcome, ToolSpec

    env, idx = get_environment("file_tasks"), 9  # settings.ini: read, then two edits, then done: four model calls
    attempt = next(a for a in range(500) if SkillProfile(0).attempt(f"file_tasks:{env.seed(idx).task_id}", None,
                                                                    a).correct)
    calls: list[str] = []

    class Tools:
        specs = tuple(ToolSpec(name, f"the {name} tool") for name in SANDBOX_TOOL_ARGUMENTS)

        async def call(self, name: str, arguments: dict[str, Any], *, timeout: float) -> ToolOutcome:
            calls.append(name)
            return ToolOutcome("ok", exit_code=0 if name == "bash" else None)

    class Context:
        tools = Tools()

    with mock_model(latency_ms=0, benchmarks=("file_tasks",)) as mock:
        chain = build_chain([("turn_counter", {"max_turns": 2})], InterceptorContext(tmp_path, tmp_path))
        solver = ToolCallingSolver(ModelConfig(url=mock.base_url, model_id="nel-mock", max_retries=0,
                                               interceptors=chain), ToolCallingSettings(max_turns=10))

        async def go() -> Any:
            async with solver.worker() as worker:
                with attempt_scope(env.seed(idx).task_id, attempt):
                    return await worker.solve(env.seed(idx), attempt, Context())

        before = served(mock)
        out = asyncio.run(go())
        assert served(mock) == before + 1 + 2  # the probes, and two model calls
    assert out.model.failure == "max_turns_exhausted" and "turn_counter allows 2" in out.model.error
    assert len(calls) == 2 and len(out.turns) == 3


def test_a_sharded_re_run_prints_the_cache_counts_of_all_its_shards(mock: MockHandle, tmp_path: Path) -> None:
    """Each shard worker has the cache to itself; the merged run's summary adds their hits and misses up (from the
    marks its steps keep), so a cached sharded re-run says it asked the model nothing."""
    config = write_config(tmp_path / "c.yaml", mock.base_url, "out", CACHE, problems=10)
    first = nel("eval", "run", str(config), "--shards", "2", "--no-progress", cwd=tmp_path)
    assert_ok(first)
    assert "cache    0 hits, 20 misses (all shards)" in first.stdout, first.stdout
    before = served(mock)
    second = nel("eval", "run", str(config), "--shards", "2", "-O", "benchmarks.0.run_id=again", "--no-progress",
                 cwd=tmp_path)
    assert_ok(second)
    assert served(mock) == before + 1
    assert "cache    20 hits, 0 misses (all shards)" in second.stdout, second.stdout
