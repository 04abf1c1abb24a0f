"""``nel eval run CONFIG.yaml`` with ``cluster: {type: slurm, ...}``: write the SLURM scripts, submit them.

One job array covers the whole suite: array task K runs shard K of every benchmark in turn, and one
merge job ingests them all. Scripts and logs go to ``cluster.scripts_dir`` (default
``OUTPUT_DIR/slurm/CONFIG-TIMESTAMP/``).
"""

from __future__ import annotations

import argparse
import os
import shlex
import time
from pathlib import Path

from workbench.engine import shard_from_env
from workbench.errors import UsageError
from workbench.spec import RunSpec as EvalConfig
from workbench.spec.io import secret_env, spec_json
from workbench.spec.models import Output, ServerService
from workbench.workers.local import LAUNCH_ENV
from workbench.workers.slurm import SlurmJob, SlurmScripts, submit, write_scripts
from workbench.workers.slurm_pools import components, placed_servers


def _overrides(args: argparse.Namespace) -> tuple[str, ...]:
    overrides = tuple(args.override or ())
    for item in overrides:
        if item.split("=", 1)[0].rsplit(".", 1)[-1] == "api_key":
            raise UsageError(f"-O {item.split('=', 1)[0]}: with a cluster every shard's script would hold the "
                             "key; export it (NEMO_API_KEY, or api_key: ${VAR} in the config): jobs inherit "
                             "the environment")
    return overrides


def cmd_eval_slurm(args: argparse.Namespace, config: EvalConfig) -> int:
    cluster = config.cluster
    assert cluster is not None
    if shard_from_env().sharded or os.environ.get(LAUNCH_ENV):
        raise UsageError("cluster.type slurm: this process is already a worker (NEL_SHARD_IDX, SLURM_ARRAY_TASK_ID "
                         f"or {LAUNCH_ENV} is set); to run the config here add -O cluster.type=local")
    _overrides(args)
    output_dir = config.output_dir.absolute()
    store = config.store_path.absolute()
    # Every array task runs this spec here (no cluster), its runs going to the store every node sees; the servers
    # placed on node pools are started by the job, which hands each shard their address (workers/slurm_pools.py).
    services = {name: s.model_copy(update={"node_pool": None}) if isinstance(s, ServerService) else s
                for name, s in config.services.items()}
    local = config.model_copy(update={"cluster": None, "services": services,
                                      "output": Output(dir=str(output_dir), store=str(store))})
    job = SlurmJob(config=Path(args.config).absolute(), store=store, output_dir=output_dir, workdir=Path.cwd(),
                   spec=spec_json(local), servers=placed_servers(config))
    os.environ.update(secret_env(config))  # the jobs inherit the environment (--export=ALL): never a file
    stamp = f"{job.config.stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    directory = cluster.scripts_dir or output_dir / "slurm" / stamp
    scripts = write_scripts(cluster, job, directory)
    n = cluster.shards
    print(f"nel: SLURM scripts for {len(config.benchmarks)} benchmark(s) in {n} shard(s) in {scripts.directory}/")
    het = len(components(cluster, job.servers)) > 1
    print(f"  shards   {scripts.shards}  " + ("(one heterogeneous job: pools " +
                                               ", ".join(components(cluster, job.servers)) + ")" if het else
                                               f"(job array 0-{n - 1})"))
    print(f"  merge    {scripts.merge}  (after every shard succeeded)")
    print(f"  submit   {scripts.submit}")
    print(f"  store    {job.store}  (must be on a filesystem every node sees)")
    if not cluster.submit:
        print("not submitted (cluster.submit: false): inspect the scripts, then run "
              f"{shlex.quote(str(scripts.submit))}")
        return 0
    submitted = submit(scripts)
    _follow(scripts, job, submitted.array_job, submitted.merge_job)
    return 0


def _follow(scripts: SlurmScripts, job: SlurmJob, array: str, merge: str) -> None:
    store = shlex.quote(str(job.store))
    print(f"submitted: shards job {array}, merge job {merge}")
    print(f"  follow   squeue -j {array},{merge}")
    print(f"  logs     {scripts.directory}/shard-K.log, merge.log")
    print(f"  watch    nel tui --store {store}")
    print(f"  rerun K  sbatch --array=K {shlex.quote(str(scripts.shards))} (it resumes), then "
          f"sbatch --dependency=afterok:JOB {shlex.quote(str(scripts.merge))}")
