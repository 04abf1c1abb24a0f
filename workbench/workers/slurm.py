"""SLURM: a config's suite as a job array of shards plus a merge job that waits for all of them.

Array task K runs ``nel eval run CONFIG -O cluster.type=local --resume`` as shard K of N
(``NEL_SHARD_IDX=$SLURM_ARRAY_TASK_ID``, ``NEL_TOTAL_SHARDS=N`` fixed in the script, so a failed task
resubmitted alone with ``sbatch --array=K`` is still shard K of N). Every shard computes the same run id
from the run's identity and writes its steps beside the store, so the store must be on a filesystem
every node sees. The merge job (``--dependency=afterok:ARRAY``) runs ``nel eval merge STORE``.

Secrets never enter a script: the jobs inherit the submitter's environment (``--export=ALL``), where
``$NEMO_API_KEY`` or the config's ``${VAR}`` references find them. Every value written into a shell line
is ``shlex``-quoted; values in ``#SBATCH`` lines are validated names or double-quoted paths.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from workbench.errors import RunFailed, UsageError
from workbench.spec.models import Cluster
from workbench.workers.slurm_pools import (
    PlacedServer,
    check_layout,
    components,
    hetjob_directives,
    pool_directives,
    server_lines,
)

SBATCH_TIMEOUT_S = 60.0
SPEC_FILE = "spec.json"
"""The run specification, beside the scripts: every array task runs it (``nel eval run --spec``)."""
_JOB_ID = re.compile(r"^\d+$")


@dataclass(frozen=True, slots=True)
class SlurmJob:
    """What the scripts run, as absolute paths: a shared filesystem names them the same on every node."""

    config: Path
    store: Path
    output_dir: Path
    workdir: Path
    spec: str = ""
    """The run specification every shard runs, as JSON (``-O`` overrides applied, output paths absolute, no
    secret): written beside the scripts as ``spec.json``."""
    python: str = os.path.abspath(sys.executable)  # not resolved: a venv's python is a symlink on purpose
    servers: tuple[PlacedServer, ...] = ()
    """The servers placed on node pools, which the shard job starts before the shard (``slurm_pools``)."""

    def __post_init__(self) -> None:
        for name in ("config", "store", "output_dir", "workdir"):
            path = getattr(self, name)
            if not path.is_absolute():
                raise UsageError(f"{name}: {path} is not an absolute path (every node must find it)")
            if "\n" in str(path) or "\r" in str(path):
                raise UsageError(f"{name}: {str(path)!r}: a path in a script cannot hold a line break")


@dataclass(frozen=True, slots=True)
class SlurmScripts:
    directory: Path
    shards: Path
    merge: Path
    submit: Path


@dataclass(frozen=True, slots=True)
class Submitted:
    array_job: str
    merge_job: str


def job_name(cluster: Cluster, job: SlurmJob) -> str:
    """``cluster.job_name``, else ``nel-`` and the config's name in characters SLURM shows as typed."""
    if cluster.job_name:
        return cluster.job_name
    return "nel-" + (re.sub(r"[^A-Za-z0-9_.-]+", "-", job.config.stem).strip("-") or "suite")


def _directive_path(directory: Path, pattern: str) -> str:
    """A log path for an ``#SBATCH`` line: sbatch reads double quotes and backslashes there (not a shell's
    single quotes), and ``%`` starts one of its file name patterns (``pattern``'s own are meant)."""
    text = str(directory)
    if any(ch in text for ch in "\n\r\\"):
        raise UsageError(f"{text!r}: a SLURM log directory cannot hold a line break or a backslash")
    text = text.replace("%", "%%").replace('"', '\\"')
    return f'"{text}/{pattern}"'


def _common(cluster: Cluster, *, time: str | None, name: str, log: str, pool: list[str] | None = None) -> list[str]:
    """The job's own lines; ``pool``: the evaluation pool's (else just its partition, as the merge job asks)."""
    lines = [f"#SBATCH --job-name={name}", f"#SBATCH --output={log}", f"#SBATCH --error={log}",
             "#SBATCH --open-mode=append", "#SBATCH --export=ALL"]
    if time:
        lines.append(f"#SBATCH --time={time}")
    if pool is not None:
        lines += pool
    elif cluster.node_pools:
        lines.append(f"#SBATCH --partition={next(iter(cluster.node_pools.values())).partition}")
    if cluster.account:
        lines.append(f"#SBATCH --account={cluster.account}")
    if cluster.qos:
        lines.append(f"#SBATCH --qos={cluster.qos}")
    return lines


