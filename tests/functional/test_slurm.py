"""`nel eval run CONFIG` with `cluster: {type: slurm}` against a real SLURM: a one-node cluster brought up in a
temporary directory (munged, slurmctld and slurmd with their own config, sockets, state and logs; nothing under
/etc is read or written), the generated scripts submitted as they are, the merge job waited for, the store read.

Skipped when SLURM or munge is not installed (`make system` installs them); a cluster that is installed but
will not start fails with the daemons' logs, so a broken setup shows."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from nel_helpers import NEL, clean_env, free_port, wait_for

from workbench.mock import MockHandle
from workbench.store import open_store

pytestmark = pytest.mark.timeout(180)

PROBLEMS, REPEATS, SHARDS = 6, 2, 2
START_TIMEOUT_S, JOB_TIMEOUT_S = 30.0, 60.0
SECRET = "sk-nel-test-secret-0123456789"
DAEMONS = ("sbatch", "squeue", "scontrol", "sinfo", "slurmctld", "slurmd", "munged")


@dataclass
class Cluster:
    """A running one-node SLURM cluster: ``env`` points the SLURM commands at it."""

    root: Path
    env: dict[str, str]
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=30, check=False)

    def logs(self) -> str:
        parts = []
        for log in sorted(self.root.rglob("*.log")):
            text = log.read_text(errors="replace").splitlines()[-25:]
            parts.append(f"--- {log.name} ---\n" + "\n".join(text))
        return "\n".join(parts)

    def job(self, job_id: str) -> dict[str, str]:
        """``scontrol show job`` as fields (an array job: its first task's line)."""
        out = self.run("scontrol", "show", "job", "-o", job_id).stdout.splitlines()
        return dict(re.findall(r"(\w+)=(\S*)", out[0])) if out else {}

    def states(self, job_id: str) -> list[str]:
        """The state of every task of ``job_id`` (one entry for a plain job)."""
        out = self.run("scontrol", "show", "job", "-o", job_id).stdout.splitlines()
        return [m.group(1) for line in out if (m := re.search(r"JobState=(\S+)", line))]

    def wait_ended(self, job_id: str, timeout: float = JOB_TIMEOUT_S) -> list[str]:
        ended = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL")
        if not wait_for(lambda: (s := self.states(job_id)) != [] and all(x in ended for x in s), timeout, 0.2):
            pytest.fail(f"job {job_id} did not end within {timeout:.0f} s: {self.states(job_id)}\n"
                        f"{self.run('squeue').stdout}\n{self.logs()}")
        return self.states(job_id)

    def job_ids(self) -> set[str]:
        return set(self.run("squeue", "-h", "-o", "%i").stdout.split())


def _memory_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024 * 9 // 10  # a bit under what the node reports
    return 1024


def _slurm_conf(root: Path, host: str) -> str:
    return "\n".join([
        "ClusterName=neltest",
        f"SlurmctldHost={host}",
        f"SlurmctldPort={free_port()}",
        f"SlurmdPort={free_port()}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={root}/munge/munge.socket",
        "MpiDefault=none",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "SchedulerParameters=sched_min_interval=0",
        "ReturnToService=2",
        "MinJobAge=600",
        f"StateSaveLocation={root}/state",
        f"SlurmdSpoolDir={root}/spool",
        f"SlurmctldPidFile={root}/slurmctld.pid",
        f"SlurmdPidFile={root}/slurmd.pid",
        f"SlurmctldLogFile={root}/log/slurmctld.log",
        f"SlurmdLogFile={root}/log/slurmd.log",
        f"PlugStackConfig={root}/plugstack.conf",
        f"NodeName={host} CPUs={os.cpu_count() or 1} RealMemory={_memory_mb()} State=UNKNOWN",
        f"PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP",
        "",
    ])


def _start(root: Path) -> Cluster:
    """munged as the munge user, then slurmctld and slurmd as root, all under ``root``."""
    host = socket.gethostname().split(".")[0]
    for sub in ("state", "spool", "log"):
        (root / sub).mkdir()
    # munged checks its paths: the key's folder private to munge, the socket's reachable by everyone.
    key_dir, sock_dir = root / "munge-key", root / "munge"
    for folder, mode in ((key_dir, 0o700), (sock_dir, 0o755)):
        folder.mkdir()
        shutil.chown(folder, "munge", "munge")
        folder.chmod(mode)
    key = key_dir / "munge.key"
    key.write_bytes(os.urandom(1024))
    shutil.chown(key, "munge", "munge")
    key.chmod(0o400)
    (root / "plugstack.conf").write_text("")
    conf = root / "slurm.conf"
    conf.write_text(_slurm_conf(root, host))
    env = clean_env(SLURM_CONF=str(conf), NEMO_API_KEY=SECRET)  # the config reads it: ${NEMO_API_KEY}
    cluster = Cluster(root, env)
    devnull = subprocess.DEVNULL
    cluster.processes.append(subprocess.Popen(
        ["munged", "--foreground", f"--key-file={key}", f"--socket={sock_dir}/munge.socket",
         f"--pid-file={sock_dir}/munged.pid", f"--log-file={sock_dir}/munged.log",
         f"--seed-file={sock_dir}/munged.seed"],
        user="munge", group="munge", extra_groups=[], stdin=devnull, stdout=devnull, stderr=devnull))
    if not wait_for(lambda: (sock_dir / "munge.socket").exists(), 10.0, 0.05):
        return cluster
    for daemon in ("slurmctld", "slurmd"):
        with (root / "log" / f"{daemon}.stderr.log").open("wb") as err:
            cluster.processes.append(subprocess.Popen([daemon, "-D", "-f", str(conf)], env=env, stdin=devnull,
                                                      stdout=err, stderr=subprocess.STDOUT))
    return cluster


def _stop(cluster: Cluster) -> None:
    """Cancel what is still queued or running (a failed test may leave jobs), then end the daemons."""
    if len(cluster.processes) == 3 and all(p.poll() is None for p in cluster.processes):
        jobs = cluster.job_ids()
        if jobs:
            cluster.run("scancel", *sorted(jobs))
            wait_for(lambda: not cluster.job_ids(), 10.0, 0.2)
    for process in reversed(cluster.processes):
        if process.poll() is None:
            process.terminate()
    for process in cluster.processes:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def slurm() -> Iterator[Cluster]:
    missing = [name for name in DAEMONS if shutil.which(name) is None]
    if missing:
        pytest.skip(f"SLURM/munge not installed ({', '.join(missing)} missing): `make system` installs them")
    if os.geteuid() != 0:
        pytest.skip("starting slurmd and munged (as the munge user) needs root")
    root = Path(tempfile.mkdtemp(prefix="nel-slurm-"))
    root.chmod(0o755)  # munged (not root) must reach its socket folder inside
    cluster = Cluster(root, {})
    try:
        cluster = _start(root)
        idle = wait_for(lambda: cluster.run("sinfo", "-h", "-o", "%T").stdout.strip() == "idle",
                        START_TIMEOUT_S, 0.2)
        if not idle:
            pytest.fail(f"the test SLURM cluster did not come up within {START_TIMEOUT_S:.0f} s "
                        f"(sinfo: {cluster.run('sinfo').stdout.strip() or cluster.run('sinfo').stderr.strip()})\n"
                        f"{cluster.logs()}")
        yield cluster
    finally:
        _stop(cluster)
        shutil.rmtree(root, ignore_errors=True)


def _config(mock: MockHandle, store: Path, out: str = "out", **cluster: object) -> str:
    items = ", ".join(f"{k}: {v}" for k, v in {"type": "slurm", "shards": SHARDS, "walltime": "00:05:00",
                                                "node_pools": "[debug]", **cluster}.items())
    return (f"services:\n  mock: {{url: {mock.base_url}, model: nel-mock, api_key: '${{NEMO_API_KEY}}'}}\n"
            f"benchmarks:\n  - {{name: gsm8k, max_problems: {PROBLEMS}, repeats: {REPEATS}, max_concurrent: 8}}\n"
            f"output: {{dir: '{out}', store: '{store}'}}\n"
            f"cluster: {{{items}}}\n")


def _submit(slurm: Cluster, cwd: Path, config: str) -> tuple[subprocess.CompletedProcess[str], str, str]:
    (cwd / "suite.yaml").write_text(config)
    proc = subprocess.run([NEL, "eval", "run", "suite.yaml"], cwd=cwd, env=slurm.env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    m = re.search(r"submitted: shards job (\d+), merge job (\d+)", proc.stdout)
    assert m, proc.stdout
    return proc, m.group(1), m.group(2)


def _scripts_dir(out: str) -> Path:
    m = re.search(r"shards +(.+)/shards\.sbatch", out)
    assert m, out
    return Path(m.group(1))


def test_a_sharded_suite_runs_as_a_job_array_and_the_merge_job_completes_the_run(
        slurm: Cluster, mock: MockHandle, tmp_path: Path) -> None:
    store = tmp_path / "shared fs" / "nel.duckdb"
    hostile = "out dir $(touch PWNED) `touch PWNED`"  # in #SBATCH lines and shell lines alike: quoted
    proc, array, merge = _submit(slurm, tmp_path, _config(mock, store, out=hostile))
    assert f"squeue -j {array},{merge}" in proc.stdout
    assert slurm.wait_ended(merge) == ["COMPLETED"], (Path(_scripts_dir(proc.stdout)) / "merge.log").read_text()
    assert slurm.states(array) == ["COMPLETED"] * SHARDS

    s = open_store(store)
    runs = s.runs()
    assert runs.height == 1 and runs["status"][0] == "complete"
    assert s.sql("SELECT count(*) AS n FROM steps")["n"][0] == PROBLEMS * REPEATS
    shards = s.rows("SELECT shard_idx, total_shards FROM run_shards ORDER BY shard_idx")
    assert [tuple(r) for r in shards] == [(0, SHARDS), (1, SHARDS)]
    scripts = _scripts_dir(proc.stdout)
    for k in range(SHARDS):
        log = (scripts / f"shard-{k}.log").read_text()
        assert f"SLURM_ARRAY_TASK_ID={k}, shard {k} of {SHARDS}" in log, log
    texts = [p.read_text() for p in scripts.iterdir()]
    assert not any(SECRET in text for text in texts), "an API key reached a script or a log"
    assert (store.parent / "runs" / runs["run_id"][0]).is_dir()  # the merge exported the finished run
    assert scripts.parent.parent == tmp_path / hostile
    assert not list(tmp_path.rglob("PWNED"))


def test_submit_false_writes_the_scripts_and_submits_nothing(slurm: Cluster, mock: MockHandle,
                                                             tmp_path: Path) -> None:
    before = slurm.job_ids()
    (tmp_path / "suite.yaml").write_text(_config(mock, tmp_path / "nel.duckdb", submit="false"))
    proc = subprocess.run([NEL, "eval", "run", "suite.yaml"], cwd=tmp_path, env=slurm.env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "not submitted (cluster.submit: false)" in proc.stdout
    scripts = _scripts_dir(proc.stdout)
    assert {p.name for p in scripts.iterdir()} == {"shards.sbatch", "merge.sbatch", "submit.sh", "spec.json"}
    assert slurm.job_ids() == before
    assert not (tmp_path / "nel.duckdb").exists()


def test_a_failing_shard_keeps_the_merge_from_running_and_resubmitting_it_alone_completes_the_run(
        slurm: Cluster, mock: MockHandle, tmp_path: Path) -> None:
    gate = tmp_path / "shard-1-may-run"
    setup = f"['if [ \"$SLURM_ARRAY_TASK_ID\" = 1 ] && [ ! -e {gate} ]; then echo failing on purpose; exit 3; fi']"
    store = tmp_path / "nel.duckdb"
    proc, array, merge = _submit(slurm, tmp_path, _config(mock, store, setup=setup))
    assert sorted(slurm.wait_ended(array)) == ["COMPLETED", "FAILED"]
    assert wait_for(lambda: slurm.job(merge).get("JobState") == "CANCELLED", 10.0, 0.2), slurm.job(merge)
    scripts = _scripts_dir(proc.stdout)
    assert not (scripts / "merge.log").exists()
    assert "failing on purpose" in (scripts / "shard-1.log").read_text()

    gate.touch()  # shard 1 alone again (it resumes), then the merge: what the docs tell a user to do
    again = subprocess.run([str(scripts / "submit.sh"), "--array=1"], env=slurm.env, capture_output=True,
                           text=True, timeout=60, check=False)
    assert again.returncode == 0, again.stderr
    m = re.search(r"shards: job (\d+); merge: job (\d+)", again.stdout)
    assert m, again.stdout
    assert slurm.wait_ended(m.group(2)) == ["COMPLETED"], (scripts / "merge.log").read_text()
    s = open_store(store)
    assert s.runs()["status"][0] == "complete"
    assert s.sql("SELECT count(*) AS n FROM steps")["n"][0] == PROBLEMS * REPEATS


def _served_config(store: Path, command: str, pools: str, shards: int = SHARDS, timeout: str = "60") -> str:
    return (f"services:\n  mock: {{type: command, model: nel-mock, command: {command}, node_pool: eval,"
            f" startup_timeout: {timeout}}}\n"
            f"benchmarks:\n  - {{name: gsm8k, max_problems: {PROBLEMS}, repeats: {REPEATS}, max_concurrent: 8}}\n"
            f"output: {{dir: out, store: '{store}'}}\n"
            f"cluster: {{type: slurm, shards: {shards}, walltime: '00:05:00', node_pools: {pools}}}\n")


def _answers(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_a_server_placed_on_the_pool_starts_inside_each_shard_job_serves_it_and_is_gone_when_the_job_ends(
        slurm: Cluster, tmp_path: Path) -> None:
    store = tmp_path / "nel.duckdb"
    command = f"['{sys.executable}', -m, workbench.cli, model, mock, --port, '{{port}}']"
    proc, array, merge = _submit(slurm, tmp_path, _served_config(store, command, "{eval: {partition: debug}}"))
    assert slurm.wait_ended(merge) == ["COMPLETED"], slurm.logs()
    assert slurm.states(array) == ["COMPLETED"] * SHARDS
    s = open_store(store)
    runs = s.runs()
    assert runs.height == 1 and runs["status"][0] == "complete"
    assert s.sql("SELECT count(*) AS n FROM steps")["n"][0] == PROBLEMS * REPEATS
    assert s.sql("SELECT count(*) AS n FROM steps WHERE error IS NOT NULL")["n"][0] == 0
    scripts = _scripts_dir(proc.stdout)
    ports = []
    for k in range(SHARDS):
        log = (scripts / f"shard-{k}.log").read_text()
        m = re.search(r"nel: services\.mock ready at http://127\.0\.0\.1:(\d+)/v1", log)
        assert m, log  # the job started it and waited for it, before the shard ran
        assert log.index(m.group(0)) < log.index("=== benchmarks.0 (gsm8k)")  # ready before the shard ran
        assert "command server for nel-mock ready" not in log  # the shard called it, and started none itself
        ports.append(int(m.group(1)))
        assert (scripts / f"service-mock-{k}.log").exists()
    assert not any(_answers(port) for port in ports), "a server outlived its job"
    assert not [cmd for cmd in _cmdlines() if any(f"model mock --port {port}" in cmd for port in ports)]


def _cmdlines() -> list[str]:
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                out.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                continue
    return out


def test_a_server_that_exits_fails_its_job_with_the_exit_code_and_its_last_lines_and_nothing_runs_on(
        slurm: Cluster, tmp_path: Path) -> None:
    store = tmp_path / "nel.duckdb"
    command = f"['{sys.executable}', -c, 'import sys; print(\"no weights here\"); sys.exit(7)', '{{port}}']"
    proc, array, merge = _submit(slurm, tmp_path, _served_config(store, command, "{eval: {partition: debug}}",
                                                                 shards=1))
    assert slurm.wait_ended(array) == ["FAILED"]
    assert wait_for(lambda: slurm.job(merge).get("JobState") == "CANCELLED", 10.0, 0.2), slurm.job(merge)
    log = (_scripts_dir(proc.stdout) / "shard-0.log").read_text()
    assert "nel: services.mock: the server exited with code 7 before it answered GET /v1/models" in log, log
    assert "no weights here" in log
    assert not store.exists()  # the shard never ran



def test_sbatch_takes_the_heterogeneous_job_a_server_on_another_pool_makes_with_a_component_per_pool(
        slurm: Cluster, tmp_path: Path) -> None:
    """Accepted and held only: one node cannot run two components (each takes a node of its own)."""
    command = f"['{sys.executable}', -m, workbench.cli, model, mock, --host, '{{host}}', --port, '{{port}}']"
    config = _served_config(tmp_path / "nel.duckdb", command, "{eval: {partition: debug, cpus_per_task: 1}, "
                            "model: {partition: debug, cpus_per_task: 2}}", shards=1)
    (tmp_path / "suite.yaml").write_text(config.replace("node_pool: eval", "node_pool: model")
                                         .replace("node_pools:", "submit: false, node_pools:"))
    proc = subprocess.run([NEL, "eval", "run", "suite.yaml"], cwd=tmp_path, env=slurm.env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "one heterogeneous job: pools eval, model" in proc.stdout
    held = slurm.run("sbatch", "--parsable", "--hold", str(_scripts_dir(proc.stdout) / "shards.sbatch"))
    assert held.returncode == 0, held.stderr
    job = held.stdout.strip().split(";")[0]
    try:
        lines = slurm.run("scontrol", "show", "job", "-o", job).stdout.splitlines()
        components = [dict(re.findall(r"(\w+)=(\S*)", line)) for line in lines]
        assert [(c.get("HetJobOffset"), c.get("Partition"), c.get("MinCPUsNode")) for c in components] == [
            ("0", "debug", "1"), ("1", "debug", "2")]
    finally:
        slurm.run("scancel", job)
