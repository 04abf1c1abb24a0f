"""SLURM node pools: which pools a job asks for, and the servers it starts on them before the shard runs.

The evaluation runs on the first pool of ``cluster.node_pools``. A server placed on that pool (``services.NAME.
node_pool``) is started by the job script on the job's own node, on 127.0.0.1; a server placed on another pool makes
the job heterogeneous (``#SBATCH hetjob``: one component per pool) and is started there with ``srun --het-group=K``,
listening on all addresses. Either way the script waits until ``GET /v1/models`` answers, hands the shard its
address (``NEL_STARTED_SERVICE_<NAME>=HOST:PORT``: the shard calls it and starts nothing) and stops it when the job
ends, however it ends (an EXIT trap that signals the server's process group). SLURM runs no job array of
heterogeneous jobs, so a heterogeneous job is one shard.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from workbench.errors import UsageError
from workbench.services.fleet import services_of, start_order, started_env_name
from workbench.spec.models import Cluster, NodePool, RunSpec, ServerService, redact_args

STOP_GRACE_S = 10
"""Seconds a server has after SIGTERM before its process group is killed."""
TAIL_LINES = 20
_SHOWN_PORT = 65535
"""Stands for the port the job picks, in the command a script's comment shows (written there as PORT)."""


@dataclass(frozen=True, slots=True)
class PlacedServer:
    """A server the job starts on a pool: what the script needs to start, await and name it."""

    name: str
    pool: str
    port: int | None
    startup_timeout: float
    shown: str
    """Its command line for a comment in the script, secret-like values replaced (``--api-key REDACTED``)."""


def placed_servers(spec: RunSpec) -> tuple[PlacedServer, ...]:
    """The spec's servers with a ``node_pool`` that its benchmarks call (or that those depend on), dependencies
    first: a server no benchmark calls is not started."""
    from workbench.services.commands import server_argv

    called = {name for bench in spec.benchmarks for name in start_order(spec, services_of(bench))}
    placed = {name for name in called if getattr(spec.services[name], "node_pool", None)}
    out = []
    for name in start_order(spec, placed):
        service = spec.services[name]
        if name not in placed:
            continue
        assert isinstance(service, ServerService) and service.node_pool is not None
        port = service.port or _SHOWN_PORT
        argv = [a.replace(str(_SHOWN_PORT), "PORT") for a in redact_args(server_argv(service, port, "HOST"))]
        out.append(PlacedServer(name, service.node_pool, service.port, service.startup_timeout, " ".join(argv)))
    return tuple(out)


def components(cluster: Cluster, servers: tuple[PlacedServer, ...]) -> list[str]:
    """The pools the job asks for, the evaluation's first; more than one makes a heterogeneous job."""
    if not cluster.node_pools:
        return []
    first = next(iter(cluster.node_pools))
    used = {s.pool for s in servers}
    return [first, *(p for p in cluster.node_pools if p != first and p in used)]


def check_layout(cluster: Cluster, servers: tuple[PlacedServer, ...]) -> None:
    """One line when the layout cannot be submitted: SLURM has no job arrays of heterogeneous jobs."""
    pools = components(cluster, servers)
    if len(pools) > 1 and cluster.shards > 1:
        placed = ", ".join(f"services.{s.name} on {s.pool}" for s in servers if s.pool != pools[0])
        raise UsageError(f"cluster.shards: {cluster.shards} shards need a job array, and SLURM runs no array of "
                         f"heterogeneous jobs ({placed}; the evaluation on {pools[0]}, the first of "
                         "cluster.node_pools): set shards: 1, or place the servers on the first pool")


def pool_directives(pool: NodePool, cluster: Cluster) -> list[str]:
    """The ``#SBATCH`` lines of one pool (its own cpus_per_task and mem before the cluster's)."""
    lines = [f"#SBATCH --partition={pool.partition}", f"#SBATCH --nodes={pool.nodes}",
             f"#SBATCH --ntasks-per-node={pool.ntasks_per_node}"]
    if pool.gres:
        lines.append(f"#SBATCH --gres={pool.gres}")
    if cpus := pool.cpus_per_task or cluster.cpus_per_task:
        lines.append(f"#SBATCH --cpus-per-task={cpus}")
    if mem := pool.mem or cluster.mem:
        lines.append(f"#SBATCH --mem={mem}")
    return lines


def hetjob_directives(cluster: Cluster, pools: list[str], time: str | None) -> list[str]:
    """Every component after the first: ``#SBATCH hetjob``, then that pool's lines."""
    lines: list[str] = []
    for pool in pools[1:]:
        lines += ["#SBATCH hetjob", *pool_directives(cluster.node_pools[pool], cluster)]
        lines += [f"#SBATCH --time={time}"] if time else []
        lines += [f"#SBATCH --account={cluster.account}"] if cluster.account else []
        lines += [f"#SBATCH --qos={cluster.qos}"] if cluster.qos else []
    return lines


