"""The docker sandbox against the real engine: what sandboxed code cannot do, and that nothing is left behind."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest
from waiting import wait_until_async

from workbench.sandbox.base import Sandbox, Sandboxes
from workbench.sandbox.daemon import DockerdFailed, DockerdMissing, ensure_dockerd
from workbench.sandbox.docker import LABEL, DockerSandbox, DockerSandboxes, remove_containers
from workbench.sandbox.image import ensure_image
from workbench.sandbox.spec import SandboxSpec

pytestmark = pytest.mark.timeout(300)  # the first test may build the image (about a minute)
T = TypeVar("T")


def containers_labelled(key: str, value: str) -> list[str]:
    import docker

    client = docker.from_env()
    try:
        return [c["Id"] for c in client.api.containers(all=True, filters={"label": f"{key}={value}"})]
    finally:
        client.close()


def running_in_container(key: str, value: str, command: str) -> bool:
    """A process whose command line holds ``command`` runs in a container labelled ``key=value``."""
    import docker

    client = docker.from_env()
    try:
        for c in client.api.containers(filters={"label": f"{key}={value}"}):
            if any(command in " ".join(p) for p in client.api.top(c["Id"]).get("Processes") or []):
                return True
        return False
    finally:
        client.close()


def in_sandbox(spec: SandboxSpec, body: Callable[[Sandbox], Awaitable[T]]) -> T:
    """Run ``body`` in one docker session of ``spec``; the provider is closed afterwards."""

    async def main() -> T:
        async with DockerSandboxes(spec) as sandboxes, sandboxes.session() as box:
            return await body(box)

    return asyncio.run(main())


def spec(**changes: Any) -> SandboxSpec:
    base: dict[str, Any] = {"timeout": 10.0, "memory": "256m", "concurrency": 2, "labels": {"nel.test": "docker"}}
    return SandboxSpec(**(base | changes))


async def python(box: Sandbox, source: str, timeout: float | None = None) -> Any:
    await box.write_files({"probe.py": textwrap.dedent(source)})
    return await box.run(["python3", "probe.py"], timeout=timeout)


def bridge_gateway() -> str:
    """The docker host as containers on the default bridge see it (the subnet's first address if not stated)."""
    import ipaddress

    import docker

    client = docker.from_env()
    try:
        config = client.networks.get("bridge").attrs["IPAM"]["Config"][0]
    finally:
        client.close()
    return str(config.get("Gateway") or next(ipaddress.ip_network(config["Subnet"]).hosts()))


class TestStartingTheEngine:
    """The fixture's contract: start dockerd if it is installed, skip only if it is not, fail with its log."""

    @pytest.fixture
    def no_engine(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
        monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
        monkeypatch.setenv("PATH", str(tmp_path))
        return tmp_path

    def test_without_an_engine_or_dockerd_it_says_dockerd_is_missing(self, no_engine: Path) -> None:
        with pytest.raises(DockerdMissing, match="dockerd is not installed"):
            ensure_dockerd(no_engine / "dockerd.log")

    def test_a_dockerd_that_will_not_start_fails_with_its_log(self, no_engine: Path) -> None:
        fake = no_engine / "dockerd"
        fake.write_text("#!/bin/sh\necho 'failed to start daemon: no cgroups here' >&2\nexit 1\n")
        fake.chmod(0o755)
        with pytest.raises(DockerdFailed, match=r"(?s)did not start.*no cgroups here"):
            ensure_dockerd(no_engine / "dockerd.log", timeout=5)

    def test_a_running_engine_is_left_alone(self, docker_image: str, tmp_path: Path) -> None:
        assert ensure_dockerd(tmp_path / "dockerd.log") is None


def test_ensure_image_returns_the_existing_image_at_once(docker_image: str) -> None:
    import docker

    started = time.monotonic()
    image_id = ensure_image(docker_image)
    assert time.monotonic() - started < 5
    client = docker.from_env()
    try:
        assert client.images.get(docker_image).id == image_id
    finally:
        client.close()


def test_a_missing_image_is_a_usage_error_that_says_how_to_build_it_and_nothing_is_pulled(docker_image: str) -> None:
    from workbench.errors import UsageError

    with pytest.raises(UsageError, match=r"sandbox.image: 'nel-sandbox:no-such-tag' is not in the local Docker engine"):
        in_sandbox(spec(image="nel-sandbox:no-such-tag", labels={"nel.test": "missing"}), lambda box: box.list_files())
    assert not containers_labelled("nel.test", "missing")


class TestNetwork:
    def test_with_network_none_code_reaches_neither_the_internet_nor_the_docker_host(self, docker_image: str) -> None:
        probe = f"""
        import socket
        for host, port in (("1.1.1.1", 53), ("{bridge_gateway()}", 2375), ("{bridge_gateway()}", 22)):
            try:
                socket.create_connection((host, port), timeout=2).close()
                print("reached", host, port)
            except OSError as exc:
                print("blocked", host, port, exc.errno)
        try:
            socket.getaddrinfo("deb.debian.org", 80)
            print("resolved")
        except OSError:
            print("no dns")
        """
        result = in_sandbox(spec(), lambda box: python(box, probe))
        assert result.exit_code == 0, result.stderr
        assert "reached" not in result.stdout and "resolved" not in result.stdout
        assert result.stdout.count("blocked") == 3 and "no dns" in result.stdout

    def test_the_only_interface_is_loopback(self, docker_image: str) -> None:
        result = in_sandbox(spec(), lambda box: python(box, "import os; print(sorted(os.listdir('/sys/class/net')))"))
        assert result.stdout.strip() == "['lo']"


class TestFilesystem:
    def test_host_files_are_invisible_and_only_copied_files_exist(self, docker_image: str) -> None:
        marker = f"nel-sandbox-marker-{uuid.uuid4().hex}"
        host_files = [Path("/tmp") / marker, Path.home() / marker]
        for path in host_files:
            path.write_text("host secret")
        try:

            async def body(box: Sandbox) -> tuple[Any, list[str]]:
                await box.write_files({"given.txt": "copied in"})
                seen = await python(
                    box,
                    f"""
                    import os
                    for path in ("/tmp/{marker}", "/root/{marker}", "{Path.home()}/{marker}"):
                        print(path, os.path.exists(path))
                    print("tmp:", os.listdir("/tmp"))
                    print("work:", sorted(os.listdir("/work")))
                    """,
                )
                return seen, await box.list_files()

            result, files = in_sandbox(spec(), body)
        finally:
            for path in host_files:
                path.unlink()
        assert result.exit_code == 0, result.stderr
        assert "True" not in result.stdout
        assert "tmp: []" in result.stdout and "work: ['given.txt', 'probe.py']" in result.stdout
        assert files == ["given.txt", "probe.py"]

    def test_code_runs_as_nobody_on_a_read_only_root_without_capabilities(self, docker_image: str) -> None:
        probe = """
        import os
        print("uid", os.getuid(), os.getgid())
        for path in ("/etc/evil", "/usr/evil", "/evil"):
            try:
                open(path, "w")
                print("wrote", path)
            except OSError as exc:
                print("refused", path)
        with open("/proc/self/status") as f:
            print([line for line in f if line.startswith(("CapEff", "NoNewPrivs"))])
        """
        result = in_sandbox(spec(), lambda box: python(box, probe))
        assert "uid 65534 65534" in result.stdout
        assert "wrote" not in result.stdout and result.stdout.count("refused") == 3
        assert "CapEff:\\t0000000000000000" in result.stdout and "NoNewPrivs:\\t1" in result.stdout

    def test_files_round_trip_byte_for_byte_whatever_their_names(self, docker_image: str) -> None:
        files = {
            "plain.txt": b"hello\n",
            "with space.py": bytes(range(256)),
            "it's \"quoted\" $(rm -rf ~) `x`.txt": b"\x00\xff" * 1000,
            "nested/dir/ünïcode ✓.bin": os.urandom(300_000),
        }

        async def body(box: Sandbox) -> tuple[dict[str, bytes], list[str], Any]:
            await box.write_files(files)
            # the sandboxed code writes a file of its own, read back out through the API
            made = await python(box, "open('made by code.bin', 'wb').write(bytes(range(255, -1, -1)) * 3)")
            back = {name: await box.read_file(name) for name in [*files, "made by code.bin"]}
            return back, await box.list_files(), made

        back, listed, made = in_sandbox(spec(), body)
        assert made.exit_code == 0, made.stderr
        assert back == {**files, "made by code.bin": bytes(range(255, -1, -1)) * 3}
        assert listed == sorted([*files, "made by code.bin", "probe.py"])

    def test_a_missing_file_reads_as_file_not_found(self, docker_image: str) -> None:
        async def body(box: Sandbox) -> None:
            with pytest.raises(FileNotFoundError):
                await box.read_file("nothing here.txt")

        in_sandbox(spec(), body)

    def test_stdin_reaches_the_command(self, docker_image: str) -> None:
        async def body(box: Sandbox) -> Any:
            return await box.run(["python3", "-c", "import sys; print(sys.stdin.read().upper())"], stdin=b"it's fine")

        result = in_sandbox(spec(), body)
        assert result.stdout == "IT'S FINE\n"


class TestLimits:
    def test_an_infinite_loop_is_killed_at_the_timeout_and_the_sandbox_stays_usable(self, docker_image: str) -> None:
        async def body(box: Sandbox) -> tuple[Any, Any]:
            looped = await box.run(["python3", "-c", "while True: pass"], timeout=2)
            after = await box.run(["python3", "-c", "print('still here')"])
            return looped, after

        looped, after = in_sandbox(spec(), body)
        assert looped.timed_out and looped.exit_code is None and not looped.oom_killed
        assert 1900 <= looped.duration_ms < 4000
        assert after.exit_code == 0 and after.stdout == "still here\n"

    def test_a_memory_bomb_is_stopped_at_the_memory_limit(self, docker_image: str) -> None:
        async def body(box: Sandbox) -> tuple[Any, Any]:
            bomb = await python(box, "chunks = []\nwhile True: chunks.append(b'x' * 2**24)")
            after = await box.run(["python3", "-c", "print(len(b'x' * 2**24))"])
            return bomb, after

        bomb, after = in_sandbox(spec(memory="128m"), body)
        assert bomb.oom_killed and bomb.exit_code == 137 and not bomb.timed_out
        assert after.ok and not after.oom_killed

    def test_the_pids_limit_caps_how_many_processes_code_can_start(self, docker_image: str) -> None:
        probe = """
        import os, time
        started = 0
        try:
            for _ in range(500):
                if os.fork() == 0:
                    time.sleep(30)
                    os._exit(0)
                started += 1
        except OSError as exc:
            print("refused after", started, exc.errno)
        """
        result = in_sandbox(spec(pids_limit=32, timeout=10), lambda box: python(box, probe, timeout=5))
        assert "refused after" in result.stdout, result
        assert int(result.stdout.split()[2]) < 32

    def test_a_fork_bomb_ends_at_the_timeout_and_the_host_is_unharmed(self, docker_image: str) -> None:
        bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
        started = time.monotonic()
        result = in_sandbox(spec(pids_limit=64), lambda box: python(box, bomb, timeout=3))
        assert result.timed_out
        assert time.monotonic() - started < 30
        assert subprocess.run(["true"], check=False).returncode == 0  # the host can still start processes

    def test_output_is_truncated_keeping_head_and_tail(self, docker_image: str) -> None:
        source = "import sys\nprint('FIRST')\nsys.stdout.write('x' * 3_000_000)\nprint('LAST')"
        result = in_sandbox(spec(), lambda box: python(box, source))
        assert result.stdout.startswith("FIRST") and result.stdout.rstrip().endswith("LAST")
        assert "bytes truncated" in result.stdout and len(result.stdout) < 100_000


class TestNothingLeftBehind:
    @pytest.mark.parametrize(
        "outcome", ["success", "failure", "timeout", "exception in the caller"]
    )
    def test_no_container_is_left_whatever_the_outcome(self, docker_image: str, outcome: str) -> None:
        run_id = uuid.uuid4().hex
        argv = {
            "success": ["true"],
            "failure": ["python3", "-c", "raise SystemExit(3)"],
            "timeout": ["sleep", "60"],
            "exception in the caller": ["true"],
        }[outcome]

        async def main() -> None:
            async with DockerSandboxes(spec(labels={"nel.test": run_id})) as sandboxes:
                async with sandboxes.session() as box:
                    assert containers_labelled("nel.test", run_id)
                    await box.run(argv, timeout=1)
                    if outcome == "exception in the caller":
                        raise KeyError("boom")
                assert not containers_labelled("nel.test", run_id)

        if outcome == "exception in the caller":
            with pytest.raises(KeyError):
                asyncio.run(main())
        else:
            asyncio.run(main())
        assert not containers_labelled("nel.test", run_id)

    def test_cancelling_the_awaiting_task_removes_the_container(self, docker_image: str) -> None:
        run_id = uuid.uuid4().hex

        async def attempt(sandboxes: DockerSandboxes, ready: asyncio.Event) -> None:
            async with sandboxes.session() as box:
                ready.set()
                await box.run(["sleep", "60"])

        async def main() -> None:
            sandboxes = DockerSandboxes(spec(labels={"nel.test": run_id}))
            ready = asyncio.Event()
            task = asyncio.create_task(attempt(sandboxes, ready))
            await asyncio.wait_for(ready.wait(), 30)
            await wait_until_async(lambda: running_in_container("nel.test", run_id, "sleep 60"), 30,
                                   what="the command to run in the container")
            assert containers_labelled("nel.test", run_id)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert not containers_labelled("nel.test", run_id)  # removed before the cancel completed
            await sandboxes.close()

        asyncio.run(main())

    def test_cancelling_while_the_container_is_being_created_removes_it(self, docker_image: str) -> None:
        run_id = uuid.uuid4().hex

        async def main() -> None:
            async with DockerSandboxes(spec(labels={"nel.test": run_id})) as sandboxes:

                async def attempt() -> None:
                    async with sandboxes.session():
                        pass

                task = asyncio.create_task(attempt())
                await asyncio.sleep(0.05)  # inside the create call
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                assert not containers_labelled("nel.test", run_id)

        asyncio.run(main())

    def test_ctrl_c_on_a_running_eval_removes_the_container(self, docker_image: str, tmp_path: Path) -> None:
        run_id = uuid.uuid4().hex
        script = tmp_path / "attempt.py"
        script.write_text(
            textwrap.dedent(f"""
            import asyncio
            from workbench.sandbox.docker import DockerSandboxes
            from workbench.sandbox.spec import SandboxSpec

            async def main():
                async with DockerSandboxes(SandboxSpec(labels={{"nel.test": "{run_id}"}})) as sandboxes:
                    async with sandboxes.session() as box:
                        print("running", flush=True)
                        await box.run(["sleep", "60"], timeout=60)

            asyncio.run(main())
            """)
        )
        child = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            assert child.stdout is not None
            assert child.stdout.readline() == b"running\n"
            assert containers_labelled("nel.test", run_id)
            child.send_signal(signal.SIGINT)
            _, err = child.communicate(timeout=60)
        finally:
            child.kill()
        assert b"KeyboardInterrupt" in err
        assert not containers_labelled("nel.test", run_id)

    def test_remove_containers_sweeps_leftovers_by_label(self, docker_image: str) -> None:
        import docker

        client = docker.from_env()
        try:
            owner = f"leftover-{uuid.uuid4().hex}"
            client.containers.create(docker_image, ["true"], labels={LABEL: "1", "nel.sandbox.owner": owner})
            assert remove_containers(client, owner) == 1
            assert not containers_labelled("nel.sandbox.owner", owner)
        finally:
            client.close()

    def test_remove_containers_also_sweeps_a_work_volume_left_dangling(self, docker_image: str) -> None:
        import docker

        client = docker.from_env()

        async def main() -> str:
            async with DockerSandboxes(spec()) as sandboxes, sandboxes.session() as box:
                assert isinstance(box, DockerSandbox)
                mounts = client.api.inspect_container(box.container_id)["Mounts"]
                volume = next(m["Name"] for m in mounts if m["Destination"] == "/work")
                client.api.remove_container(box.container_id, force=True)  # without v=True, as `docker rm` does
                remove_containers(client, cast(DockerSandboxes, sandboxes).owner)
                return str(volume)

        try:
            volume = asyncio.run(main())
            assert volume not in [v["Name"] for v in client.api.volumes()["Volumes"] or []]
        finally:
            client.close()


class TestSessions:
    def test_concurrent_sessions_see_neither_each_others_files_nor_processes(self, docker_image: str) -> None:
        probe = """
        import os, time
        time.sleep(1)  # both sessions are alive now
        print(sorted(os.listdir("/work")))
        print(len([p for p in os.listdir("/proc") if p.isdigit()]))
        """

        async def one(sandboxes: Sandboxes, secret: str) -> Any:
            async with sandboxes.session() as box:
                await box.write_files({f"{secret}.txt": secret})
                return await python(box, probe)

        async def main() -> list[Any]:
            async with DockerSandboxes(spec(concurrency=2)) as sandboxes:
                return list(await asyncio.gather(one(sandboxes, "alpha"), one(sandboxes, "beta")))

        alpha, beta = asyncio.run(main())
        assert alpha.stdout.splitlines()[0] == "['alpha.txt', 'probe.py']"
        assert beta.stdout.splitlines()[0] == "['beta.txt', 'probe.py']"
        # PID 1 (the reaper) and the probe itself: nothing of the other session
        assert alpha.stdout.splitlines()[1] == beta.stdout.splitlines()[1] == "2"

    def test_concurrency_bounds_how_many_sandboxes_are_open(self, docker_image: str) -> None:
        run_id = uuid.uuid4().hex
        peak = 0

        async def one(sandboxes: Sandboxes) -> None:
            nonlocal peak
            async with sandboxes.session() as box:
                peak = max(peak, len(await asyncio.to_thread(containers_labelled, "nel.test", run_id)))
                await box.run(["sleep", "0.5"])

        async def main() -> None:
            async with DockerSandboxes(spec(concurrency=2, labels={"nel.test": run_id})) as sandboxes:
                await asyncio.gather(*(one(sandboxes) for _ in range(5)))

        asyncio.run(main())
        assert peak == 2

    def test_the_event_loop_keeps_running_while_sandboxes_start_run_and_stop(self, docker_image: str) -> None:
        """Every SDK call runs on a thread: a ticker on the loop is never held up for long."""
        gaps: list[float] = []

        async def ticker(stop: asyncio.Event) -> None:
            last = time.perf_counter()
            while not stop.is_set():
                await asyncio.sleep(0.01)
                now = time.perf_counter()
                gaps.append(now - last)
                last = now

        async def main() -> None:
            stop = asyncio.Event()
            ticking = asyncio.create_task(ticker(stop))
            async with DockerSandboxes(spec()) as sandboxes, sandboxes.session() as box:
                await box.write_files({"a.py": "import time; time.sleep(1)"})
                await box.run(["python3", "a.py"])
                await box.read_file("a.py")
            stop.set()
            await ticking

        asyncio.run(main())
        assert len(gaps) > 50 and max(gaps) < 0.25


class TestPool:
    def test_a_pooled_container_is_reset_between_attempts(self, docker_image: str) -> None:
        leave_behind = """
        import os
        open("left.txt", "w").write("mine")
        open("/tmp/left.txt", "w").write("mine")
        if os.fork() == 0:  # a daemon that outlives the command
            os.setsid()
            for fd in (0, 1, 2):
                os.close(fd)
            os.execv("/bin/sleep", ["sleep", "1000"])
        """
        look = """
        import os
        print(sorted(os.listdir("/work")), os.listdir("/tmp"))
        print(sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
        """

        async def main() -> tuple[str, str, Any]:
            async with DockerSandboxes(spec(mode="pool", concurrency=1)) as sandboxes:
                async with sandboxes.session() as first:
                    assert isinstance(first, DockerSandbox)
                    await python(first, leave_behind)
                async with sandboxes.session() as second:
                    assert isinstance(second, DockerSandbox)
                    return first.container_id, second.container_id, await python(second, look)

        first_id, second_id, seen = asyncio.run(main())
        assert first_id == second_id  # the same warm container
        lines = seen.stdout.splitlines()
        assert lines[0] == "['probe.py'] []"
        assert len(lines[1].split(",")) == 2  # PID 1 and the probe: the daemon is gone

    def test_pool_containers_are_removed_on_close(self, docker_image: str) -> None:
        run_id = uuid.uuid4().hex

        async def main() -> None:
            async with DockerSandboxes(spec(mode="pool", labels={"nel.test": run_id})) as sandboxes:
                async with sandboxes.session() as box:
                    await box.run(["true"])
                assert len(containers_labelled("nel.test", run_id)) == 1  # kept warm

        asyncio.run(main())
        assert not containers_labelled("nel.test", run_id)


class TestBeforeAVerdict:
    """What an agent started in the background must not be running when the harness starts (it could watch for
    the harness's secrets): ``stop_processes`` ends every process of the sandbox user but PID 1."""

    def test_stop_processes_ends_what_earlier_commands_left_running(self, docker_image: str) -> None:
        look = "import os; print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))"

        async def body(box: Sandbox) -> tuple[Any, Any]:
            await box.run(["sh", "-c", "sleep 60 >/dev/null 2>&1 & setsid sleep 60 >/dev/null 2>&1 &"])
            before = await box.run(["python3", "-c", look])
            await box.stop_processes()
            return before, await box.run(["python3", "-c", look])

        before, after = in_sandbox(spec(), body)
        assert len(eval(before.stdout)) == 4  # PID 1, the two sleeps, the probe
        assert len(eval(after.stdout)) == 2  # PID 1 and the probe
