"""The local sandbox: rlimits, a scrubbed environment, a temp dir that goes away, and a label that admits it is weaker.

Each behaviour runs with and without bubblewrap where bubblewrap works on this machine;
the namespace-only guarantees (no network, no host filesystem) are tested on the bwrap path.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import textwrap
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from workbench.errors import UsageError
from workbench.sandbox.base import Sandbox, open_sandboxes
from workbench.sandbox.local import BWRAP, PLAIN, LocalSandbox, LocalSandboxes, bwrap_problem
from workbench.sandbox.spec import SandboxSpec
from workbench.sandbox.uids import UID_BASE, UID_SLOTS, lease_uid, processes_of

pytestmark = pytest.mark.timeout(60)
T = TypeVar("T")
RUN_AS = 65534 if os.geteuid() == 0 else None
BWRAP_PROBLEM = bwrap_problem(RUN_AS)
needs_bwrap = pytest.mark.skipif(BWRAP_PROBLEM is not None, reason=f"bubblewrap unusable: {BWRAP_PROBLEM}")


@pytest.fixture(params=[False, pytest.param(True, marks=needs_bwrap)], ids=["plain", "bwrap"])
def use_bwrap(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def spec(**changes: Any) -> SandboxSpec:
    fields: dict[str, Any] = {"type": "local", "timeout": 10.0, "memory": "256m"}
    return SandboxSpec(**(fields | changes))


def in_sandbox(body: Callable[[Sandbox], Awaitable[T]], *, bwrap: bool, **changes: Any) -> T:
    async def main() -> T:
        async with LocalSandboxes(spec(**changes), bwrap=bwrap) as sandboxes, sandboxes.session() as box:
            return await body(box)

    return asyncio.run(main())


async def python(box: Sandbox, source: str, timeout: float | None = None) -> Any:
    await box.write_files({"probe.py": textwrap.dedent(source)})
    return await box.run(["python3", "probe.py"], timeout=timeout)


def test_the_label_says_the_isolation_is_weaker(use_bwrap: bool) -> None:
    result = in_sandbox(lambda box: box.run(["true"]), bwrap=use_bwrap)
    assert result.backend == (BWRAP if use_bwrap else PLAIN)
    assert "weaker isolation" in result.backend and result.backend.startswith("local")


def test_open_sandboxes_gives_the_local_backend_for_type_local() -> None:
    assert isinstance(open_sandboxes(spec()), LocalSandboxes)


def test_asking_for_bubblewrap_where_it_cannot_work_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("workbench.sandbox.local.bwrap_problem", lambda run_as: "bwrap is not installed")
    with pytest.raises(UsageError, match="bubblewrap was asked for but cannot be used: bwrap is not installed"):
        LocalSandboxes(spec(), bwrap=True)


def test_an_infinite_loop_is_killed_at_the_timeout(use_bwrap: bool) -> None:
    async def body(box: Sandbox) -> tuple[Any, Any]:
        return await box.run(["python3", "-c", "while True: pass"], timeout=1), await box.run(["echo", "ok"])

    looped, after = in_sandbox(body, bwrap=use_bwrap)
    assert looped.timed_out and looped.exit_code is None
    assert 900 <= looped.duration_ms < 3000
    assert after.stdout == "ok\n"


def test_the_memory_rlimit_stops_a_memory_bomb(use_bwrap: bool) -> None:
    result = in_sandbox(lambda box: python(box, "x = b'x' * 2**30"), bwrap=use_bwrap, memory="128m")
    assert result.oom_killed and result.exit_code == 1 and "MemoryError" in result.stderr


def test_the_environment_is_scrubbed_of_host_secrets(use_bwrap: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    result = in_sandbox(lambda box: python(box, "import os; print(sorted(os.environ))"), bwrap=use_bwrap)
    assert "sk-secret" not in result.stdout and "OPENAI_API_KEY" not in result.stdout
    assert set(eval(result.stdout)) <= {"PATH", "LANG", "HOME", "PYTHONDONTWRITEBYTECODE", "PWD"}


@pytest.mark.skipif(RUN_AS is None, reason="only root switches users")
def test_as_root_each_session_runs_as_an_unprivileged_uid_of_its_own(use_bwrap: bool) -> None:
    """A uid shared by all sessions (nobody) shared RLIMIT_NPROC too: one fork bomb failed the other attempts."""
    async def main() -> list[str]:
        async with LocalSandboxes(spec(concurrency=3), bwrap=use_bwrap) as sandboxes:
            all_open = asyncio.Barrier(3)

            async def one() -> str:
                async with sandboxes.session() as box:
                    async with asyncio.timeout(30):
                        await all_open.wait()  # all three open at once
                    return str((await python(box, "import os; print(os.getuid(), os.getgid())")).stdout)

            return list(await asyncio.gather(one(), one(), one()))

    ids = [tuple(map(int, out.split())) for out in asyncio.run(main())]
    assert len({uid for uid, _ in ids}) == 3 and all(uid == gid for uid, gid in ids)
    assert all(UID_BASE <= uid < UID_BASE + UID_SLOTS for uid, _ in ids)
    assert not any(processes_of(uid) for uid, _ in ids)


@pytest.mark.skipif(RUN_AS is None, reason="only root switches users")
def test_a_process_that_escaped_its_group_ends_with_its_session() -> None:
    """Without bubblewrap, setsid takes a process out of the group killed after each command: its uid catches it."""
    marker = f"nel-local-{uuid.uuid4().hex}"
    # The probe returns once its child has left the group: the group is killed as the command ends, and on a
    # loaded machine that could come before setsid had run (then nothing escaped and nothing was tested).
    source = f"""
    import os, subprocess, time
    child = subprocess.Popen(["setsid", "python3", "-c", "import time; time.sleep(60)", "{marker}"])
    deadline = time.monotonic() + 10
    while os.getpgid(child.pid) == os.getpgrp() and time.monotonic() < deadline:
        time.sleep(0.01)
    """

    async def main() -> list[str]:
        async with LocalSandboxes(spec(), bwrap=False) as sandboxes:
            async with sandboxes.session() as box:
                await python(box, source)
                escaped = _appearing(marker)
                await box.stop_processes()  # what a verdict does first in a box an agent used
                assert not _processes_mentioning(marker, settle_s=1)
                await python(box, source)
            return escaped

    assert asyncio.run(main()), "the probe did not escape its process group: nothing was tested"
    assert not _processes_mentioning(marker)


def test_the_temp_dir_is_removed_after_the_session_even_when_it_fails(use_bwrap: bool) -> None:
    roots: list[Path] = []

    async def main() -> None:
        async with LocalSandboxes(spec(), bwrap=use_bwrap) as sandboxes:
            async with sandboxes.session() as box:
                assert isinstance(box, LocalSandbox)
                roots.append(box.root)
                await box.write_files({"a/b.txt": "x"})
            with pytest.raises(KeyError):
                async with sandboxes.session() as box:
                    assert isinstance(box, LocalSandbox)
                    roots.append(box.root)
                    raise KeyError("boom")

    asyncio.run(main())
    assert len(roots) == 2 and not any(root.exists() for root in roots)


def test_cancelling_a_running_command_kills_it_and_removes_the_dir(use_bwrap: bool, tmp_path: Path) -> None:
    marker = f"nel-local-{uuid.uuid4().hex}"

    async def main() -> Path:
        async with LocalSandboxes(spec(), bwrap=use_bwrap) as sandboxes:
            seen: list[Path] = []

            async def attempt() -> None:
                async with sandboxes.session() as box:
                    assert isinstance(box, LocalSandbox)
                    seen.append(box.root)
                    await box.run(["python3", "-c", "import time; time.sleep(60)", marker])

            task = asyncio.create_task(attempt())
            for _ in range(100):  # until the command is running
                await asyncio.sleep(0.05)
                if _mentioning(marker):
                    break
            assert _mentioning(marker)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return seen[0]

    root = asyncio.run(main())
    assert not root.exists()
    assert not _processes_mentioning(marker)


def test_background_processes_die_with_their_command(use_bwrap: bool) -> None:
    marker = f"nel-local-{uuid.uuid4().hex}"
    source = f"""
    import subprocess
    subprocess.Popen(["python3", "-c", "import time; time.sleep(60)", "{marker}"])
    print("started")
    """
    result = in_sandbox(lambda box: python(box, source), bwrap=use_bwrap)
    assert result.stdout == "started\n"
    assert not _processes_mentioning(marker)


def test_files_round_trip_byte_for_byte(use_bwrap: bool) -> None:
    files: dict[str, bytes | str] = {"with space.bin": bytes(range(256)), "it's \"q\" $(x).txt": b"\x00\xff",
                                     "a/b/ü.txt": "ü ✓"}

    async def body(box: Sandbox) -> tuple[dict[str, bytes], list[str]]:
        await box.write_files(files)
        await box.run(["python3", "-c", "open('made.bin', 'wb').write(bytes(range(256)))"])
        return {name: await box.read_file(name) for name in [*files, "made.bin"]}, await box.list_files()

    back, listed = in_sandbox(body, bwrap=use_bwrap)
    as_bytes = {k: v.encode() if isinstance(v, str) else v for k, v in files.items()}
    assert back == {**as_bytes, "made.bin": bytes(range(256))}
    assert listed == sorted([*files, "made.bin"])


def test_stdin_and_workdir_are_passed(use_bwrap: bool) -> None:
    async def body(box: Sandbox) -> Any:
        await box.write_files({"sub/x.txt": "here"})
        return await box.run(["python3", "-c", "import sys; print(open('x.txt').read(), sys.stdin.read())"],
                             stdin=b"piped", workdir="sub")

    assert in_sandbox(body, bwrap=use_bwrap).stdout == "here piped\n"


def test_paths_outside_the_sandbox_are_refused() -> None:
    async def body(box: Sandbox) -> None:
        for bad in ("/etc/passwd", "../x", "a/../../x"):
            with pytest.raises(ValueError, match="inside the working directory"):
                await box.write_files({bad: "x"})
        await box.run(["ln", "-s", "/etc", "link"])
        with pytest.raises(ValueError, match="outside the working directory"):
            await box.read_file("link/hostname")
        with pytest.raises(ValueError, match="outside the working directory"):
            await box.write_files({"link/evil": "x"})

    in_sandbox(body, bwrap=False)


@needs_bwrap
def test_with_bubblewrap_there_is_no_network_and_no_host_filesystem() -> None:
    probe = """
    import os, socket
    try:
        socket.create_connection(("1.1.1.1", 53), timeout=2)
        print("reached")
    except OSError:
        print("blocked")
    print(sorted(os.listdir("/")), os.path.exists("/root"), os.path.exists("/etc/passwd"), os.getcwd())
    """
    result = in_sandbox(lambda box: python(box, probe), bwrap=True)
    lines = result.stdout.splitlines()
    assert lines[0] == "blocked"
    assert "False False /work" in lines[1] and "'home'" not in lines[1] and "'root'" not in lines[1]


def test_without_bubblewrap_the_weakness_is_real_and_labelled() -> None:
    """The plain backend does not hide the host filesystem: the label is the only protection of the reader."""
    result = in_sandbox(lambda box: python(box, "import os; print(os.path.exists('/usr/bin'))"), bwrap=False)
    assert result.stdout == "True\n" and result.backend == PLAIN


def _processes_mentioning(marker: str, settle_s: float = 3.0) -> list[str]:
    """Processes whose command line holds ``marker``, after giving killed ones ``settle_s`` to go.

    Under bubblewrap the command's processes die with its pid namespace, a moment after bwrap
    itself is killed (``--die-with-parent``), not at the instant the run returns.
    """
    deadline = time.monotonic() + settle_s
    while (found := _mentioning(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def _appearing(marker: str, timeout_s: float = 10.0) -> list[str]:
    """Processes whose command line holds ``marker``, once there are any (none after ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while not (found := _mentioning(marker)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return found


def test_a_cancel_at_any_moment_of_a_commands_start_ends_it(use_bwrap: bool) -> None:
    # Python 3.11's subprocess_exec, cancelled after the process started but before its pipes were connected, never
    # returned (its transport waits for pipes that never connect): under load, CI's cancel of a running command
    # landed there and the attempt hung for good. Cancels 0, 0.5, 1 ... 20 ms into the attempt, each after a
    # look through /proc that holds the event loop while the command starts, land there within a few steps.
    marker = f"nel-local-{uuid.uuid4().hex}"

    async def main() -> None:
        async with LocalSandboxes(spec(), bwrap=use_bwrap) as sandboxes:
            async def attempt() -> None:
                async with sandboxes.session() as box:
                    await box.run(["python3", "-c", "import time; time.sleep(60)", marker])

            for step in range(41):
                task = asyncio.create_task(attempt())
                await asyncio.sleep(step * 0.0005)
                _mentioning(marker)
                task.cancel()
                done, _ = await asyncio.wait({task}, timeout=10)
                assert task in done, f"the attempt cancelled {step * 0.5} ms in never ended"

    asyncio.run(main())
    deadline = time.monotonic() + 10
    while _mentioning(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _mentioning(marker)


def _mentioning(marker: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(pid)
    return found


@pytest.mark.skipif(RUN_AS is None, reason="only root leases uids")
def test_a_uid_whose_holder_died_is_cleaned_before_it_is_leased_again() -> None:
    """A nel killed with -9 leaves its lease file saying "in use" and maybe processes: the next lease ends them,
    and skips the uid while a process of it is not yet reaped (it would count against the new holder's limit)."""
    start = UID_SLOTS - 7
    lease = lease_uid(start=start)
    leftover = subprocess.Popen(["sleep", "60"], user=lease.uid, group=lease.uid, extra_groups=[],
                                start_new_session=True)
    leases = []
    try:
        os.close(lease.fd)  # what the death of the holder does: the flock goes, "in use" stays
        leases.append(lease_uid(start=start))
        assert leftover.wait(5) == -9  # ended by the lease...
        assert leases[0].uid != lease.uid  # ...which took another uid: the zombie was not reaped yet
        leases.append(lease_uid(start=start))  # reaped now (wait): the uid is clean, and leased again
        assert leases[1].uid == lease.uid and not processes_of(lease.uid, zombies=True)
    finally:
        if leftover.poll() is None:
            leftover.kill()
            leftover.wait()
        for held in leases:
            held.release()
