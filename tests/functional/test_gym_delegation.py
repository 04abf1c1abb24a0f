"""`solver.type: gym_delegation`: NeMo Gym 0.7.0's own `simple_agent` runs each attempt; nel stores and re-verifies.

Real processes on loopback: nel's mock model, Gym's `vllm_model` server in front of it, Gym's `math_with_judge`
resources server (library verifier only: offline), the `simple_agent` agent server, and Gym's head server that
names them, all started once for the module. `math_with_judge` reads the last `\\boxed{}` while nel's gsm8k
scorer reads the final answer line, so the two rewards really differ on some of the mock's answers: the
disagreement rate nel prints is checked against the stored steps.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from gym_helpers import GYM_PYTHON, GYM_SITE, NOT_INSTALLED, _wait_healthy, gym_servers
from nel_helpers import assert_ok, assert_one_line_error, free_port, nel, stop

from workbench.environments import get_environment
from workbench.mock.process import mock_model
from workbench.serve.process import serve_process
from workbench.store import open_store

pytestmark = [pytest.mark.timeout(300), pytest.mark.skipif(not GYM_PYTHON.exists(), reason=NOT_INSTALLED)]

PROBLEMS, REPEATS = 6, 2
GYM_CONFIG = """\
dry_run: false
head_server: {{host: 127.0.0.1, port: {head}}}
policy_model:
  responses_api_models:
    vllm_model:
      entrypoint: app.py
      host: 127.0.0.1
      port: {model}
      base_url: {mock}
      api_key: none
      model: nel-mock
      return_token_id_information: false
      uses_reasoning_parser: false
math_with_judge:
  resources_servers:
    math_with_judge:
      entrypoint: app.py
      host: 127.0.0.1
      port: {resources}
      judge_model_server: {{type: responses_api_models, name: policy_model}}
      judge_responses_create_params: {{input: []}}
      should_use_judge: false
simple_agent:
  responses_api_agents:
    simple_agent:
      entrypoint: app.py
      host: 127.0.0.1
      port: {agent}
      resources_server: {{type: resources_servers, name: math_with_judge}}
      model_server: {{type: responses_api_models, name: policy_model}}
nel_gsm8k:
  resources_servers:
    nel_gsm8k:
      entrypoint: app.py
      host: 127.0.0.1
      port: {nel_serve}
nel_scored_agent:
  responses_api_agents:
    simple_agent:
      entrypoint: app.py
      host: 127.0.0.1
      port: {nel_agent}
      resources_server: {{type: resources_servers, name: nel_gsm8k}}
      model_server: {{type: responses_api_models, name: policy_model}}
