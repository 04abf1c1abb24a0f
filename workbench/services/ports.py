"""Ports for started servers: a free one when none is configured; who holds a configured one that is taken."""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

from workbench.errors import UsageError
from workbench.secrets import redact_text


def free_port(host: str) -> int:
    """A port nobody listens on now (the kernel's pick); the server binds it a moment later."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def check_free(host: str, port: int, where: str) -> None:
    """``UsageError`` naming the port and the process holding it when ``port`` cannot be bound."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as a server binds it: TIME_WAIT is no holder
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise UsageError(f"{where}: cannot listen on {host}:{port} ({exc.strerror})") from None
            holder = port_holder(port)
            by = f" by {holder}" if holder else " (by a process this user cannot see)"
            raise UsageError(f"{where}: port {port} is already in use{by}; free it or leave port unset "
                             "so nel picks a free one") from None


def port_holder(port: int) -> str | None:
    """``pid 123 (python3 -m http.server)`` listening on ``port``, read from /proc; None when not visible."""
    inodes = _listening_inodes(port)
    if not inodes:
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:[") and target[8:-1] in inodes:
                    return f"pid {proc.name} ({redact_text(_cmdline(proc))})"
        except OSError:  # gone, or another user's
            continue
    return None


def _listening_inodes(port: int) -> set[str]:
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                inodes.add(inode)
    return inodes


def _cmdline(proc: Path) -> str:
    try:
        text = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    return text[:120] or "?"
