"""``nel doctor`` on this machine (real checks, as a subprocess), and the Docker engine for normal use: with no
engine, ``--sandbox docker``, ``nel sandbox image`` and ``nel sandbox clean`` say in one line how to start one,
and ``nel sandbox engine start`` starts it with the code the test suite uses."""

from __future__ import annotations

import importlib.util
import json
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nel_helpers import assert_ok, assert_one_line_error, clean_env, nel

from workbench.mock import MockHandle
from workbench.sandbox.daemon import docker_answers
from workbench.store.database import SCHEMA_VERSION, connect_rw

pytestmark = pytest.mark.timeout(120)
STATUSES = ("ok", "missing", "warn", "error")
CHECKS = ("store", "disk", "docker engine", "sandbox image", "bubblewrap", "slurm", "ray", "nemo gym", "textual",
          "ipywidgets", "altair", "docker", "fastapi", "uvicorn", "lm_eval", "inspect_ai", "mlflow", "wandb")
START_HINT = "start it with `nel sandbox engine start`"


@pytest.fixture
def dead_socket() -> Iterator[str]:
    """``unix://PATH`` of a socket nobody listens on any more (connecting is refused)."""
    folder = Path(tempfile.mkdtemp(prefix="nel-dead-"))  # short: a unix socket path has at most 107 bytes
    path = folder / "docker.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(path))
    yield f"unix://{path}"
    shutil.rmtree(folder, ignore_errors=True)


def doctor(tmp_path: Path, **env: str) -> tuple[int, dict[str, dict[str, Any]]]:
    """Exit code and the checks by name (``--format json``) for the store ``tmp_path/store/nel.duckdb``."""
    proc = nel("doctor", "--store", str(tmp_path / "store" / "nel.duckdb"), "--format", "json", cwd=tmp_path,
               env=clean_env(**env))
    assert "Traceback" not in proc.stderr, proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] == (proc.returncode == 0)
    return proc.returncode, {c["name"]: c for c in report["checks"]}


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, dict[str, dict[str, Any]]]:
    """``nel doctor --format json`` once, on a store not created yet."""
    folder = tmp_path_factory.mktemp("doctor")
    return (folder, *doctor(folder))


class TestDoctor:
    """One line per check: status, what it found, what it enables and (when not ok) the fix."""

    def test_every_check_runs_for_real_and_reports_one_line(
        self, fresh: tuple[Path, int, dict[str, dict[str, Any]]]
    ) -> None:
        tmp_path, code, checks = fresh
        text = nel("doctor", "--store", str(tmp_path / "store" / "nel.duckdb"), cwd=tmp_path)
        lines = text.stdout.splitlines()
        assert code == text.returncode == 0, text.stdout + text.stderr
        assert list(checks) == list(CHECKS)
        assert len(lines) == len(CHECKS)
        for line, check in zip(lines, checks.values(), strict=True):
            assert line.split()[0] == check["status"] in STATUSES
            assert f"— enables {check['enables']}" in line
            assert (f"— fix: {check['fix']}" in line) == (check["status"] != "ok"), line
            assert check["status"] == "ok" or check["fix"], check
        assert checks["store"]["status"] == "ok" and "not created yet" in checks["store"]["detail"]
        assert checks["disk"]["status"] in ("ok", "warn") and "GiB free" in checks["disk"]["detail"]

    def test_it_tells_the_truth_about_this_machine(self, fresh: tuple[Path, int, dict[str, dict[str, Any]]]) -> None:
        _, _, checks = fresh
        assert checks["docker engine"]["status"] == ("ok" if docker_answers() else "missing")
        assert checks["bubblewrap"]["status"] == ("ok" if shutil.which("bwrap") and _bwrap_works() else
                                                  "missing" if not shutil.which("bwrap") else "warn")
        assert checks["slurm"]["status"] == ("missing" if not shutil.which("sbatch") else
                                             "ok" if _squeue_answers() else "warn")
        for name in ("ray", "textual", "lm_eval", "mlflow", "wandb"):
            installed = importlib.util.find_spec(name) is not None
            assert (checks[name]["status"] == "ok") == installed, checks[name]
            assert installed or checks[name]["fix"].startswith("pip install")
        if checks["ray"]["status"] == "ok":
            import ray

            assert ray.__version__ in checks["ray"]["detail"]

    def test_an_existing_store_is_opened_and_its_schema_named(self, tmp_path: Path) -> None:
        connect_rw(_mkdir(tmp_path / "store") / "nel.duckdb").close()
        code, checks = doctor(tmp_path)
        assert code == 0
        detail = checks["store"]["detail"]
        assert f"opens, schema version {SCHEMA_VERSION}, 0 run(s)" in detail and "no live segments" in detail

    def test_a_store_that_cannot_be_opened_is_the_one_failure_that_exits_1(self, tmp_path: Path) -> None:
        (_mkdir(tmp_path / "store") / "nel.duckdb").write_bytes(b"not a database")
        code, checks = doctor(tmp_path)
        assert code == 1 and checks["store"]["status"] == "error"
        assert [c["status"] for c in checks.values()].count("error") == 1
        assert "not a nel store" in checks["store"]["detail"] and checks["store"]["fix"]

    def test_a_store_whose_directory_cannot_be_made_is_an_error(self, tmp_path: Path) -> None:
        (tmp_path / "store").write_text("a file where the store's directory should be")
        code, checks = doctor(tmp_path)
        assert code == 1 and "cannot be created" in checks["store"]["detail"]

    def test_with_no_engine_docker_is_missing_with_the_way_to_start_it(self, tmp_path: Path, dead_socket: str) -> None:
        code, checks = doctor(tmp_path, DOCKER_HOST=dead_socket)
        assert code == 0  # docker is optional: the default path does not need it
        engine = checks["docker engine"]
        assert engine["status"] == "missing" and "connection refused" in engine["detail"]
        assert engine["fix"] == ("nel sandbox engine start" if shutil.which("dockerd") else "apt-get install docker.io")
        assert checks["sandbox image"]["status"] == "missing"


