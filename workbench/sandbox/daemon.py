"""Make sure a Docker engine answers, starting ``dockerd`` when it is installed but not running.

CI machines and fresh containers often have Docker installed but no daemon started; the
sandbox tests start one rather than skip silently, and ``nel sandbox engine start`` runs the
same code for everyone else. When no engine answers, ``engine_unreachable`` says so in one
line with the way to start it, never as the SDK's raw connection error.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from workbench.errors import UsageError

START_TIMEOUT_S = 30.0
DEFAULT_HOSTS = ("unix:///var/run/docker.sock", "unix:///run/docker.sock")
LOG_PATH = Path("/var/log/nel-dockerd.log")
START_HINT = "start it with `nel sandbox engine start` (or `systemctl start docker`)"


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


def engine_address() -> str:
    """Where the SDK looks for the engine: ``$DOCKER_HOST``, else the default socket."""
    return os.environ.get("DOCKER_HOST") or DEFAULT_HOSTS[0]


def engine_unreachable(exc: BaseException, what: str = "sandbox.type docker") -> UsageError:
    """The one-line error for an engine that does not answer: where nel looked, why (in words), and the fix."""
    text = str(exc)
    address = engine_address()
    if "Permission denied" in text:
        return UsageError(f"{what}: the Docker engine at {address} refused this user (permission denied); "
                          "run nel as root or as a member of the docker group")
    if "No such file or directory" in text:
        cause = "no engine listens there"
    elif "Connection refused" in text:
        cause = "connection refused"
    else:
        cause = " ".join(text.split())[:160] or type(exc).__name__
    fix = START_HINT if address.startswith("unix://") else "start the engine on that host, or unset DOCKER_HOST"
    return UsageError(f"{what}: the Docker engine is not running at {address} ({cause}); {fix}")


def connect(what: str = "sandbox.type docker", timeout: int = 60) -> Any:
    """A docker SDK client whose engine answered a ping; else ``engine_unreachable``'s ``UsageError``."""
    import docker

    try:
        client = docker.from_env(timeout=timeout)
    except Exception as exc:  # DockerException, or the requests error under it
        raise engine_unreachable(exc, what) from None
    try:
        client.ping()
    except Exception as exc:
        client.close()
        raise engine_unreachable(exc, what) from None
    return client


def start_engine(log_path: Path = LOG_PATH) -> subprocess.Popen[bytes] | None:
    """``nel sandbox engine start``: ``ensure_dockerd`` (the test suite's own code) with one-line errors.

    ``None`` when an engine already answers; else the ``dockerd`` started in its own session, so it
    outlives nel. It listens on ``$DOCKER_HOST`` when that names another unix socket.
    """
    if docker_answers():
        return None
    address = engine_address()
    if not address.startswith("unix://"):
        raise UsageError(f"DOCKER_HOST is {address}: nel starts only a local engine; start it on that host, or "
                         "unset DOCKER_HOST")
    if shutil.which("dockerd") is None:
        raise UsageError("the Docker engine is not installed (no dockerd on PATH): apt-get install docker.io, "
                         "or use --sandbox local")
    if os.geteuid() != 0:
        raise UsageError("starting dockerd needs root: sudo nel sandbox engine start (or systemctl start docker)")
    try:
        return ensure_dockerd(log_path, args=() if address in DEFAULT_HOSTS else ("--host", address))
    except DockerdFailed as exc:
        last = [line for line in str(exc).splitlines()[1:] if line.strip()][-1:]
        raise UsageError(f"dockerd did not start (its log: {log_path}){': ' + last[0].strip() if last else ''}") \
            from None


def ensure_dockerd(
    log_path: Path, timeout: float = START_TIMEOUT_S, args: Sequence[str] = ()
) -> subprocess.Popen[bytes] | None:
    """``None`` if an engine already answers, else the ``dockerd`` started in the background (logging to ``log_path``).

    Raises ``DockerdMissing`` when there is nothing to start and ``DockerdFailed``, with the
    log's tail, when the daemon does not answer within ``timeout`` seconds. ``args`` go to dockerd.
    """
    if docker_answers():
        return None
    binary = shutil.which("dockerd")
    if binary is None:
        raise DockerdMissing("the Docker engine is not running and dockerd is not installed")
    with open(log_path, "ab") as log:
        process = subprocess.Popen([binary, *args], stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                   stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if docker_answers():
            return process
        if process.poll() is not None:
            break
        time.sleep(0.5)
    tail = log_path.read_text(errors="replace")[-4000:]
    raise DockerdFailed(f"dockerd did not start within {timeout:.0f} s (exit {process.poll()}); its log:\n{tail}")
