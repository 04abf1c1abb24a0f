"""`nel serve` inside a SLURM job writes endpoint.txt, the NODE:PORT Gym's training nodes reach it at, once it
listens, and removes it when it stops; a loopback server, which no other node reaches, writes none and says so."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

TOKEN = "serve-token-0123456789"


def _serve(tmp_path: Path, host: str, **env: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "workbench.cli", "serve", "-b", "gsm8k", "--host", host, "--port", "0",
            "--scoring-workers", "0", *(["--allow-remote", "--auth-token", TOKEN] if host != "127.0.0.1" else [])]
    return subprocess.Popen(argv, cwd=tmp_path, env={**os.environ, **env}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _ready(proc: subprocess.Popen[str]) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "gsm8k" in line, (line, proc.stderr.read() if proc.stderr else "")


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    return err


@pytest.mark.timeout(90)
def test_a_server_in_a_slurm_job_writes_the_node_and_port_and_removes_it_when_it_stops(tmp_path: Path) -> None:
    proc = _serve(tmp_path, "0.0.0.0", SLURM_JOB_ID="4242", SLURMD_NODENAME="node17")
    try:
        _ready(proc)
        node, port = (tmp_path / "endpoint.txt").read_text().strip().split(":")
        assert node == "node17"
        request = urllib.request.Request(f"http://127.0.0.1:{port}/health",
                                         headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(request, timeout=5) as answer:  # the port written is the one it listens on
            assert answer.status == 200
    finally:
        err = _stop(proc)
    assert f"wrote {tmp_path / 'endpoint.txt'} (node17:{port}" in err
    assert not (tmp_path / "endpoint.txt").exists()
    assert TOKEN not in err


@pytest.mark.timeout(90)
def test_a_loopback_server_in_a_slurm_job_writes_no_endpoint_and_says_why(tmp_path: Path) -> None:
    proc = _serve(tmp_path, "127.0.0.1", SLURM_JOB_ID="4242")
    try:
        _ready(proc)
        time.sleep(0.1)
        assert not (tmp_path / "endpoint.txt").exists()
    finally:
        err = _stop(proc)
    assert "no endpoint.txt: --host 127.0.0.1 is reachable from this node only" in err


@pytest.mark.timeout(90)
def test_outside_slurm_nel_serve_writes_no_endpoint(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    proc = subprocess.Popen([sys.executable, "-m", "workbench.cli", "serve", "-b", "gsm8k", "--port", "0",
                             "--scoring-workers", "0"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        _ready(proc)
        assert not (tmp_path / "endpoint.txt").exists()
    finally:
        err = _stop(proc)
    assert "endpoint.txt" not in err
