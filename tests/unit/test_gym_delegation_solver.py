"""`solver.type: gym_delegation`: finding the agent by name, the config's checks, what an attempt's verdict keeps,
and how an agent that is down, errs or is too slow is recorded (real HTTP servers on 127.0.0.1, in-process)."""

from __future__ import annotations

import asyncio
import json
import socket
import textwrap
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from workbench.cli.render import render_agreement
from workbench.environments import get_environment
from workbench.errors import RunFailed, UsageError
from workbench.gym.agents import GymAgent, agents_of, find_agent, pick_agent
from workbench.gym.delegation import DelegatedAttempt, DelegatedEnvironment, DelegationSettings, GymDelegationSolver
from workbench.model.config import ModelConfig
from workbench.spec import load_config

GYM_CONFIG = {
    "head_server": {"host": "127.0.0.1", "port": 11000},
    "policy_model": {"responses_api_models": {"vllm_model": {"host": "127.0.0.1", "port": 9101}}},
    "math": {"resources_servers": {"math_with_judge": {"host": "127.0.0.1", "port": 9102}}},
    "nel_agent": {"responses_api_agents": {"simple_agent": {"host": "127.0.0.1", "port": 9103}}},
    "coder": {"responses_api_agents": {"swe_agent": {"host": "10.0.0.2", "port": 9104}}},
}


class TestFindingTheAgent:
    """Gym's head server names every server; an agent is found by instance name, else by what it runs."""

    def test_only_agent_servers_are_agents(self) -> None:
        assert agents_of(GYM_CONFIG) == [GymAgent("nel_agent", "simple_agent", "http://127.0.0.1:9103"),
                                         GymAgent("coder", "swe_agent", "http://10.0.0.2:9104")]

    def test_by_instance_name_or_by_the_one_instance_of_an_implementation(self) -> None:
        agents = agents_of(GYM_CONFIG)
        assert pick_agent(agents, "coder", "x").url == "http://10.0.0.2:9104"
        assert pick_agent(agents, "simple_agent", "x").name == "nel_agent"

    def test_a_wrong_name_lists_the_agents_there(self) -> None:
        with pytest.raises(UsageError, match=r"^solver.gym_agent: the Gym deployment has no agent 'nope'; "
                                             r"its agents: nel_agent \(simple_agent\), coder \(swe_agent\)$"):
            pick_agent(agents_of(GYM_CONFIG), "nope", "solver.gym_agent")

    def test_no_name_takes_the_only_agent_and_refuses_a_choice(self) -> None:
        only = [GymAgent("a", "simple_agent", "http://h:1")]
        assert pick_agent(only, None, "x") is only[0]
        with pytest.raises(UsageError, match="name the agent to run"):
            pick_agent(agents_of(GYM_CONFIG), None, "x")

    def test_two_instances_of_one_implementation_must_be_named(self) -> None:
        two = [GymAgent("a", "simple_agent", "http://h:1"), GymAgent("b", "simple_agent", "http://h:2")]
        with pytest.raises(UsageError, match="2 agents run 'simple_agent'; name one: a, b"):
            pick_agent(two, "simple_agent", "x")


