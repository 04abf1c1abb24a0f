"""An agent run against NeMo Gym's own tool-calling resources server (``example_single_tool_call``, from
``.venv-gym``): the tool-calling solver offers the server's tools (discovered from its /openapi.json, as the
row declares them), calls ``POST /get_weather`` inside each attempt's session, and sends ``/verify`` a
Responses-API response holding the ``function_call`` and ``function_call_output`` items, which is what
that server rewards."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from gym_helpers import GYM_SITE, gym_resources_server
from nel_helpers import assert_ok, nel

from workbench.errors import RunFailed
from workbench.gym.tools import tools_from_openapi
from workbench.mock import MockHandle
from workbench.store import open_store

pytestmark = pytest.mark.timeout(240)

SERVER = "example_single_tool_call"
GYM_CONFIG = f"""\
dry_run: false
head_server:
  host: 127.0.0.1
  port: {{head_port}}
{SERVER}:
  resources_servers:
    {SERVER}:
      entrypoint: app.py
      host: 127.0.0.1
      port: {{port}}
      domain: agent
"""


@pytest.fixture(scope="module")
def weather(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """NeMo Gym's example_single_tool_call resources server on loopback: host:port."""
    with gym_resources_server(SERVER, GYM_CONFIG, tmp_path_factory.mktemp("gym") / "server.log") as at:
        yield at


def _rows() -> Path:
    return GYM_SITE / "resources_servers" / SERVER / "data" / "example.jsonl"


def test_an_agent_calls_the_servers_tool_in_its_session_and_the_server_rewards_it(
    weather: str, mock: MockHandle, tmp_path: Path
) -> None:
    rows = _rows()
    n = sum(1 for line in rows.read_text().splitlines() if line.strip())
    config = tmp_path / "agent.yaml"
    config.write_text(textwrap.dedent(f"""\
        services:
          policy: {{url: "{mock.base_url}", model: nel-mock}}
          weather: {{type: resources, url: "http://{weather}"}}
        benchmarks:
          - name: "gym://{weather}?protocol=native&data={rows}"
            repeats: 2
            solver: {{type: tool_calling, service: policy, sandbox_tools: false, resource_service: weather,
                      max_turns: 4}}
        output: {{dir: "{tmp_path}"}}
        """))
    proc = nel("eval", "run", str(config), "--no-progress", cwd=tmp_path, timeout=180)
    assert_ok(proc)
    s = open_store(tmp_path / "nel.duckdb")
    rewards = s.dicts("SELECT reward, scoring_details->>'method' AS method FROM steps")
    assert len(rewards) == 2 * n and all(r["reward"] == 1.0 and r["method"] == "gym_native" for r in rewards)
    calls = s.dicts("SELECT name, arguments, output, turn FROM step_tool_calls")
    assert len(calls) == 2 * n and {c["name"] for c in calls} == {"get_weather"}
    assert all("cold" in c["output"] and c["turn"] == 1 for c in calls)  # the server's own answer


def test_a_resources_servers_tools_come_from_its_openapi_schema(weather: str) -> None:
    schema = httpx.get(f"http://{weather}/openapi.json", timeout=10).json()
    specs = {s.name: s for s in tools_from_openapi(schema)}
    assert set(specs) == {"get_weather"}  # seed_session, verify, ... are the protocol's, not tools
    assert specs["get_weather"].parameters["properties"]["city"]["type"] == "string"
    assert specs["get_weather"].parameters["required"] == ["city"]


def test_a_resources_server_must_serve_the_benchmark_it_gives_tools_to(mock: MockHandle, tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(textwrap.dedent(f"""\
        services:
          policy: {{url: "{mock.base_url}", model: nel-mock}}
          weather: {{type: resources, url: "http://127.0.0.1:9"}}
        benchmarks:
          - name: gsm8k
            solver: {{type: tool_calling, service: policy, sandbox_tools: false, resource_service: weather}}
        """))
    proc = nel("eval", "run", str(config), cwd=tmp_path)
    assert proc.returncode == 2 and "benchmarks.0.solver.resource_service" in proc.stderr
    assert "gym://127.0.0.1:9" in proc.stderr


def test_a_server_without_tools_is_named() -> None:
    from workbench.gym.tools import discover_tools

    with pytest.raises(RunFailed, match=r"cannot reach http://127\.0\.0\.1:9/openapi\.json"):
        discover_tools(httpx.Client(timeout=2), "http://127.0.0.1:9")
