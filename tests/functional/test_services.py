"""Servers nel starts itself, for real: our own mock as a `type: command` service serving `nel eval run`, and
every way a server can fail to come up — with nothing left running afterwards, even when nel is killed."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import yaml
from nel_helpers import nel, nel_popen

from workbench.services.ports import port_holder

MOCK = [sys.executable, "-m", "workbench.cli", "model", "mock", "--port", "{port}"]
READY = re.compile(r"services\.(\w+): command server for \S+ ready at http://127\.0\.0\.1:(\d+)/v1")


def write_config(tmp_path: Path, services: dict[str, Any], solver: str = "m", max_problems: int = 8,
                 repeats: int = 1) -> Path:
    config = {"services": services,
              "benchmarks": [{"name": "gsm8k", "max_problems": max_problems, "repeats": repeats,
                              "solver": {"service": solver}}],
              "output": {"dir": str(tmp_path / "out")}}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def gone(pid: int, within_s: float = 5.0) -> bool:
    """Whether process ``pid`` has exited (or is a zombie nobody reaped yet) within ``within_s``."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_a_command_service_serves_the_run_and_is_stopped_after_it(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"m": {"type": "command", "model": "mock", "command": MOCK}})
    done = nel("eval", "run", str(config), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    ready = READY.search(done.stderr)
    assert ready is not None, done.stderr
    assert not listening(int(ready.group(2)))  # stopped with the run
    assert re.search(r"complete: 8 new steps", done.stdout) and re.search(r"steps\s+8/8", done.stdout), done.stdout
    with duckdb.connect(str(tmp_path / "out" / "nel.duckdb"), read_only=True) as db:
        row = db.execute("SELECT model_url, identity FROM runs").fetchone()
    assert row is not None
    model_url, identity = row
    assert model_url == "http://127.0.0.1:PORT/v1/chat/completions"  # the port is picked afresh each time
    assert json.loads(identity)["served"]["command"] == MOCK


def test_a_server_that_exits_is_reported_with_its_code_and_last_lines(tmp_path: Path) -> None:
    script = "import sys; [print(f'loading shard {i}') for i in range(30)]; print('CUDA out of memory'); sys.exit(3)"
    config = write_config(tmp_path, {"m": {"type": "command", "model": "x", "command": [sys.executable, "-c", script]}})
    done = nel("eval", "run", str(config), cwd=tmp_path)
    assert done.returncode == 1
    assert "services.m: the server (" in done.stderr and "exited with code 3 before it answered GET /v1/models" \
        in done.stderr
    assert "CUDA out of memory" in done.stderr and "loading shard 29" in done.stderr
    assert "loading shard 0\n" not in done.stderr  # the tail, not the whole log


def test_a_server_never_healthy_times_out_and_is_left_running_nowhere(tmp_path: Path) -> None:
    pid_file = tmp_path / "server.pid"
    script = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); print('warming up', " \
             "flush=True); time.sleep(120)"
    config = write_config(tmp_path, {"m": {"type": "command", "model": "x", "startup_timeout": 1.0,
                                           "command": [sys.executable, "-c", script]}})
    done = nel("eval", "run", str(config), cwd=tmp_path)
    assert done.returncode == 1
    assert "did not answer GET /v1/models within 1 s (startup_timeout); its last lines:\nwarming up" in done.stderr
    assert gone(int(pid_file.read_text()))


def test_a_port_in_use_names_the_process_holding_it(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        config = write_config(tmp_path, {"m": {"type": "command", "model": "x", "port": port, "command": MOCK}})
        done = nel("eval", "run", str(config), cwd=tmp_path)
    assert done.returncode == 2
    assert f"services.m.port: port {port} is already in use by pid {os.getpid()} (" in done.stderr


def test_the_server_and_what_it_started_do_not_outlive_a_killed_nel(tmp_path: Path) -> None:
    # a shell that starts the real server as its own child: the kernel's signal reaches the shell alone
    slow = ["sh", "-c", " ".join([*MOCK, "--latency-ms", "200"]) + " & wait"]
    config = write_config(tmp_path, {"m": {"type": "command", "model": "mock", "command": slow}},
                          max_problems=200, repeats=4)
    proc = nel_popen("eval", "run", str(config), cwd=tmp_path)
    try:
        assert proc.stderr is not None
        port = None
        for line in proc.stderr:  # nel says where the server is once it answers
            if (ready := READY.search(line)) is not None:
                port = int(ready.group(2))
                break
        assert port is not None
        holder = port_holder(port)
        assert holder is not None
        server_pid = int(holder.split()[1])
        proc.kill()  # kill -9: nothing in nel runs to stop the server
        proc.wait(10)
        assert server_pid != proc.pid and gone(server_pid), f"the server (pid {server_pid}) outlived nel"
        assert not listening(port)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_ctrl_c_stops_the_server_with_the_run(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"m": {"type": "command", "model": "mock",
                                           "command": [*MOCK, "--latency-ms", "200"]}}, max_problems=200, repeats=4)
    proc = nel_popen("eval", "run", str(config), cwd=tmp_path)
    try:
        assert proc.stderr is not None
        port = next(int(m.group(2)) for line in proc.stderr if (m := READY.search(line)) is not None)
        holder = port_holder(port)
        assert holder is not None
        time.sleep(0.5)  # the run is under way
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) != 0
        assert gone(int(holder.split()[1])) and not listening(port)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_depends_on_starts_dependencies_first(tmp_path: Path) -> None:
    services = {"m": {"type": "command", "model": "mock", "command": MOCK, "depends_on": ["helper"]},
                "helper": {"type": "command", "model": "mock", "command": MOCK}}
    done = nel("eval", "run", str(write_config(tmp_path, services, max_problems=2)), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [m.group(1) for m in READY.finditer(done.stderr)] == ["helper", "m"]


def test_no_secret_of_a_server_reaches_the_store_or_the_terminal(tmp_path: Path) -> None:
    secret = "sk-very-secret-server-key-42"
    config = write_config(tmp_path, {"m": {"type": "command", "model": "mock", "env": {"UPSTREAM_KEY": secret},
                                           "command": [*MOCK, "--model-name", "mock"]}}, max_problems=2)
    done = nel("eval", "run", str(config), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert secret not in done.stdout + done.stderr
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_a_started_servers_cache_answers_the_next_run_whatever_port_it_gets(tmp_path: Path) -> None:
    """The port is picked afresh each run: the cache keys on what the server serves, so a re-run is a full hit
    (it missed every time before: the key held the port)."""
    service = {"type": "command", "model": "mock", "command": MOCK, "interceptors": [{"name": "cache"}]}
    config = write_config(tmp_path, {"m": service}, max_problems=6, repeats=2)
    summaries = []
    for _ in range(2):
        done = nel("eval", "run", str(config), "--no-progress", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        (path,) = (tmp_path / "out").glob("runs/*/summary.json")
        summaries.append(json.loads(path.read_text()))
        path.rename(path.with_name("summary.seen.json"))
    assert [(s["cache"]["hits"], s["cache"]["misses"]) for s in summaries] == [(0, 12), (12, 0)]
    other = dict(service, command=[*MOCK, "--model-name", "other"])  # another server: another answer source
    done = nel("eval", "run", str(write_config(tmp_path, {"m": other}, max_problems=6, repeats=2)), "--no-progress",
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (path,) = (tmp_path / "out").glob("runs/*/summary.json")
    assert json.loads(path.read_text())["cache"]["hits"] == 0
