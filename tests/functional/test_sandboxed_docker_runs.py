"""The same sandboxed runs in Docker containers: HumanEval's tests and an agent's file tasks, each attempt in
its own container, and no container left behind when the run is interrupted with Ctrl-C."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from nel_helpers import assert_ok, nel, nel_popen, step_count

from workbench.mock import MockHandle, mock_model
from workbench.store import open_store

pytestmark = pytest.mark.timeout(300)


def sandbox_containers() -> list[str]:
    import docker

    client = docker.from_env()
    try:
        return [c["Id"] for c in client.api.containers(all=True, filters={"label": "nel.sandbox"})]
    finally:
        client.close()


def run_args(mock: MockHandle, tmp_path: Path, bench: str, problems: int, repeats: int) -> list[str]:
    return ["eval", "run", "-b", bench, "--model-url", mock.base_url, "--model-id", "nel-mock", "--sandbox", "docker",
            "--max-problems", str(problems), "--repeats", str(repeats), "--store", str(tmp_path / "nel.duckdb"),
            "--output-dir", str(tmp_path), "--no-progress", "--max-concurrent", "4"]


def test_humaneval_in_containers(docker_image: str, mock: MockHandle, tmp_path: Path) -> None:
    assert_ok(nel(*run_args(mock, tmp_path, "humaneval", 6, 2), cwd=tmp_path, timeout=240))
    s = open_store(tmp_path / "nel.duckdb")
    rows = s.dicts("SELECT passed, scoring_details->>'sandbox' AS sandbox, scoring_details->>'outcome' AS outcome "
                   "FROM steps")
    assert len(rows) == 12 and {r["sandbox"] for r in rows} == {"docker"}
    assert any(r["passed"] for r in rows) and all(r["passed"] == (r["outcome"] == "passed") for r in rows)
    assert sandbox_containers() == []


def test_an_agent_works_in_a_container(docker_image: str, mock: MockHandle, tmp_path: Path) -> None:
    assert_ok(nel(*run_args(mock, tmp_path, "file_tasks", 8, 2), cwd=tmp_path, timeout=240))
    s = open_store(tmp_path / "nel.duckdb")
    assert s.dicts("SELECT count(*) AS n FROM steps WHERE passed")[0]["n"] > 0
    assert s.dicts("SELECT count(*) AS n FROM step_tool_calls WHERE name = 'bash'")[0]["n"] > 0
    assert sandbox_containers() == []


@pytest.fixture
def slow_mock() -> Iterator[MockHandle]:
    with mock_model(latency_ms=400) as handle:
        yield handle


def test_ctrl_c_leaves_no_container_behind(docker_image: str, slow_mock: MockHandle, tmp_path: Path) -> None:
    assert sandbox_containers() == []
    proc = nel_popen(*run_args(slow_mock, tmp_path, "humaneval", 40, 1), cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        store = tmp_path / "nel.duckdb"
        while not store.with_name("nel.duckdb.segments").exists() or step_count(store) < 2 \
                or not sandbox_containers():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run did not get going"
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert sandbox_containers() == []


def test_sandbox_clean_removes_what_a_killed_run_left_and_nothing_of_a_live_one(
    docker_image: str, tmp_path: Path
) -> None:
    import os
    import socket

    import docker

    host = socket.gethostname()
    dead = subprocess.Popen(["true"])
    dead.wait()
    client = docker.from_env()
    made: dict[str, str] = {}
    try:
        made = {
            owner: client.containers.create(docker_image, command=["true"],
                                            labels={"nel.sandbox": "1", "nel.sandbox.owner": owner}).id
            for owner in (f"{host}-{dead.pid}-deadbeef", f"{host}-{os.getpid()}-live0000")
        }
        proc = nel("sandbox", "clean", cwd=tmp_path)
        assert_ok(proc)
        assert "removed 1 leftover" in proc.stdout
        left = {c["Labels"]["nel.sandbox.owner"] for c in
                client.api.containers(all=True, filters={"label": "nel.sandbox"})}
        assert left == {f"{host}-{os.getpid()}-live0000"}
    finally:
        for container_id in made.values():
            with contextlib.suppress(docker.errors.NotFound):
                client.api.remove_container(container_id, force=True, v=True)
        client.close()


def test_a_missing_image_is_named_before_any_run_starts(docker_image: str, mock: MockHandle, tmp_path: Path) -> None:
    config = tmp_path / "suite.yaml"
    config.write_text(f'services:\n  m: {{url: "{mock.base_url}", model: nel-mock}}\nbenchmarks:\n'
                      f'  - name: humaneval\n    sandbox: {{type: docker, image: "nel-missing:x"}}\n'
                      f'output: {{dir: "{tmp_path / "out"}"}}\n')
    proc = nel("eval", "run", str(config), "--no-progress", cwd=tmp_path)
    assert proc.returncode == 1
    assert "sandbox.image: 'nel-missing:x' is not in the local Docker engine" in proc.stderr
    assert "nel sandbox image --image nel-missing:x" in proc.stderr
    assert not (tmp_path / "out" / "nel.duckdb").exists() and "starting run" not in proc.stderr
