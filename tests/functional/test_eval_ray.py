"""``nel eval run --engine ray``: shards as tasks on a real local Ray cluster (``ray start --head``, joined with
``--ray-address`` as an existing cluster would be, through Ray Client's ``ray://``, and from inside a job sent
with ``ray job submit``), merged into the store, equal to the same run done locally.

Ray is the ``ray`` extra; CI installs it (``pip install -e '.[test,ray]'``), so its absence fails here."""

from __future__ import annotations

import importlib.util
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
from nel_helpers import (
    assert_ok,
    assert_one_line_error,
    clean_env,
    eval_args,
    free_port,
    nel,
    step_count,
    stop,
    wait_for,
)

from workbench.mock import MockHandle
from workbench.store import open_store

pytestmark = pytest.mark.timeout(120)

PROBLEMS, REPEATS = 20, 2
# Ray >= 2.5x asks for a token by default; a throwaway cluster on loopback needs none (older Rays ignore this).
RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
ROWS = ["task_id", "repeat", "reward", "extracted_answer"]


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    except OSError:
        return False
    return True


@dataclass(frozen=True)
class RayCluster:
    address: str  # the GCS, as `--ray-address` takes it
    client: str  # Ray Client, ray://
    dashboard: str  # the job server `ray job submit` talks to


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[RayCluster]:
    """A two-CPU Ray head started for this module with its job server and Ray Client server
    (``--block``: stopping it stops its whole cluster)."""
    if importlib.util.find_spec("ray") is None:
        pytest.fail("ray is not installed: install the extra, pip install -e '.[test,ray]' (CI does)")
    port, client, dashboard = free_port(), free_port(), free_port()
    temp = tempfile.mkdtemp(prefix="nelray", dir="/tmp")  # short: Ray's socket paths have a length limit
    head = subprocess.Popen(
        [str(Path(sys.executable).with_name("ray")), "start", "--head", "--block", f"--port={port}",
         "--num-cpus=2", "--include-dashboard=true", "--dashboard-host=127.0.0.1", f"--dashboard-port={dashboard}",
         f"--ray-client-server-port={client}", "--disable-usage-stats", f"--temp-dir={temp}"],
        # Ray Client's proxy forks a server per client; with gRPC's fork support on, that server sometimes dies
        # at start on a loaded machine (epoll_wait: Bad file descriptor), and each such death costs the client
        # the proxy's whole channel timeout. CI once lost 200 s to two of them. Off, none in 12 loaded tries.
        env=clean_env(**RAY_ENV, GRPC_ENABLE_FORK_SUPPORT="0"), stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        up = wait_for(lambda: all(map(_listening, (port, client, dashboard))) or head.poll() is not None,
                      timeout=90, interval=0.2)
        if not up or head.poll() is not None:
            pytest.fail(f"ray start --head did not come up: {head.stderr.read() if head.poll() is not None else ''}")
        yield RayCluster(f"127.0.0.1:{port}", f"ray://127.0.0.1:{client}", f"http://127.0.0.1:{dashboard}")
    finally:
        stop(head, grace=30)
        shutil.rmtree(temp, ignore_errors=True)


def _rows(store: Path) -> pl.DataFrame:
    return open_store(store).steps().select(ROWS).sort(["task_id", "repeat"])


def test_ray_shards_merge_into_the_same_run_as_a_local_one(
    mock: MockHandle, ray_cluster: RayCluster, tmp_path: Path
) -> None:
    ray_address = ray_cluster.address
    local = tmp_path / "local" / "nel.duckdb"
    assert_ok(nel(*eval_args(mock.base_url, problems=PROBLEMS, repeats=REPEATS, store=local), cwd=tmp_path))
    store = tmp_path / "ray" / "nel.duckdb"
    proc = nel(*eval_args(mock.base_url, problems=PROBLEMS, repeats=REPEATS, store=store,
                          extra=["--engine", "ray", "--shards", "2", "--ray-address", ray_address]),
               cwd=tmp_path, env=clean_env(**RAY_ENV), timeout=90)
    assert_ok(proc)
    assert "ray shard 0: done" in proc.stderr and "ray shard 1: done" in proc.stderr, proc.stderr
    assert f"merged into {store}" in proc.stdout, proc.stdout
    assert f"{PROBLEMS * REPEATS}/{PROBLEMS * REPEATS} steps" in proc.stdout, proc.stdout
    assert step_count(store) == PROBLEMS * REPEATS
    runs = open_store(store).runs()
    assert runs["status"].to_list() == ["complete"]
    assert not (tmp_path / "ray" / "nel.duckdb.segments").exists() or not any(
        (tmp_path / "ray" / "nel.duckdb.segments").rglob("*.parquet"))
    assert _rows(store).equals(_rows(local))
    assert float(runs["pass_at_1"][0]) == float(open_store(local).runs()["pass_at_1"][0])


def _ray_run_is_complete(store: Path, proc: subprocess.CompletedProcess[str]) -> None:
    out = proc.stdout + proc.stderr
    assert "ray shard 0: done" in out and "ray shard 1: done" in out and f"merged into {store}" in out, out
    assert step_count(store) == PROBLEMS * REPEATS
    assert open_store(store).runs()["status"].to_list() == ["complete"]


@pytest.mark.timeout(240)
def test_ray_client_addresses_work_like_the_cluster_address(
    mock: MockHandle, ray_cluster: RayCluster, tmp_path: Path
) -> None:
    """ray://: the driver (and the merge) stay here, the shards run on the cluster."""
    store = tmp_path / "client" / "nel.duckdb"
    proc = nel(*eval_args(mock.base_url, problems=PROBLEMS, repeats=REPEATS, store=store,
                          extra=["--engine", "ray", "--shards", "2", "--ray-address", ray_cluster.client]),
               cwd=tmp_path, env=clean_env(**RAY_ENV), timeout=200)
    assert_ok(proc)
    _ray_run_is_complete(store, proc)


@pytest.mark.timeout(240)
def test_it_runs_as_the_entrypoint_of_ray_job_submit(
    mock: MockHandle, ray_cluster: RayCluster, tmp_path: Path
) -> None:
    """The driver itself runs on the cluster as a Ray job and joins it with --ray-address auto."""
    store = tmp_path / "job" / "nel.duckdb"
    entrypoint = [str(Path(sys.executable).with_name("nel")),
                  *eval_args(mock.base_url, problems=PROBLEMS, repeats=REPEATS, store=store, output_dir=store.parent,
                             extra=["--engine", "ray", "--shards", "2", "--ray-address", "auto"])]
    for _ in range(4):
        proc = subprocess.run(
            [str(Path(sys.executable).with_name("ray")), "job", "submit", "--address", ray_cluster.dashboard,
             "--", *entrypoint],
            cwd=tmp_path, env=clean_env(**RAY_ENV), capture_output=True, text=True, timeout=100,
        )
        # The job server waits only 10 s for the head's dashboard agent to register, which a loaded machine can
        # take longer to do after `ray start`; nothing was submitted then, and Ray itself says to try again.
        if "No available agent to submit job" not in proc.stdout + proc.stderr:
            break
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "succeeded" in proc.stdout + proc.stderr
    _ray_run_is_complete(store, proc)


def test_an_unreachable_ray_address_is_one_line(mock: MockHandle, tmp_path: Path) -> None:
    dead = f"127.0.0.1:{free_port()}"
    proc = nel(*eval_args(mock.base_url, problems=2, repeats=1, store=tmp_path / "nel.duckdb",
                          extra=["--engine", "ray", "--shards", "2", "--ray-address", dead]), cwd=tmp_path, timeout=30)
    line = assert_one_line_error(proc, 2)
    assert f"cannot reach the Ray cluster at {dead}" in line


def test_background_is_refused_with_ray(mock: MockHandle, tmp_path: Path) -> None:
    proc = nel(*eval_args(mock.base_url, problems=2, repeats=1, store=tmp_path / "nel.duckdb",
                          extra=["--engine", "ray", "--background"]), cwd=tmp_path, timeout=30)
    assert "--background" in assert_one_line_error(proc, 2)


def test_every_shard_gets_the_run_spec_with_no_secret_and_absolute_paths(tmp_path: Path) -> None:
    import orjson

    from workbench.cli import build_parser
    from workbench.cli.eval_ray import shard_spec
    from workbench.cli.eval_run import run_spec
    from workbench.spec.io import secret_env, spec_json
    from workbench.workers.ray_engine import task_env

    args = build_parser().parse_args(["eval", "run", "-b", "gsm8k", "--model-url", "http://h/v1", "--model-id", "m",
                                      "--api-key", "sk-secret-abcdef", "--stop", "END", "--problem-range", "3:9",
                                      "--engine", "ray", "--shards", "3", "--sandbox", "docker",
                                      "--output-dir", "rel"])
    spec = shard_spec(run_spec(args))
    text = spec_json(spec)
    assert "sk-secret" not in text  # the key travels in the tasks' environment only
    bench = orjson.loads(text)["benchmarks"][0]
    assert bench["problem_range"] == [3, 9] and bench["sandbox"]["type"] == "docker"  # every setting reaches
    assert orjson.loads(text)["services"]["main"]["generation"]["stop"] == ["END"]   # every shard
    assert Path(spec.output.dir).is_absolute() and Path(spec.store_path).is_absolute()
    assert task_env(secret_env(spec))["NEL_API_KEY_MAIN"] == "sk-secret-abcdef"


def test_local_shard_workers_get_every_setting_of_the_run(tmp_path: Path) -> None:
    from workbench.cli import build_parser
    from workbench.cli.eval_workers import build_request

    args = build_parser().parse_args(["eval", "run", "-b", "humaneval", "--model-url", "http://h/v1", "--model-id",
                                      "m", "--shards", "2", "--sandbox", "local", "--temperature", "0.5",
                                      "--store", str(tmp_path / "nel.duckdb")])
    spec = build_request(args).worker_spec()
    assert spec.benchmarks[0].sandbox_spec is not None and spec.benchmarks[0].sandbox_spec.type == "local"
    assert spec.services["main"].generation.temperature == 0.5