"""
HEAD = ("from nemo_gym.server_utils import HeadServer\n"
        "_, thread, head = HeadServer.run_webserver()\nhead.mark_ready()\nthread.join()\n")


@dataclass(frozen=True)
class Gym:
    head_url: str
    mock_url: str
    work: Path


@pytest.fixture(scope="module")
def gym(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gym]:
    work = tmp_path_factory.mktemp("gym-delegation")
    ports = {name: free_port() for name in ("head", "model", "resources", "agent", "nel_agent")}
    with mock_model() as mock, serve_process(["-b", "gsm8k", "--gym-compat", "--port", "0"]) as served:
        config = GYM_CONFIG.format(mock=mock.base_url, nel_serve=served.url.rsplit(":", 1)[1], **ports)
        servers = {"policy_model": ("responses_api_models.vllm_model.app", ports["model"]),
                   "math_with_judge": ("resources_servers.math_with_judge.app", ports["resources"]),
                   "simple_agent": ("responses_api_agents.simple_agent.app", ports["agent"]),
                   "nel_scored_agent": ("responses_api_agents.simple_agent.app", ports["nel_agent"])}
        log = work / "head.log"
        with log.open("wb") as sink:  # Gym's head server, as `ng_run` starts it: it names the servers
            head = subprocess.Popen([str(GYM_PYTHON), "-c", HEAD], cwd=GYM_SITE, stdout=sink,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env={**os.environ, "NEMO_GYM_CONFIG_DICT": config})
        try:
            _wait_healthy(head, ports["head"], log, "Gym's head server", time.monotonic() + 60)
            with gym_servers(config, servers, work):
                yield Gym(f"http://127.0.0.1:{ports['head']}", mock.base_url, work)
        finally:
            stop(head)


def _config(gym: Gym, out: Path, **solver: Any) -> Path:
    spec = {
        "services": {"model": {"type": "api", "url": gym.mock_url, "model": "nel-mock"},
                     "gym": {"type": "gym", "url": gym.head_url}},
        "benchmarks": [{"name": "gsm8k", "max_problems": PROBLEMS, "repeats": REPEATS, "max_concurrent": 4,
                        "solver": {"type": "gym_delegation", "service": "model", "gym_service": "gym",
                                   "gym_agent": "simple_agent", **solver}}],
        "output": {"dir": str(out)},
    }
    path = out.with_suffix(".yaml")
    path.write_bytes(orjson.dumps(spec))  # JSON is YAML
    return path


def _steps(out: Path) -> list[dict[str, Any]]:
    return open_store(out / "nel.duckdb").dicts(
        "SELECT task_idx, repeat, task_id, reward, response, messages, scoring_method, scoring_details, "
        "failure_category, prompt_tokens, completion_tokens FROM steps ORDER BY task_idx, repeat")


@pytest.fixture(scope="module")
def reverified(gym: Gym) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    out = gym.work / "reverified"
    proc = nel("eval", "run", str(_config(gym, out)), "--no-progress", cwd=gym.work, timeout=240)
    return proc, (_steps(out) if proc.returncode == 0 else [])


def test_every_attempt_is_stored_with_the_agents_transcript(reverified) -> None:
    proc, steps = reverified
    assert_ok(proc)
    assert len(steps) == PROBLEMS * REPEATS
    env = get_environment("gsm8k")
    assert [s["task_id"] for s in steps[::REPEATS]] == [env.seed(i).task_id for i in range(PROBLEMS)]  # pairs
    for s in steps:
        messages = orjson.loads(s["messages"])
        assert messages[0]["role"] == "user" and "Janet" in orjson.loads(steps[0]["messages"])[0]["content"]
        assert s["response"] and s["prompt_tokens"] and s["completion_tokens"]
        assert s["failure_category"] in (None, "format_error")


def test_nels_scorer_decides_and_gyms_reward_is_kept_beside_it(reverified) -> None:
    proc, steps = reverified
    assert_ok(proc)
    env = get_environment("gsm8k")
    for s in steps:
        details = orjson.loads(s["scoring_details"])
        seed = env.seed(s["task_idx"])
        assert s["reward"] == env.verify(s["response"], seed.expected_answer, **seed.metadata).reward
        assert details["gym_reward"] in (0.0, 1.0) and "library_reward" in details["gym"]
        assert details["rewards_disagree"] == (details["gym_reward"] != s["reward"])
        assert "response" not in details["gym"] and "responses_create_params" not in details["gym"]
    assert 0 < sum(s["reward"] for s in steps) < len(steps)  # a sane pass rate: right and wrong answers


def test_the_disagreement_rate_is_printed_and_kept_as_the_steps_show_it(gym: Gym, reverified) -> None:
    proc, steps = reverified
    assert_ok(proc)
    disagree = sum(orjson.loads(s["scoring_details"])["rewards_disagree"] for s in steps)
    assert 0 < disagree < len(steps), "the check needs both agreeing and disagreeing verdicts"
    assert f"disagreement rate {disagree / len(steps):.1%} ({disagree} of {len(steps)} attempts)" in proc.stdout
    [summary] = (gym.work / "reverified" / "runs").glob("*/summary.json")
    assert orjson.loads(summary.read_bytes())["extra"]["gym_delegation"] == {
        "reward": "nel", "gym_scored": len(steps), "compared": len(steps), "disagree": disagree,
        "disagreement_rate": disagree / len(steps)}


def test_trust_reward_takes_gyms_verdict(gym: Gym) -> None:
    out = gym.work / "trusted"
    proc = nel("eval", "run", str(_config(gym, out, trust_reward=True)), "--no-progress", cwd=gym.work, timeout=240)
    assert_ok(proc)
    steps = _steps(out)
    assert len(steps) == PROBLEMS * REPEATS
    for s in steps:
        details = orjson.loads(s["scoring_details"])
        assert s["reward"] == details["gym_reward"] and s["scoring_method"] == "gym"
    assert "rewards are Gym's (trust_reward)" in proc.stdout


def test_an_agent_scored_by_nels_own_scorer_agrees_with_it_everywhere(gym: Gym) -> None:
    out = gym.work / "agreeing"
    proc = nel("eval", "run", str(_config(gym, out, gym_agent="nel_scored_agent")), "--no-progress", cwd=gym.work,
               timeout=240)
    assert_ok(proc)
    steps = _steps(out)
    assert len(steps) == PROBLEMS * REPEATS
    assert all(orjson.loads(s["scoring_details"])["gym_reward"] == s["reward"] for s in steps)
    assert f"disagreement rate 0.0% (0 of {len(steps)} attempts)" in proc.stdout, proc.stdout


def test_a_wrong_agent_name_is_one_line_before_the_run(gym: Gym) -> None:
    out = gym.work / "wrong"
    proc = nel("eval", "run", str(_config(gym, out, gym_agent="no_such_agent")), "--no-progress", cwd=gym.work)
    line = assert_one_line_error(proc, 2)
    assert "no agent 'no_such_agent'" in line and "simple_agent (simple_agent), nel_scored_agent (simple_agent)" in line
    assert not (out / "nel.duckdb").exists()
