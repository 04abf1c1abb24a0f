"""NeMo Gym's own resources servers (from ``.venv-gym``, Python 3.13) as real processes on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from nel_helpers import free_port, stop

ROOT = Path(__file__).resolve().parents[2]
GYM_PYTHON = ROOT / ".venv-gym" / "bin" / "python"
GYM_SITE = ROOT / ".venv-gym" / "lib" / "python3.13" / "site-packages"
NOT_INSTALLED = "NeMo Gym is not installed in .venv-gym (run `make gym`; needs Python 3.13)"


@contextmanager
def gym_resources_server(server: str, config: str, log: Path) -> Iterator[str]:
    """Gym's ``resources_servers.<server>`` started with ``config`` (a YAML template with ``{port}`` and
    ``{head_port}``), yielding ``host:port`` once its /health answers (the test fails with the log if not)."""
    if not GYM_PYTHON.exists():
        pytest.skip(NOT_INSTALLED)
    port = free_port()
    env = {**os.environ, "NEMO_GYM_CONFIG_DICT": config.format(port=port, head_port=free_port()),
           "NEMO_GYM_CONFIG_PATH": server}
    with log.open("wb") as sink:
        proc = subprocess.Popen([str(GYM_PYTHON), "-m", f"resources_servers.{server}.app"], env=env,
                                stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        _wait_healthy(proc, port, log, "the Gym server", time.monotonic() + 120)
        yield f"127.0.0.1:{port}"
    finally:
        stop(proc)


def _wait_healthy(proc: subprocess.Popen[bytes], port: int, log: Path, what: str, deadline: float) -> None:
    """Until ``proc``'s /health answers 200; the test fails with its log if it exits or the deadline passes."""
    while True:
        assert proc.poll() is None, f"{what} exited:\n{log.read_text()[-3000:]}"
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"{what} did not start:\n{log.read_text()[-3000:]}"
        time.sleep(0.25)


_AGGREGATE_ORACLE = """
import json, sys, warnings
warnings.simplefilter("ignore")
from nemo_gym.reward_profile import compute_aggregate_metrics, compute_pass_majority_metrics
rows = json.load(open(sys.argv[1]))
metrics = compute_aggregate_metrics(
    rows, compute_metrics_fn=lambda tasks: compute_pass_majority_metrics(tasks, answer_key="extracted_answer")[0])
print(json.dumps(metrics.model_dump(mode="json")))
"""


def gyms_aggregate(rows: list[dict[str, Any]], scratch: Path) -> dict[str, Any]:
    """Gym's own ``compute_aggregate_metrics`` (with math_with_judge's pass/majority metrics) over ``rows``, run in
    Gym's interpreter: the oracle of ``/aggregate_metrics``. Gym reads "the first k" in list order, nel by rollout
    index, so the rows go in rollout order."""
    path = scratch / "gym-aggregate-rows.json"
    path.write_text(json.dumps(sorted(rows, key=lambda r: (r["_ng_task_index"], r["_ng_rollout_index"]))))
    done = subprocess.run([str(GYM_PYTHON), "-c", _AGGREGATE_ORACLE, str(path)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


GYM_BIN = ROOT / ".venv-gym" / "bin"


@contextmanager
def gym_servers(config: str, servers: dict[str, tuple[str, int]], log_dir: Path) -> Iterator[None]:
    """Several Gym servers sharing one config (YAML, every server's host and port in it): ``servers`` maps each
    config key to its module (``responses_api_models.vllm_model.app``) and port. They start together; the block
    runs once every /health answers (the test fails with the server's log if one does not)."""
    if not GYM_PYTHON.exists():
        pytest.skip(NOT_INSTALLED)
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for name, (module, _) in servers.items():
            env = {**os.environ, "NEMO_GYM_CONFIG_DICT": config, "NEMO_GYM_CONFIG_PATH": name}
            with (log_dir / f"{name}.log").open("wb") as sink:
                procs[name] = subprocess.Popen([str(GYM_PYTHON), "-m", module], env=env, cwd=GYM_SITE, stdout=sink,
                                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        for name, (_, port) in servers.items():
            _wait_healthy(procs[name], port, log_dir / f"{name}.log", f"Gym's {name}", deadline)
        yield
    finally:
        for proc in procs.values():
            stop(proc)


def gym_cli(args: list[str], *, cwd: Path, config: str | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Gym's own command line (``gym eval run --no-serve``, ``gym eval profile``...); with ``config``, the servers'
    and the command's settings come from it (``NEMO_GYM_CONFIG_DICT``), as for a process Gym started itself."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEMO_GYM_")}
    if config is not None:
        env["NEMO_GYM_CONFIG_DICT"] = config
    return subprocess.run([str(GYM_BIN / args[0]), *args[1:]], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