def _nel(job: SlurmJob, *args: str) -> str:
    return " ".join(shlex.quote(a) for a in (job.python, "-m", "workbench.cli", *args))


def _preamble(cluster: Cluster, job: SlurmJob) -> list[str]:
    lines = ["", "set -eo pipefail"]
    if cluster.setup:
        lines += ["", "# cluster.setup, as written in the config", *cluster.setup]
    return [*lines, "", f"cd {shlex.quote(str(job.workdir))}"]


def shard_script(cluster: Cluster, job: SlurmJob, directory: Path) -> str:
    """The array job: task K is shard K of ``cluster.shards``; it resumes whatever the store holds. With servers
    placed on node pools it starts them first and stops them when it ends; on a pool other than the evaluation's,
    it is one heterogeneous job (one shard), not an array."""
    check_layout(cluster, job.servers)
    pools = components(cluster, job.servers)
    het = len(pools) > 1
    n = cluster.shards
    first = pool_directives(cluster.node_pools[pools[0]], cluster) if pools else None
    lines = [
        "#!/bin/bash",
        f"# nel: the shards of {job.config} as a SLURM job array, task K = shard K of {n}." if not het else
        f"# nel: {job.config} as one heterogeneous SLURM job: the evaluation on pool {pools[0]}, servers on "
        f"{', '.join(pools[1:])}.",
        "# Written by `nel eval run`; " + ("a task resubmitted alone (sbatch --array=K THIS) resumes shard K."
                                           if not het else "submitted again, it resumes."),
        *_common(cluster, time=cluster.walltime, name=job_name(cluster, job),
                 log=_directive_path(directory, "shard-%a.log" if not het else "shard-0.log"), pool=first),
    ]
    if not het:
        lines.append(f"#SBATCH --array=0-{n - 1}")
    if cluster.cpus_per_task and first is None:
        lines.append(f"#SBATCH --cpus-per-task={cluster.cpus_per_task}")
    if cluster.mem and first is None:
        lines.append(f"#SBATCH --mem={cluster.mem}")
    if cluster.gpus_per_task:
        lines.append(f"#SBATCH --gpus-per-task={cluster.gpus_per_task}")
    lines += [f"#SBATCH {arg}" for arg in cluster.sbatch_args]
    lines += hetjob_directives(cluster, pools, cluster.walltime)
    lines += _preamble(cluster, job)
    args = ["eval", "run", "--spec", str(directory / SPEC_FILE)]
    lines += ['export SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_JOB_ID="$SLURM_JOB_ID"  # one shard: SLURM has no '
              'arrays of heterogeneous jobs' if het else
              ': "${SLURM_ARRAY_TASK_ID:?run this script as a job array (sbatch --array=...)}"']
    lines += [
        f"export NEL_SHARD_IDX=\"$SLURM_ARRAY_TASK_ID\" NEL_TOTAL_SHARDS={n}",
        'echo "nel: SLURM job ${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID} on $(hostname):'
        f' SLURM_ARRAY_TASK_ID=$SLURM_ARRAY_TASK_ID, shard $NEL_SHARD_IDX of {n}"',
    ]
    run = _nel(job, *args, '--no-progress', '--resume')
    if job.servers:  # not exec: the EXIT trap must outlive the shard to stop the servers
        lines += server_lines(job.servers, pools, job.python, str(directory / SPEC_FILE), str(directory))
        lines += ["", run, ""]
    else:
        lines += [f"exec {run}", ""]
    return "\n".join(lines)


