"""``nel serve`` inside a SLURM job writes ``endpoint.txt``: ``HOST:PORT`` that Gym's training nodes reach it at
(``gym://$(cat endpoint.txt)``, NeMo Evaluator's pattern), in the job's working directory, which the submitter's
shared filesystem holds. Written once the server listens (atomically: a reader never sees half a line) and removed
when it stops, so a stale address is never left behind. docs/slurm.md."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import sys
from pathlib import Path

from workbench.serve.runner import is_loopback

ENDPOINT_FILE = "endpoint.txt"


def in_slurm_job() -> bool:
    return bool(os.environ.get("SLURM_JOB_ID"))


def endpoint_of(sock: socket.socket, host: str) -> str:
    """``NODE:PORT``: the node's name when bound to every address (``0.0.0.0``, ``::``), else the bound host."""
    port = sock.getsockname()[1]
    try:
        wildcard = ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        wildcard = False
    name = os.environ.get("SLURMD_NODENAME") or socket.gethostname() if wildcard else host
    return f"{name}:{port}"


def write_endpoint(sock: socket.socket, host: str, directory: Path | None = None) -> tuple[Path, str] | None:
    """Write ``endpoint.txt`` in ``directory`` (default: here) and say where, on stderr; a loopback server, which
    no other node reaches, gets a note instead. Returns the file and what it holds."""
    job = os.environ.get("SLURM_JOB_ID")
    if is_loopback(host):
        print(f"nel: SLURM job {job}: no {ENDPOINT_FILE}: --host {host} is reachable from this node only; serve "
              "with --host 0.0.0.0 --allow-remote --auth-token ... for Gym's training nodes", file=sys.stderr,
              flush=True)
        return None
    path = (directory or Path.cwd()) / ENDPOINT_FILE
    written = endpoint_of(sock, host)
    partial = path.with_name(f".{ENDPOINT_FILE}.{os.getpid()}")
    partial.write_text(written + "\n", encoding="utf-8")
    partial.replace(path)
    print(f"nel: SLURM job {job}: wrote {path} ({written}; Gym's training nodes: gym://$(cat {path.name}))",
          file=sys.stderr, flush=True)
    return path, written


def remove_endpoint(path: Path, written: str) -> None:
    """Remove ``path`` if it still holds what this server wrote (another server may have replaced it)."""
    with contextlib.suppress(OSError):
        if path.read_text(encoding="utf-8").strip() == written:
            path.unlink()
