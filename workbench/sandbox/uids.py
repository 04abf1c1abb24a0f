"""A user id of its own for each local sandbox, leased from a reserved range, so attempts cannot reach each other.

RLIMIT_NPROC counts every process of a user: when all local sandboxes ran as ``nobody``, one attempt's fork
bomb used up the count and the other attempts, correct ones included, failed to start a process. With a uid
per sandbox the limit is per attempt, each sandbox's directory (mode 0700) is closed to the others, and
``kill(-1)`` run as that uid ends exactly the sandbox's processes, those that escaped its process group with
``setsid`` included.

The range is ``UID_BASE`` .. ``UID_BASE + UID_SLOTS - 1`` (2000000000..2000004095: no passwd entries, inside the
block systemd leaves unused, between container ranges and 2^31). A lease is an ``flock`` on a file per uid in a
root-only directory, so concurrent nel processes (shard workers) never share a uid, and a process killed with
``kill -9`` frees its leases with its file descriptors. The file says how its last holder left the uid:
``clean`` (nothing of it left, checked at release), ``dirty`` (zombies not yet reaped: they count against the
limit, and some container and VM inits reap orphans late) or ``in use`` (the holder died mid-session). Only a
clean uid is leased without looking; any other is first cleaned and checked, and skipped if it is not clean yet.
Only root leases uids (only root can switch to them).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from workbench.errors import UsageError

UID_BASE = 2_000_000_000
UID_SLOTS = 4096
PROBE_UID = UID_BASE + UID_SLOTS
"""Not leased: the uid the bubblewrap probe runs as."""
LEASE_DIRS = (Path("/run/nel-sandbox-uids"), Path(tempfile.gettempdir()) / "nel-sandbox-uids-root")
IN_USE, CLEAN, DIRTY = b"in use\n", b"clean\n", b"dirty\n"
SEARCH_PATH = "/usr/local/bin:/usr/bin:/bin"
KILL_ALL = """
import os, signal, time
me, key = os.getpid(), b"\\nUid:\\t%d\\t" % os.getuid()
def alive():  # this uid's processes but this one, zombies aside (kill(-1) cannot tell: it counts every process)
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        try:
            with open(f"/proc/{pid}/status", "rb") as f:
                head = f.read(1024)
        except OSError:
            continue
        if key in head and b"\\nState:\\tZ" not in head:
            found.append(pid)
    return found
for _ in range(200):  # again while forks race the kill; kill(-1) never signals the caller
    if not alive():
        break
    os.kill(-1, signal.SIGKILL)
    time.sleep(0.005)
"""


@dataclass
class UidLease:
    """One leased uid; ``release()`` ends its processes and frees it."""

    uid: int
    fd: int

    def release(self, *, used: bool = True) -> None:
        """End the uid's processes, record whether it is clean, free it; ``used=False``: no command ran as it."""
        if self.fd < 0:
            return
        try:
            state = CLEAN if not used or kill_all_of(self.uid) else DIRTY
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, state, 0)
        finally:
            os.close(self.fd)  # drops the flock
            self.fd = -1


def lease_uid(start: int = 0) -> UidLease:
    """A clean uid of the range (searching from ``start``), locked for this process until released."""
    folder = _lease_dir()
    for i in range(UID_SLOTS):
        uid = UID_BASE + (start + i) % UID_SLOTS
        fd = os.open(folder / str(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            if os.pread(fd, 16, 0) not in (CLEAN, b"") and not kill_all_of(uid):
                os.close(fd)  # zombies not reaped yet: they would count against this lease's process limit
                continue
            os.ftruncate(fd, 0)
            os.pwrite(fd, IN_USE, 0)
        except BaseException:
            os.close(fd)
            raise
        return UidLease(uid, fd)
    raise UsageError(f"sandbox: all {UID_SLOTS} local sandbox uids ({UID_BASE}..) are in use on this machine")


def kill_all_of(uid: int) -> bool:
    """SIGKILL every process running as ``uid``; whether none is left, zombies included.

    The kill is ``kill(-1)`` from a helper running as ``uid`` (so a process that ends and whose pid is reused
    meanwhile is never hit), started only when a live process is found: usually there is none.
    """
    live, dead = _scan(uid)
    if live:
        python = shutil.which("python3", path=SEARCH_PATH) or shutil.which("python3")
        if python is not None:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                subprocess.run([python, "-S", "-c", KILL_ALL], user=uid, group=uid, extra_groups=[], env={},
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               timeout=10, check=False, cwd="/")
        live, dead = _scan(uid)
    return not live and not dead


def processes_of(uid: int, *, zombies: bool = False) -> list[int]:
    """Pids of the processes whose real uid is ``uid``: the live ones, and with ``zombies`` the unreaped dead too."""
    live, dead = _scan(uid)
    return sorted(live + dead) if zombies else live


def _scan(uid: int) -> tuple[list[int], list[int]]:
    """``(live, zombies)`` of ``uid``, from each process's status (its real uid, whatever its dumpable flag)."""
    live: list[int] = []
    dead: list[int] = []
    if not os.path.isdir("/proc"):
        return live, dead
    key = b"\nUid:\t%d\t" % uid
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:  # os.open and os.read: a third of the cost of open().read() here, and this runs at every release
            fd = os.open(f"/proc/{entry.name}/status", os.O_RDONLY)
            try:
                head = os.read(fd, 1024)
            finally:
                os.close(fd)
        except OSError:  # gone meanwhile
            continue
        if key in head:
            (dead if b"\nState:\tZ" in head else live).append(int(entry.name))
    return live, dead


def _lease_dir() -> Path:
    """The first usable root-only directory for the lease files (refusing one another user could have planted)."""
    problems = []
    for folder in LEASE_DIRS:
        try:
            folder.mkdir(mode=0o700, exist_ok=True)
            info = os.lstat(folder)
        except OSError as exc:
            problems.append(f"{folder}: {exc.strerror or exc}")
            continue
        if stat.S_ISDIR(info.st_mode) and info.st_uid == 0 and not info.st_mode & 0o077:
            return folder
        problems.append(f"{folder}: not a directory owned by root with mode 0700")
    raise UsageError(f"sandbox: no place to lease local sandbox uids ({'; '.join(problems)})")