class TestNoEngine:
    """A raw SDK error ("Error while fetching server API version: ('Connection aborted.' ...") was all one got."""

    def test_a_docker_sandboxed_run_says_how_to_start_the_engine(
        self, tmp_path: Path, dead_socket: str, mock: MockHandle
    ) -> None:
        proc = nel("eval", "run", "-b", "humaneval", "--sandbox", "docker", "--model-url", mock.base_url,
                   "--model-id", "nel-mock", "--store", str(tmp_path / "nel.duckdb"), cwd=tmp_path,
                   env=clean_env(DOCKER_HOST=dead_socket))
        line = assert_one_line_error(proc, 2)
        assert f"the Docker engine is not running at {dead_socket} (connection refused)" in line
        assert START_HINT in line and "Error while fetching" not in line
        assert not (tmp_path / "nel.duckdb").exists()

    @pytest.mark.parametrize("command", [("sandbox", "image"), ("sandbox", "clean")], ids=" ".join)
    def test_sandbox_commands_say_how_to_start_the_engine(
        self, tmp_path: Path, dead_socket: str, command: tuple[str, ...]
    ) -> None:
        proc = nel(*command, cwd=tmp_path, env=clean_env(DOCKER_HOST=dead_socket))
        line = assert_one_line_error(proc, 2)
        assert "the Docker engine is not running" in line and START_HINT in line

    def test_a_socket_path_with_nothing_there_reads_the_same(self, tmp_path: Path) -> None:
        proc = nel("sandbox", "image", cwd=tmp_path, env=clean_env(DOCKER_HOST=f"unix://{tmp_path}/none.sock"))
        line = assert_one_line_error(proc, 2)
        assert "(no engine listens there)" in line and START_HINT in line


class TestEngineStart:
    def test_an_engine_that_answers_is_left_alone(self, docker_image: str, tmp_path: Path) -> None:
        proc = nel("sandbox", "engine", "start", "--log", str(tmp_path / "dockerd.log"), cwd=tmp_path)
        assert_ok(proc)
        assert "the Docker engine already answers at" in proc.stdout
        assert not (tmp_path / "dockerd.log").exists()

    def test_without_dockerd_it_says_what_to_install(self, tmp_path: Path, dead_socket: str) -> None:
        env = clean_env(DOCKER_HOST=dead_socket, PATH=str(_mkdir(tmp_path / "empty-bin")))
        line = assert_one_line_error(nel("sandbox", "engine", "start", cwd=tmp_path, env=env), 2)
        assert "not installed" in line and "apt-get install docker.io" in line

    def test_a_remote_engine_is_not_started_from_here(self, tmp_path: Path) -> None:
        env = clean_env(DOCKER_HOST="tcp://127.0.0.1:9")
        line = assert_one_line_error(nel("sandbox", "engine", "start", cwd=tmp_path, env=env), 2)
        assert "nel starts only a local engine" in line


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _squeue_answers() -> bool:
    import subprocess

    try:
        return subprocess.run(["squeue", "-h"], capture_output=True, timeout=5, check=False).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def _bwrap_works() -> bool:
    import os

    from workbench.sandbox.local import bwrap_problem
    from workbench.sandbox.uids import PROBE_UID

    return bwrap_problem(PROBE_UID if os.geteuid() == 0 else None) is None