@pytest.fixture
def http_server() -> Iterator[Any]:
    """A real HTTP server on 127.0.0.1 whose answers a test sets: ``server.reply = (status, body, delay_s)``."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            status, body, delay = server.reply
            with server.lock:
                server.hits += 1
                server.in_flight += 1
                server.most = max(server.most, server.in_flight)
            length = int(self.headers.get("Content-Length") or 0)
            server.sent = json.loads(self.rfile.read(length)) if length else None
            if delay:
                time.sleep(delay)
            with server.lock:
                server.in_flight -= 1
            data = json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting (the timeout test)
                pass

        do_GET = do_POST = _answer

        def log_message(self, *args: Any) -> None:
            pass

    server: Any = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.reply, server.hits, server.in_flight, server.most, server.lock = (200, {}, 0.0), 0, 0, 0, threading.Lock()
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class TestTheHeadServer:
    def test_its_config_comes_as_gym_serves_it_a_json_string_of_yaml(self, http_server: Any) -> None:
        import yaml

        http_server.reply = (200, yaml.safe_dump(GYM_CONFIG), 0.0)
        assert find_agent(http_server.url, "coder", "x").url == "http://10.0.0.2:9104"

    def test_a_server_that_is_not_a_head_server_is_a_usage_error(self, http_server: Any) -> None:
        http_server.reply = (404, {"detail": "Not Found"}, 0.0)
        with pytest.raises(UsageError, match="not a NeMo Gym head server"):
            find_agent(http_server.url, "coder", "x")

    def test_an_unreachable_head_server_names_its_address(self) -> None:
        url = f"http://127.0.0.1:{_free_port()}"
        with pytest.raises(RunFailed, match=f"cannot reach Gym's head server at {url}"):
            find_agent(url, "coder", "x")


def _delegation(url: str, **kw: Any) -> tuple[DelegatedEnvironment, GymDelegationSolver]:
    settings = DelegationSettings(GymAgent("a", "simple_agent", url), **kw)
    model = ModelConfig(url="http://127.0.0.1:1/v1", model_id="m", temperature=0.5)
    return DelegatedEnvironment(get_environment("gsm8k"), settings), GymDelegationSolver(model, settings)


def _attempt(env: DelegatedEnvironment, idx: int = 0) -> tuple[Any, DelegatedAttempt]:
    async def go() -> tuple[Any, DelegatedAttempt]:
        seed = env.seed(idx)
        async with env.attempt_worker() as opener:
            return seed, await opener.begin(seed, 1)

    return asyncio.run(go())


def _solve(env: DelegatedEnvironment, solver: GymDelegationSolver) -> tuple[Any, DelegatedAttempt]:
    async def go() -> tuple[Any, DelegatedAttempt]:
        seed = env.seed(0)
        async with env.attempt_worker() as opener, solver.worker() as worker:
            attempt = await opener.begin(seed, 1)
            return await worker.solve(seed, 1, attempt), attempt

    return asyncio.run(go())


class TestAnAttempt:
    """The agent is sent the benchmark's problem as a Gym row; its answer and transcript become the step."""

    def test_the_row_is_the_exported_one_numbered_as_gyms_collection_numbers_it(self) -> None:
        env, _ = _delegation("http://h:1")
        seed, attempt = _attempt(env, 3)
        assert attempt.row["task_id"] == seed.task_id and attempt.row["question"] == seed.prompt
        assert (attempt.row["_ng_task_index"], attempt.row["_ng_rollout_index"]) == (3, 1)
        assert attempt.row["responses_create_params"]["input"] == [dict(m) for m in seed.messages]

    def test_the_agents_response_and_transcript_are_kept(self, http_server: Any) -> None:
        env, solver = _delegation(http_server.url)
        response = {"id": "resp_1", "output": [
            {"type": "function_call", "call_id": "c1", "name": "calc", "arguments": "{\"x\": 1}"},
            {"type": "function_call_output", "call_id": "c1", "output": "18"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "The answer is: 18"}]},
        ], "usage": {"input_tokens": 40, "output_tokens": 9, "total_tokens": 49}}
        http_server.reply = (200, {"reward": 1.0, "response": response, "library_reward": 1.0}, 0.0)
        out, attempt = _solve(env, solver)
        assert out.response == "The answer is: 18" and out.model.failure is None
        assert [m["role"] for m in out.messages] == ["user", "assistant", "tool"]
        assert out.messages[1]["tool_calls"][0]["function"]["name"] == "calc"
        assert (out.model.prompt_tokens, out.model.completion_tokens, out.model.response_id) == (40, 9, "resp_1")
        assert attempt.result is not None and attempt.result["library_reward"] == 1.0
        assert http_server.sent["responses_create_params"]["temperature"] == 0.5  # the run's sampling settings
        assert http_server.sent["task_id"] == env.seed(0).task_id

    def test_nels_verdict_keeps_gyms_reward_and_says_when_they_disagree(self) -> None:
        env, _ = _delegation("http://h:1")
        seed, attempt = _attempt(env)
        attempt.result = {"reward": 0.0, "library_reward": 0.0, "response": {}, "api_key": "sk-secret"}
        verdict = asyncio.run(attempt.verify(f"The answer is: {seed.expected_answer}", None))  # type: ignore[arg-type]
        assert verdict.reward == 1.0
        assert verdict.scoring_details["gym_reward"] == 0.0 and verdict.scoring_details["rewards_disagree"] is True
        assert verdict.scoring_details["gym"] == {"reward": 0.0, "library_reward": 0.0}  # no echo, no secret

    def test_trust_reward_takes_gyms_verdict(self) -> None:
        env, _ = _delegation("http://h:1", trust_reward=True)
        seed, attempt = _attempt(env)
        attempt.result = {"reward": 0.0, "extracted_answer": "17", "response": {}}
        verdict = asyncio.run(attempt.verify(f"The answer is: {seed.expected_answer}", None))  # type: ignore[arg-type]
        assert (verdict.reward, verdict.extracted_answer, verdict.scoring_details["method"]) == (0.0, "17", "gym")


@pytest.mark.parametrize(("limit", "most"), [(1, 1), (None, 3)])
def test_max_concurrent_bounds_the_runs_in_flight_across_workers(http_server: Any, limit: int | None,
                                                                 most: int) -> None:
    http_server.reply = (200, {"reward": 1.0, "response": {}}, 0.2)
    env, solver = _delegation(http_server.url, max_concurrent=limit)

    async def one() -> None:
        seed = env.seed(0)
        async with env.attempt_worker() as opener, solver.worker() as worker:
            await worker.solve(seed, 0, await opener.begin(seed, 0))

    async def three() -> None:
        await asyncio.gather(one(), one(), one())

    asyncio.run(three())
    assert (http_server.hits, http_server.most) == (3, most)


