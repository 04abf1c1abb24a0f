"""``nel serve --gym-compat`` under NeMo Gym's own rollout collection, beside Gym's own ``math_with_judge``.

Run: ``.venv/bin/python tests/perf/bench_gym_serve.py [--problems 200] [--repeats 4] [--aggregate-rollouts 100000]``
(needs ``.venv-gym``: ``make gym``). Both resources servers get the same rows (``nel serve --export-data``), the
same Gym model server (``vllm_model``) in front of the same zero-latency mock model, and the same agent
(``simple_agent``), so the difference is the resources server. Printed: Gym's own rollouts/min for each (from its
"Finished N / N rollouts ... (X rollouts/min)" line) and the collection's wall time, then the time of one
``POST /aggregate_metrics`` over ``--aggregate-rollouts`` verify responses (target ≤ 1 s), and the machine's load.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import tempfile
import time
from pathlib import Path

import httpx
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "functional"))
from gym_helpers import GYM_PYTHON, gym_cli, gym_servers
from nel_helpers import free_port, nel

from workbench.environments import get_environment
from workbench.mock.process import mock_model
from workbench.serve.process import serve_process

AGGREGATE_TARGET_S = 1.0
CONFIG = """\
dry_run: false
head_server: {{host: 127.0.0.1, port: {head}}}
policy_model:
  responses_api_models:
    vllm_model:
      entrypoint: app.py
      host: 127.0.0.1
      port: {model}
      base_url: {mock_url}
      api_key: none
      model: nel-mock
      return_token_id_information: false
      uses_reasoning_parser: false
nel_gsm8k:
  resources_servers:
    nel_gsm8k:
      entrypoint: app.py
      host: 127.0.0.1
      port: {nel}
math_with_judge:
  resources_servers:
    math_with_judge:
      entrypoint: app.py
      host: 127.0.0.1
      port: {gym}
      judge_model_server: {{type: responses_api_models, name: policy_model}}
      judge_responses_create_params: {{input: []}}
      should_use_judge: false
"""
AGENT = """\
{name}_agent:
  responses_api_agents:
    simple_agent:
      entrypoint: app.py
      host: 127.0.0.1
      port: {agent}
      resources_server: {{type: resources_servers, name: {name}}}
      model_server: {{type: responses_api_models, name: policy_model}}
{name}_env:
  environment_servers:
    legacy_agent:
      entrypoint: app.py
      host: 127.0.0.1
      port: {env}
      agent_server: {{type: responses_api_agents, name: {name}_agent}}
