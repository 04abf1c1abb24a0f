"""NeMo Gym 0.7.0's own client, end to end, against `nel serve --gym-compat` and the mock model.

The recipes of docs/gym.md are what runs here: the blocks marked ``<!-- e2e: … -->`` are read from the doc,
their ports replaced by free ones, and run in a shell with `nel` and `gym` on the PATH. The servers of the
doc's step 2 are started by the fixtures with the same modules and config.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from gym_helpers import GYM_BIN, GYM_PYTHON, NOT_INSTALLED, gym_cli, gym_servers, gyms_aggregate
from nel_helpers import ROOT, clean_env, free_port, nel

from workbench.mock.process import mock_model
from workbench.serve.process import serve_process

pytestmark = [pytest.mark.timeout(300), pytest.mark.skipif(not GYM_PYTHON.exists(), reason=NOT_INSTALLED)]

DOC = ROOT / "docs" / "gym.md"
PROBLEMS = 12
DOC_PORTS = re.compile(r"\b(8000|9090|910[0-6])\b")
GYM_MODULES = {
    "policy_model": ("responses_api_models.vllm_model.app", "9101"),
    "responses_model": ("responses_api_models.openai_model.app", "9104"),
    "nel_agent": ("responses_api_agents.simple_agent.app", "9102"),
    "nel_env": ("environment_servers.legacy_agent.app", "9103"),
    "nel_agent_responses": ("responses_api_agents.simple_agent.app", "9105"),
    "nel_env_responses": ("environment_servers.legacy_agent.app", "9106"),
}


def doc_block(marker: str) -> str:
    """The fenced block right after ``<!-- e2e: MARKER -->`` in docs/gym.md."""
    text = DOC.read_text()
    match = re.search(rf"<!-- e2e: {re.escape(marker)} -->\n```\w*\n(.*?)```", text, re.S)
    assert match, f"docs/gym.md has no block marked e2e: {marker}"
    return match.group(1)


@dataclass(frozen=True)
class Stack:
    work: Path
    env: dict[str, str]
    config: str
    ports: dict[str, int]

    def shell(self, script: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        """A recipe block, its doc ports replaced by the running servers' ones."""
        script = DOC_PORTS.sub(lambda m: str(self.ports[m[0]]), script)
        return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=self.work, env=self.env,
                              capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def _shims(folder: Path) -> Path:
    """`nel` (this checkout) and `gym` (.venv-gym) as commands, the way a user's shell has them."""
    folder.mkdir()
    (folder / "nel").write_text(f'#!/bin/sh\nPYTHONPATH="{ROOT}" exec "{sys.executable}" -m workbench.cli "$@"\n')
    (folder / "nel").chmod(0o755)
    (folder / "gym").symlink_to(GYM_BIN / "gym")
    return folder


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    work = tmp_path_factory.mktemp("gym-e2e")
    exported = nel("serve", "-b", "gsm8k", "--export-data", "data", cwd=work)  # writes, then exits: no server
    assert exported.returncode == 0, exported.stderr
    rows = (work / "data" / "gsm8k.jsonl").read_text().splitlines()
    (work / "rows.jsonl").write_text("\n".join(rows[:PROBLEMS]) + "\n")
    env = {k: v for k, v in clean_env().items() if not k.startswith("NEMO_GYM_")}
    env["PATH"] = f"{_shims(work / 'bin')}{os.pathsep}{env.get('PATH', '')}"
    with mock_model() as mock, serve_process(["-b", "gsm8k", "--gym-compat", "--port", "0"]) as served:
        ports = {str(p): free_port() for p in range(9100, 9107)}
        ports.update({"8000": mock.port, "9090": int(served.url.rsplit(":", 1)[1])})
        config = DOC_PORTS.sub(lambda m: str(ports[m[0]]), doc_block("gym.yaml"))
        (work / "gym.yaml").write_text(config)
        (work / "collect.yaml").write_text(doc_block("collect.yaml"))
        servers = {name: (module, ports[port]) for name, (module, port) in GYM_MODULES.items()}
        with gym_servers(config, servers, tmp_path_factory.mktemp("gym-logs")):
            yield Stack(work, env, config, ports)


@pytest.fixture(scope="module")
def collected(stack: Stack) -> subprocess.CompletedProcess[str]:
    """The doc's step 3: Gym's collection (aggregation on, 3 repeats), `gym eval profile`, `gym eval aggregate`."""
    return stack.shell(doc_block("collect"))


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _text(rollout: dict[str, Any]) -> str:
    return "".join(part.get("text", "") for item in rollout["response"]["output"] if item.get("type") == "message"
                   for part in item.get("content", []))