class TestAnAgentThatFails:
    """Down, 5xx, too slow: the attempt's failure category, after the retries; a 4xx is not retried."""

    def test_down_is_a_server_error_after_every_retry(self) -> None:
        env, solver = _delegation(f"http://127.0.0.1:{_free_port()}", max_retries=1)
        out, attempt = _solve(env, solver)
        assert (out.model.failure, out.model.n_retries) == ("server_error", 1)
        assert "cannot reach the Gym agent at" in (out.model.error or "") and attempt.result is None

    def test_a_5xx_is_retried_then_a_server_error(self, http_server: Any) -> None:
        http_server.reply = (503, {"detail": "overloaded"}, 0.0)
        env, solver = _delegation(http_server.url, max_retries=1)
        out, _ = _solve(env, solver)
        assert (out.model.failure, out.model.http_status, http_server.hits) == ("server_error", 503, 2)
        assert "overloaded" in (out.model.error or "")

    def test_a_4xx_is_the_agents_refusal_and_not_retried(self, http_server: Any) -> None:
        http_server.reply = (422, {"detail": "question: Field required"}, 0.0)
        env, solver = _delegation(http_server.url, max_retries=3)
        out, _ = _solve(env, solver)
        assert (out.model.failure, http_server.hits) == ("model_error", 1)

    def test_too_slow_is_a_timeout(self, http_server: Any) -> None:
        http_server.reply = (200, {"reward": 1.0}, 1.0)
        env, solver = _delegation(http_server.url, timeout=0.2, max_retries=0)
        out, _ = _solve(env, solver)
        assert out.model.failure == "timeout" and "did not answer within 0.2 s" in (out.model.error or "")


CONFIG = """\
services:
  model: {type: api, url: "http://127.0.0.1:8000/v1", model: m}
  agent: {type: gym, url: "http://127.0.0.1:11000"}
  tools: {type: resources, url: "http://127.0.0.1:9000"}
benchmarks:
  - name: gsm8k
    solver: {type: gym_delegation, service: model, gym_service: agent, gym_agent: simple_agent, timeout: 900}
"""


class TestTheConfig:
    def test_nemo_evaluators_spelling_is_read(self, tmp_path: Path) -> None:
        (tmp_path / "c.yaml").write_text(CONFIG)
        spec, _ = load_config(tmp_path / "c.yaml")
        solver = spec.benchmarks[0].solver
        assert (solver.type, solver.gym_agent, solver.trust_reward, solver.timeout) == (
            "gym_delegation", "simple_agent", False, 900)
        assert spec.benchmarks[0].service == "model"

    @pytest.mark.parametrize(("old", "new", "where", "what"), [
        ("gym_service: agent", "gym_service: nope", "benchmarks.0.solver.gym_service", "no service named 'nope'"),
        ("gym_service: agent", "gym_service: tools", "benchmarks.0.solver.gym_service", "not a Gym deployment"),
        ("timeout: 900", "timeout: 900, turns: 3", "benchmarks.0.solver.turns", "unknown key"),
        ("timeout: 900}", "timeout: 900}\n    scoring: {metrics: [{type: exact}]}", "benchmarks.0.scoring",
         "not with a gym_delegation solver"),
        ("name: gsm8k", "name: gym://127.0.0.1:9000", "benchmarks.0.name", "already served by Gym"),
        ("service: model, ", "", "benchmarks.0.solver", "service"),
        ("service: model, ", "service: agent, ", "benchmarks.0.solver.service", "'agent' is a Gym deployment"),
    ])
    def test_each_mistake_is_one_line_naming_file_line_and_key(self, tmp_path: Path, old: str, new: str,
                                                              where: str, what: str) -> None:
        assert old in CONFIG
        (tmp_path / "c.yaml").write_text(textwrap.dedent(CONFIG.replace(old, new)))
        with pytest.raises(UsageError) as refused:
            load_config(tmp_path / "c.yaml")
        message = str(refused.value)
        assert "c.yaml:" in message and where in message and what in message and "\n" not in message, message


def test_the_terminal_says_whose_rewards_and_how_often_they_disagreed() -> None:
    assert render_agreement({"reward": "nel", "gym_scored": 12, "compared": 12, "disagree": 3,
                             "disagreement_rate": 0.25}) == (
        "nel re-verified the Gym agent's answers: disagreement rate 25.0% (3 of 12 attempts)")
    assert render_agreement({"reward": "gym", "gym_scored": 12, "compared": 0, "disagree": 0,
                             "disagreement_rate": None}) == (
        "rewards are Gym's (trust_reward): 12 attempts scored by its /verify")
