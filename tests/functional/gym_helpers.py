"""NeMo Gym's own resources servers (from ``.venv-gym``, Python 3.13) as real processes on loopback."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, f"the Gym server exited:\n{log.read_text()[-3000:]}"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"the Gym server did not start:\n{log.read_text()[-3000:]}"
            time.sleep(0.25)
        yield f"127.0.0.1:{port}"
    finally:
        stop(proc)