_READY = """
import http.client, sys, time
host, port, pid, timeout = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
deadline = time.monotonic() + timeout
def alive():
    try:
        with open("/proc/%s/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
while True:
    if not alive():
        sys.exit(3)
    conn = http.client.HTTPConnection(host, port, timeout=2.0)
    try:
        conn.request("GET", "/v1/models")
        if conn.getresponse().status == 200:
            sys.exit(0)
    except OSError:
        pass
    finally:
        conn.close()
    if time.monotonic() >= deadline:
        sys.exit(4)
    time.sleep(0.1)
""".strip()
"""Polls ``GET /v1/models`` every 100 ms: 0 answered, 3 the server exited, 4 ``startup_timeout`` passed."""


def server_lines(servers: tuple[PlacedServer, ...], pools: list[str], python: str, spec_file: str,
                 log_dir: str) -> list[str]:
    """Shell lines that start each server on its pool, wait for it and hand its address to the shard; an EXIT trap
    stops them all (SIGTERM to each process group, SIGKILL after a grace)."""
    py = shlex.quote(python)
    lines = [
        "",
        "# The servers this job starts (services.NAME.node_pool), each answering before the shard runs;",
        "# the EXIT trap stops them however the job ends.",
        "nel_servers=()",
        "nel_stop_servers() {",
        '  local pid timer',
        '  for pid in "${nel_servers[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done',
        '  for pid in "${nel_servers[@]}"; do',
        f'    ( sleep {STOP_GRACE_S}; kill -KILL -- "-$pid" 2>/dev/null ) & timer=$!',
        '    wait "$pid" 2>/dev/null || true',
        '    kill "$timer" 2>/dev/null || true',
        "  done",
        "}",
        "trap nel_stop_servers EXIT",
        "trap 'exit 143' TERM INT",
        f"nel_ready_py={shlex.quote(_READY)}",
        "nel_wait_ready() {  # NAME PID HOST PORT TIMEOUT LOG",
        "  local code=0 status=0",
        f'  {py} -S -c "$nel_ready_py" "$3" "$4" "$2" "$5" || code=$?',
        '  [ "$code" = 0 ] && return 0',
        '  if [ "$code" = 3 ]; then',
        '    wait "$2" || status=$?',
        '    echo "nel: services.$1: the server exited with code $status before it answered GET /v1/models;'
        ' its last lines:" >&2',
        "  else",
        '    echo "nel: services.$1: the server did not answer GET /v1/models within $5 s (startup_timeout);'
        ' its last lines:" >&2',
        "  fi",
        f'  tail -n {TAIL_LINES} "$6" >&2',
        "  exit 1",
        "}",
    ]
    for i, server in enumerate(servers):
        k = pools.index(server.pool)
        var = f"nel_{i}"
        port = str(server.port) if server.port else (
            f"$({py} -S -c 'import socket; s = socket.socket(); s.bind((\"\", 0)); print(s.getsockname()[1])')")
        log = f"{shlex.quote(log_dir + '/service-' + _file_part(server.name))}-\"${{SLURM_ARRAY_TASK_ID:-0}}\".log"
        launch = f"{py} -m workbench.services.launch {shlex.quote(spec_file)} {shlex.quote(server.name)}"
        lines += ["", f"# services.{server.name} on node pool {server.pool}: {server.shown}"]
        if k == 0:
            lines += [f"{var}_host=127.0.0.1", f"{var}_bind=127.0.0.1"]
            start = f'setsid {launch} "${var}_bind" "${var}_port"'
        else:  # the first node of that component
            lines += [f'{var}_host=$(scontrol show hostnames "$SLURM_JOB_NODELIST_HET_GROUP_{k}" | head -n 1)',
                      f"{var}_bind=0.0.0.0"]
            start = (f"setsid srun --het-group={k} --nodes=1 --ntasks=1 --kill-on-bad-exit=1 {launch} "
                     f'"${var}_bind" "${var}_port"')
        lines += [
            f"{var}_port={port}",
            f"{var}_log={log}",
            f'{start} >"${var}_log" 2>&1 &',
            f"{var}_pid=$!",
            f'nel_servers+=("${var}_pid")',
            f'nel_wait_ready {shlex.quote(server.name)} "${var}_pid" "${var}_host" "${var}_port" '
            f'{server.startup_timeout:g} "${var}_log"',
            f'export {started_env_name(server.name)}="${var}_host:${var}_port"',
            f'echo "nel: services.{_file_part(server.name)} ready at http://${var}_host:${var}_port/v1"',
        ]
    return lines


def _file_part(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
