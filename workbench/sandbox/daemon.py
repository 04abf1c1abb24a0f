"""Make sure a Docker engine answers, starting ``dockerd`` when it is installed but not running.

CI machines and fresh containers often have Docker installed but no daemon started; the
sandbox tests (and a future ``nel sandbox doctor``) start one rather than skip silently.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

START_TIMEOUT_S = 30.0


class DockerdMissing(RuntimeError):
    """No engine answers and there is no ``dockerd`` binary to start one."""


class DockerdFailed(RuntimeError):
    """``dockerd`` is installed but did not come up; the message quotes its log."""


def docker_answers() -> bool:
    """Whether the engine at ``DOCKER_HOST`` (or the default socket) answers a ping."""
    import docker
    from docker.errors import DockerException

    try:
        client = docker.from_env(timeout=5)
    except DockerException:
        return False
    try:
        return bool(client.ping())
    except Exception:
        return False
    finally:
        client.close()


def ensure_dockerd(log_path: Path, timeout: float = START_TIMEOUT_S) -> subprocess.Popen[bytes] | None:
    """``None`` if an engine already answers, else the ``dockerd`` started in the background (logging to ``log_path``).

    Raises ``DockerdMissing`` when there is nothing to start and ``DockerdFailed``, with the
    log's tail, when the daemon does not answer within ``timeout`` seconds.
    """
    if docker_answers():
        return None
    binary = shutil.which("dockerd")
    if binary is None:
        raise DockerdMissing("the Docker engine is not running and dockerd is not installed")
    with open(log_path, "ab") as log:
        process = subprocess.Popen([binary], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if docker_answers():
            return process
        if process.poll() is not None:
            break
        time.sleep(0.5)
    tail = log_path.read_text(errors="replace")[-4000:]
    raise DockerdFailed(f"dockerd did not start within {timeout:.0f} s (exit {process.poll()}); its log:\n{tail}")