"""
RATE = re.compile(r"Finished (\d+) / \d+ rollouts .*?\(([\d.]+) rollouts/min\)")


def collection_rates(problems: int, repeats: int, work: Path) -> dict[str, tuple[float, float, int]]:
    """Per resources server: (Gym's rollouts/s, the collection's wall seconds, rollouts)."""
    assert nel("serve", "-b", "gsm8k", "--export-data", "data", cwd=work).returncode == 0
    rows = (work / "data" / "gsm8k.jsonl").read_text().splitlines()[:problems]
    (work / "rows.jsonl").write_text("\n".join(rows) + "\n")
    ports = {k: free_port() for k in ("head", "model", "gym", "nel_agent", "nel_env", "gym_agent", "gym_env")}
    out: dict[str, tuple[float, float, int]] = {}
    with mock_model() as mock, serve_process(["-b", "gsm8k", "--gym-compat", "--port", "0"]) as served:
        config = CONFIG.format(mock_url=mock.base_url, nel=served.url.rsplit(":", 1)[1], **ports)
        for name, short in (("nel_gsm8k", "nel"), ("math_with_judge", "gym")):
            config += AGENT.format(name=name, agent=ports[f"{short}_agent"], env=ports[f"{short}_env"])
        servers = {"policy_model": ("responses_api_models.vllm_model.app", ports["model"]),
                   "math_with_judge": ("resources_servers.math_with_judge.app", ports["gym"])}
        for name, short in (("nel_gsm8k", "nel"), ("math_with_judge", "gym")):
            servers[f"{name}_agent"] = ("responses_api_agents.simple_agent.app", ports[f"{short}_agent"])
            servers[f"{name}_env"] = ("environment_servers.legacy_agent.app", ports[f"{short}_env"])
        logs = work / "logs"
        logs.mkdir()
        with gym_servers(config, servers, logs):
            for name in ("nel_gsm8k", "math_with_judge"):
                settings = (f"agent_name: {name}_agent\ninput_jsonl_fpath: rows.jsonl\n"
                            f"output_jsonl_fpath: {name}/rollouts.jsonl\nnum_repeats: {repeats}\n"
                            "num_samples_in_parallel: 64\n")
                started = time.perf_counter()
                done = gym_cli(["gym", "eval", "run", "--no-serve"], cwd=work, config=config + settings, timeout=900)
                wall = time.perf_counter() - started
                if done.returncode != 0:
                    raise SystemExit(f"collection against {name} failed:\n{(done.stdout + done.stderr)[-3000:]}")
                match = RATE.findall(done.stdout + done.stderr)[-1]
                out[name] = (float(match[1]) / 60.0, wall, int(match[0]))
    return out


def verify_responses(n: int, repeats: int) -> list[dict[str, object]]:
    """Rollouts as Gym's collection posts them to nel serve (its /verify echo, minus the response itself)."""
    env = get_environment("gsm8k")
    rng = random.Random(0)
    seeds = [env.seed(i) for i in range(len(env))]
    rows: list[dict[str, object]] = []
    for t in range(n // repeats):
        seed = seeds[t % len(seeds)]
        for r in range(repeats):
            right = rng.random() < 0.6
            rows.append({"_ng_task_index": t, "_ng_rollout_index": r, "reward": float(right),
                         "extracted_answer": seed.expected_answer if right else str(rng.randint(0, 99)),
                         "expected_answer": seed.expected_answer, "eval_type": "gsm8k", "benchmark": "gsm8k",
                         "task_id": seed.task_id, "metadata": seed.metadata, "agent_ref": {"name": "nel_agent"},
                         "scoring_details": {"method": "numeric"},
                         "response": {"usage": {"input_tokens": 120, "output_tokens": rng.randint(20, 200),
                                                "total_tokens": 300, "input_tokens_details": {"cached_tokens": 0},
                                                "output_tokens_details": {"reasoning_tokens": 0}}}})
    return rows


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux ``/proc``): what a request cost, whatever the machine's load."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def aggregate_seconds(n: int) -> tuple[float, float, float, int]:
    """One POST /aggregate_metrics over ``n`` rollouts (best of 3): wall seconds, the server's CPU seconds,
    the body's MB, tasks."""
    rows = verify_responses(n, 4)
    body = orjson.dumps({"verify_responses": rows})
    best, best_cpu = float("inf"), float("inf")
    with serve_process(["-b", "gsm8k", "--gym-compat", "--port", "0"]) as served, \
            httpx.Client(base_url=served.url, timeout=120) as client:
        for _ in range(3):
            cpu = _cpu_seconds(served.process.pid)
            started = time.perf_counter()
            answer = client.post("/aggregate_metrics", content=body, headers={"Content-Type": "application/json"})
            best = min(best, time.perf_counter() - started)
            best_cpu = min(best_cpu, _cpu_seconds(served.process.pid) - cpu)
            assert answer.status_code == 200, answer.text[:500]
    return best, best_cpu, len(body) / 1e6, n // 4


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--aggregate-rollouts", type=int, default=100_000)
    args = parser.parse_args()
    if not GYM_PYTHON.exists():
        print("NeMo Gym is not installed in .venv-gym (run `make gym`)")
        return 2
    print(f"load before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        rates = collection_rates(args.problems, args.repeats, Path(tmp))
    print(f"Gym's collection, {args.problems} GSM8K problems x {args.repeats}, simple_agent + vllm_model + mock:")
    for name, (rate, wall, count) in rates.items():
        print(f"  {name:16s} {rate:8.1f} rollouts/s (Gym's count, {count} rollouts)   wall {wall:6.1f} s")
    ratio = rates["nel_gsm8k"][0] / rates["math_with_judge"][0]
    print(f"  nel serve / math_with_judge: {ratio:.2f}x")
    seconds, cpu, megabytes, tasks = aggregate_seconds(args.aggregate_rollouts)
    verdict = "ok" if seconds <= AGGREGATE_TARGET_S else f"OVER the {AGGREGATE_TARGET_S:g} s target"
    print(f"/aggregate_metrics: {args.aggregate_rollouts:,} rollouts ({tasks:,} tasks x 4, {megabytes:.0f} MB body) "
          f"in {seconds:.3f} s over HTTP ({cpu:.2f} s of the server's CPU): {verdict}")
    print(f"load after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