def merge_script(cluster: Cluster, job: SlurmJob, directory: Path) -> str:
    """The merge job: submitted with ``--dependency=afterok:ARRAY``, it ingests the finished shards."""
    lines = [
        "#!/bin/bash",
        f"# nel: merges the shards of {job.config} into the store once every array task succeeded.",
        "# Submit it with: sbatch --dependency=afterok:ARRAY_JOB_ID THIS",
        *_common(cluster, time=cluster.merge_walltime, name=f"{job_name(cluster, job)}-merge",
                 log=_directive_path(directory, "merge.log")),
        "#SBATCH --ntasks=1",
        "#SBATCH --kill-on-invalid-dep=yes",
    ]
    if cluster.mem:
        lines.append(f"#SBATCH --mem={cluster.mem}")
    lines += _preamble(cluster, job)
    spec = ("--spec", str(directory / SPEC_FILE)) if job.spec else ()  # its output.export: the merged runs' exports
    lines += [f"exec {_nel(job, 'eval', 'merge', str(job.store), *spec)}", ""]
    return "\n".join(lines)


def submit_script(scripts: SlurmScripts) -> str:
    """``submit.sh [SBATCH_OPTION...]``: the shards (options go to them, e.g. ``--array=3``), then the merge."""
    shards, merge = shlex.quote(str(scripts.shards)), shlex.quote(str(scripts.merge))
    return "\n".join([
        "#!/bin/bash",
        "# nel: submits the shards, then the merge job that runs once all of them succeeded.",
        "# Options go to the shards' sbatch: ./submit.sh --array=3 runs shard 3 again (it resumes), then merges.",
        "set -euo pipefail",
        f"array=$(sbatch --parsable \"$@\" {shards})",
        'array=${array%%;*}',
        f"merge=$(sbatch --parsable --dependency=afterok:\"$array\" {merge})",
        'merge=${merge%%;*}',
        'echo "shards: job $array; merge: job $merge (runs when every shard succeeded)"',
        'echo "follow: squeue -j $array,$merge"',
        "",
    ])


def write_scripts(cluster: Cluster, job: SlurmJob, directory: Path) -> SlurmScripts:
    """Write ``shards.sbatch``, ``merge.sbatch`` and ``submit.sh`` into ``directory`` (made if missing)."""
    check_layout(cluster, job.servers)  # before anything is written
    directory = directory.absolute()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cluster.scripts_dir: cannot create {directory}: {exc.strerror}") from None
    scripts = SlurmScripts(directory, directory / "shards.sbatch", directory / "merge.sbatch",
                           directory / "submit.sh")
    if job.spec:
        (directory / SPEC_FILE).write_text(job.spec, encoding="utf-8")
    for path, text in ((scripts.shards, shard_script(cluster, job, directory)),
                       (scripts.merge, merge_script(cluster, job, directory)),
                       (scripts.submit, submit_script(scripts))):
        path.write_text(text, encoding="utf-8")
        path.chmod(0o755)
    return scripts


def sbatch(argv: list[str]) -> str:
    """Run one ``sbatch --parsable ...`` and return the job id; failures are one line naming the command."""
    shown = shlex.join(argv)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              timeout=SBATCH_TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise UsageError(f"{argv[0]}: not found on PATH: submit from a machine with SLURM, "
                         "or set cluster.submit: false to only write the scripts") from None
    except subprocess.TimeoutExpired:
        raise RunFailed(f"{shown}: no answer within {SBATCH_TIMEOUT_S:.0f} s") from None
    out = proc.stdout.strip().splitlines()
    job_id = out[0].split(";", 1)[0].strip() if out else ""
    if proc.returncode != 0 or not _JOB_ID.match(job_id):
        why = "; ".join(line.strip() for line in proc.stderr.splitlines() if line.strip()) or proc.stdout.strip()
        raise RunFailed(f"{shown}: exit {proc.returncode}: {why or 'no job id printed'}")
    return job_id


def submit(scripts: SlurmScripts, command: str = "sbatch") -> Submitted:
    """Submit the array, then the merge depending on it (``afterok``: it runs only if every shard succeeded)."""
    array = sbatch([command, "--parsable", str(scripts.shards)])
    try:
        merge = sbatch([command, "--parsable", f"--dependency=afterok:{array}", str(scripts.merge)])
    except (UsageError, RunFailed) as exc:
        raise RunFailed(f"{exc} (the shards are job {array}: submit the merge with "
                        f"`sbatch --dependency=afterok:{array} {scripts.merge}`, or `scancel {array}`)") from None
    return Submitted(array, merge)