def test_gyms_collection_exits_0_with_aggregation_on(collected: subprocess.CompletedProcess[str],
                                                     stack: Stack) -> None:
    assert collected.returncode == 0, (collected.stdout + collected.stderr)[-4000:]
    rollouts = _jsonl(stack.work / "gym" / "rollouts.jsonl")
    assert len(rollouts) == PROBLEMS * 3
    [entry] = json.loads((stack.work / "gym" / "rollouts_aggregate_metrics.json").read_text())
    agent, key = entry["agent_metrics"], entry["key_metrics"]
    assert "nel/pass@1" in key and "pass@3/accuracy" in key and "majority@3/accuracy" in key  # nel answered
    assert math.isclose(agent["mean/reward"], sum(r["reward"] for r in rollouts) / len(rollouts))
    assert agent["num_repeats"] == 3 and len(entry["group_level_metrics"]) == PROBLEMS


def test_repeats_of_a_task_differ_as_they_do_natively(collected: subprocess.CompletedProcess[str],
                                                      stack: Stack) -> None:
    texts: dict[int, set[str]] = defaultdict(set)
    rewards: dict[int, set[float]] = defaultdict(set)
    for rollout in _jsonl(stack.work / "gym" / "rollouts.jsonl"):
        texts[rollout["_ng_task_index"]].add(_text(rollout))
        rewards[rollout["_ng_task_index"]].add(rollout["reward"])
    assert any(len(seen) > 1 for seen in texts.values())
    assert any(len(seen) > 1 for seen in rewards.values())  # "sometimes" tasks: pass@3 above pass@1


def test_gym_eval_profile_and_aggregate_accept_the_output(collected: subprocess.CompletedProcess[str],
                                                          stack: Stack) -> None:
    assert "Reward profile completion: 36/36 rollout rows" in collected.stdout
    assert (stack.work / "gym" / "rollouts_agent_metrics.json").exists()
    [merged] = json.loads((stack.work / "merged" / "rollouts_aggregate_metrics.json").read_text())
    [first] = json.loads((stack.work / "gym" / "rollouts_aggregate_metrics.json").read_text())
    assert merged["key_metrics"] == first["key_metrics"]


def test_the_aggregate_equals_gyms_own_on_the_same_rollouts(collected: subprocess.CompletedProcess[str],
                                                           stack: Stack) -> None:
    """Gym's compute_aggregate_metrics is the oracle: every number both produce is the same."""
    stripped = []
    for rollout in _jsonl(stack.work / "gym" / "rollouts.jsonl"):
        row = {k: v for k, v in rollout.items() if k not in ("response", "responses_create_params")}
        row["response"] = {"usage": rollout["response"]["usage"]}
        stripped.append(row)
    gym = gyms_aggregate(stripped, stack.work)["agent_metrics"]
    [ours] = json.loads((stack.work / "gym" / "rollouts_aggregate_metrics.json").read_text())
    shared = [k for k, v in gym.items() if isinstance(v, int | float) and k in ours["agent_metrics"]]
    assert {"mean/reward", "pass@3/accuracy", "pass@1[avg-of-3]/accuracy", "majority@3/accuracy",
            "pass@1[avg-of-3]/accuracy/std_dev_across_runs"} <= set(shared)
    for name in shared:
        assert math.isclose(ours["agent_metrics"][name], gym[name], rel_tol=1e-9, abs_tol=1e-9), name


def test_gyms_openai_model_collects_through_the_mocks_responses_api(stack: Stack) -> None:
    collect = doc_block("collect.yaml").replace("agent_name: nel_agent", "agent_name: nel_agent_responses")
    collect = collect.replace("gym/rollouts.jsonl", "gym-responses/rollouts.jsonl").replace("num_repeats: 3",
                                                                                           "num_repeats: 2")
    done = gym_cli(["gym", "eval", "run", "--no-serve"], cwd=stack.work, config=stack.config + collect)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    rollouts = _jsonl(stack.work / "gym-responses" / "rollouts.jsonl")
    assert len(rollouts) == PROBLEMS * 2 and all(_text(r) for r in rollouts)
    assert any(r["reward"] == 1.0 for r in rollouts)
    assert (stack.work / "gym-responses" / "rollouts_aggregate_metrics.json").exists()


def test_nel_compares_the_gym_run_with_the_native_run_task_by_task(collected: subprocess.CompletedProcess[str],
                                                                   stack: Stack) -> None:
    """Same model, same problems: nel's loop vs Gym's harness in one `nel compare` (the doc's recipe 2)."""
    assert collected.returncode == 0
    done = stack.shell(doc_block("compare"))
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    paired = rf"paired\s+{PROBLEMS} tasks; 0 only in the baseline, 0 only in the candidate"
    assert re.search(paired, done.stdout), done.stdout[-3000:]
    assert (stack.work / "diagnosis.md").read_text().strip()
