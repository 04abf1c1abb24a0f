"""SLURM node pools: ``cluster.node_pools`` written as NeMo Evaluator's seed writes it, servers placed on a pool
started by the job before the shard (waited for, handed to the shard, stopped by a trap), and a server on another
pool making a heterogeneous job. The real SLURM run is tests/functional/test_slurm.py; a heterogeneous job needs
two nodes, which the one-node test cluster has not, so it is checked here as text."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest

from workbench.errors import UsageError
from workbench.services.fleet import ServiceFleet, started_env_name
from workbench.spec import load_config
from workbench.spec.io import secret_env, spec_json
from workbench.spec.models import NodePool, RunSpec
from workbench.workers.slurm import SlurmJob, merge_script, shard_script
from workbench.workers.slurm_pools import placed_servers

SECRET = "sk-served-secret-0123456789"
MOCK = "[nel, model, mock, --port, '{port}']"


def spec_of(tmp_path: Path, text: str, overrides: tuple[str, ...] = ()) -> RunSpec:
    path = tmp_path / "suite.yaml"
    path.write_text(textwrap.dedent(text))
    spec, _ = load_config(path, overrides)
    return spec


def error_of(tmp_path: Path, text: str) -> str:
    with pytest.raises(UsageError) as info:
        spec_of(tmp_path, text)
    assert "\n" not in str(info.value)
    return str(info.value)


def suite(service: str, pools: str, shards: int = 2) -> str:
    return (f"services:\n  model: {service}\n"
            "benchmarks:\n  - {name: gsm8k, max_problems: 4}\n"
            f"cluster:\n  type: slurm\n  shards: {shards}\n  node_pools:\n{textwrap.indent(pools, '    ')}")


ONE_POOL = "compute: {partition: batch, nodes: 1, ntasks_per_node: 1, gres: 'gpu:4', cpus_per_task: 16, mem: 64G}\n"
TWO_POOLS = "cpu: {partition: cpu, cpus_per_task: 8}\ngpu: {partition: gpu, nodes: 2, gres: 'gpu:a100:4'}\n"


def script_of(spec: RunSpec) -> str:
    assert spec.cluster is not None
    base = Path("/shared/evals")
    job = SlurmJob(config=base / "suite.yaml", store=base / "nel.duckdb", output_dir=base, workdir=base,
                   python="/opt/venv/bin/python", spec="{}", servers=placed_servers(spec))
    return shard_script(spec.cluster, job, Path("/shared/scripts"))


def directives(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("#SBATCH")]


# ---- the config ------------------------------------------------------------------------------------------------
def test_node_pools_are_named_pools_with_nemo_evaluators_keys(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, suite("{type: vllm, model: m, tensor_parallel_size: 4, node_pool: compute}", ONE_POOL))
    assert spec.cluster is not None
    assert spec.cluster.node_pools == {"compute": NodePool(partition="batch", nodes=1, ntasks_per_node=1,
                                                           gres="gpu:4", cpus_per_task=16, mem="64G")}
    assert spec.cluster.node_pools["compute"].gpus == 4


def test_the_older_list_of_partitions_is_one_pool_named_default(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, suite(f"{{type: command, model: m, command: {MOCK}, node_pool: default}}",
                                   "[batch, batch_short]").replace("node_pools:\n    ", "node_pools: "))
    assert spec.cluster is not None and spec.cluster.node_pools == {"default": NodePool(partition="batch,batch_short")}


@pytest.mark.parametrize(("service", "pools", "where", "message"), [
    ("{type: vllm, model: m, node_pool: gpus}", ONE_POOL, "suite.yaml:2: services.model.node_pool",
     "no pool named 'gpus' in cluster.node_pools (compute)"),
    ("{type: vllm, model: m, tensor_parallel_size: 8, node_pool: compute}", ONE_POOL,
     "suite.yaml:2: services.model.tensor_parallel_size",
     "8 does not fit cluster.node_pools.compute, which has 4 GPU(s) on each node (gres gpu:4)"),
    ("{type: vllm, model: m, tensor_parallel_size: 3, node_pool: gpu}", TWO_POOLS,
     "suite.yaml:2: services.model.tensor_parallel_size", "3 does not fit cluster.node_pools.gpu, which has 4 GPU(s)"),
    ("{type: vllm, model: m, tensor_parallel_size: 2, node_pool: cpu}", TWO_POOLS,
     "suite.yaml:2: services.model.tensor_parallel_size", "which has no GPUs (gres)"),
    ("{type: vllm, model: m}", "gpu: {partition: gpu, gres: 'gpu 4'}\n", "cluster.node_pools.gpu.gres",
     "expected generic resources like gpu:4"),
    ("{type: vllm, model: m}", "gpu: {gres: 'gpu:4'}\n", "cluster.node_pools.gpu", "missing required key 'partition'"),
    ("{type: vllm, model: m}", "gpu: {partition: 'a b'}\n", "cluster.node_pools.gpu.partition",
     "expected a partition name"),
    ("{type: vllm, model: m}", "gpu: {partition: gpu, slots: 2}\n", "cluster.node_pools.gpu.slots", "unknown key"),
])
def test_a_pool_or_placement_that_cannot_work_is_one_line_naming_both(tmp_path: Path, service: str, pools: str,
                                                                       where: str, message: str) -> None:
    error = error_of(tmp_path, suite(service, pools))
    assert where in error and message in error, error


def test_tensor_parallelism_over_one_nodes_gpus_is_accepted(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, suite("{type: vllm, model: m, tensor_parallel_size: 4, node_pool: gpu}", TWO_POOLS,
                                   shards=1))
    assert spec.cluster is not None and spec.cluster.node_pools["gpu"].gpus == 8


def test_tensor_parallelism_spanning_nodes_is_refused_as_a_server_runs_on_one_node(tmp_path: Path) -> None:
    """2 nodes x 4 GPUs hold 8, but the server is started on one node (srun --nodes=1): TP 8 could never start."""
    error = error_of(tmp_path, suite("{type: vllm, model: m, tensor_parallel_size: 8, node_pool: gpu}", TWO_POOLS,
                                     shards=1))
    assert "services.model.tensor_parallel_size" in error and "4 GPU(s) on each node (gres gpu:a100:4)" in error, error


# ---- a server on the evaluation's pool ---------------------------------------------------------------------
def test_a_server_on_the_evaluations_pool_starts_in_the_job_before_the_shard_and_a_trap_stops_it(
        tmp_path: Path) -> None:
    spec = spec_of(tmp_path, suite("{type: vllm, model: m, tensor_parallel_size: 4, node_pool: compute, port: 8011}",
                                   ONE_POOL))
    text = script_of(spec)
    assert directives(text)[5:12] == [
        "#SBATCH --partition=batch", "#SBATCH --nodes=1",
        "#SBATCH --ntasks-per-node=1", "#SBATCH --gres=gpu:4", "#SBATCH --cpus-per-task=16", "#SBATCH --mem=64G",
        "#SBATCH --array=0-1"]
    assert "hetjob" not in text and "srun" not in text
    body = text.split("set -eo pipefail", 1)[1]
    order = ["trap nel_stop_servers EXIT", "setsid /opt/venv/bin/python -m workbench.services.launch "
             "/shared/scripts/spec.json model \"$nel_0_bind\" \"$nel_0_port\"", "nel_wait_ready model",
             f'export {started_env_name("model")}="$nel_0_host:$nel_0_port"', "-m workbench.cli eval run --spec"]
    assert [body.index(part) for part in order] == sorted(body.index(part) for part in order)
    assert "nel_0_host=127.0.0.1" in body and "nel_0_port=8011" in body
    assert "exec " not in body  # the shell outlives the shard: its EXIT trap stops the server
    assert 'kill -TERM -- "-$pid"' in body and 'kill -KILL -- "-$pid"' in body  # the whole process group
    assert "# services.model on node pool compute: vllm serve m --host HOST --port 8011 --tensor-parallel-size 4" \
        in body


def test_the_merge_job_asks_only_for_the_evaluations_partition(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, suite("{type: vllm, model: m, node_pool: compute}", ONE_POOL))
    assert spec.cluster is not None
    base = Path("/shared")
    text = merge_script(spec.cluster, SlurmJob(config=base / "s.yaml", store=base / "n.duckdb", output_dir=base,
                                               workdir=base), base)
    assert "#SBATCH --partition=batch" in text and "gres" not in text


# ---- a server on another pool ------------------------------------------------------------------------------
def test_a_server_on_another_pool_makes_one_heterogeneous_job_with_a_component_per_pool(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, suite("{type: vllm, model: m, tensor_parallel_size: 4, node_pool: gpu}", TWO_POOLS,
                                   shards=1))
    text = script_of(spec)
    lines = directives(text)
    het = lines.index("#SBATCH hetjob")
    assert lines[5:het] == ["#SBATCH --partition=cpu", "#SBATCH --nodes=1", "#SBATCH --ntasks-per-node=1",
                            "#SBATCH --cpus-per-task=8"]
    assert lines[het + 1:] == ["#SBATCH --partition=gpu", "#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=1",
                               "#SBATCH --gres=gpu:a100:4"]
    assert "--array" not in text and "SLURM_ARRAY_TASK_ID=0" in text  # SLURM has no heterogeneous arrays: one shard
    assert 'nel_0_host=$(scontrol show hostnames "$SLURM_JOB_NODELIST_HET_GROUP_1" | head -n 1)' in text
    assert "nel_0_bind=0.0.0.0" in text
    assert "# services.model on node pool gpu: vllm serve m --host HOST --port PORT --tensor-parallel-size 4" in text
    assert "setsid srun --het-group=1 --nodes=1 --ntasks=1 --kill-on-bad-exit=1 /opt/venv/bin/python -m " \
           "workbench.services.launch" in text


def test_several_shards_with_a_heterogeneous_job_are_refused_in_one_line(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, suite("{type: vllm, model: m, node_pool: gpu}", TWO_POOLS, shards=4))
    with pytest.raises(UsageError) as info:
        script_of(spec)
    assert str(info.value).startswith("cluster.shards: 4 shards need a job array, and SLURM runs no array of "
                                      "heterogeneous jobs (services.model on gpu; the evaluation on cpu")


# ---- secrets and what the shard and the server are given -----------------------------------------------------
def test_the_servers_secrets_reach_it_through_the_environment_never_the_scripts(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from workbench.cli import build_parser
    from workbench.cli.eval_run import cmd_eval_run

    scripts = tmp_path / "scripts"
    monkeypatch.setenv("SERVED_KEY", SECRET)
    monkeypatch.setenv("NEL_SERVER_SECRETS_MODEL", "")  # nel sets it for the jobs; undone after the test
    path = tmp_path / "suite.yaml"
    path.write_text(suite("{type: vllm, model: m, node_pool: compute, extra_args: [--api-key, '${SERVED_KEY}'], "
                          "env: {HF_TOKEN: '${SERVED_KEY}'}}", ONE_POOL)
                    + f"  submit: false\n  scripts_dir: '{scripts}'\n")
    monkeypatch.chdir(tmp_path)
    assert cmd_eval_run(build_parser().parse_args(["eval", "run", str(path)])) == 0
    for file in scripts.iterdir():
        assert SECRET not in file.read_text(), file
    spec = orjson.loads((scripts / "spec.json").read_text())
    assert "node_pool" not in spec["services"]["model"]  # the shard calls the job's server; it starts none
    assert os.environ["NEL_SERVER_SECRETS_MODEL"]  # the jobs inherit it (--export=ALL)


def test_launch_becomes_the_server_on_the_host_and_port_the_job_picked(tmp_path: Path) -> None:
    show = "import os, sys; print(sys.argv[1:], os.environ[\"WHO\"])"
    spec = spec_of(tmp_path, suite(f"{{type: command, model: m, node_pool: compute, env: {{WHO: served}}, command: "
                                   f"['{sys.executable}', -c, '{show}', '{{port}}', '{{host}}', '{{model}}']}}",
                                   ONE_POOL))
    local = spec.model_copy(update={"cluster": None, "services": {
        n: s.model_copy(update={"node_pool": None}) for n, s in spec.services.items()}})
    (tmp_path / "spec.json").write_text(spec_json(local))
    proc = subprocess.run([sys.executable, "-m", "workbench.services.launch", str(tmp_path / "spec.json"), "model",
                           "0.0.0.0", "8123"], capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, **secret_env(local)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['8123', '0.0.0.0', 'm'] served"


def test_launch_refuses_a_service_it_does_not_start_in_one_line(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, "services:\n  model: {url: 'http://h/v1', model: m}\nbenchmarks: [{name: gsm8k}]\n")
    (tmp_path / "spec.json").write_text(spec_json(spec))
    proc = subprocess.run([sys.executable, "-m", "workbench.services.launch", str(tmp_path / "spec.json"), "model",
                           "127.0.0.1", "8000"], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().endswith("services.model: not a server nel starts (type vllm|sglang|trt_llm|command)")


def test_a_shard_handed_a_started_server_calls_it_there_and_starts_nothing(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    spec = spec_of(tmp_path, "services:\n  model: {type: command, model: m, command: [no-such-program, '{port}']}\n"
                             "benchmarks: [{name: gsm8k}]\n")
    monkeypatch.setenv(started_env_name("model"), "node17:8011")
    with ServiceFleet(spec, announce=False) as fleet:  # no-such-program: it would be refused if it were to start
        fleet.start_for(0)
        assert spec.services["model"].url == "http://node17:8011/v1"
        assert fleet.running == {}
    monkeypatch.setenv(started_env_name("model"), "node17")
    with pytest.raises(UsageError, match=r"\$NEL_STARTED_SERVICE_MODEL: expected HOST:PORT, got 'node17'"), \
            ServiceFleet(spec, announce=False) as fleet:
        fleet.start_for(0)


def test_a_placed_server_no_benchmark_calls_is_not_started(tmp_path: Path) -> None:
    text = suite("{type: vllm, model: m, node_pool: compute}", ONE_POOL).replace(
        "benchmarks:", "  spare: {type: vllm, model: other, node_pool: compute}\nbenchmarks:")
    spec = spec_of(tmp_path, text.replace("max_problems: 4}", "max_problems: 4, solver: {service: model}}"))
    assert [s.name for s in placed_servers(spec)] == ["model"]


def test_a_server_given_a_secret_has_it_replaced_in_its_output_and_keeps_its_exit_code(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVED_KEY", SECRET)
    echo = "import sys; print('args', sys.argv[1:]); sys.exit(5)"
    spec = spec_of(tmp_path, suite(f"{{type: command, model: m, node_pool: compute, command: ['{sys.executable}', "
                                   f"-c, \"{echo}\", --api-key, '${{SERVED_KEY}}', '{{port}}']}}", ONE_POOL))
    local = spec.model_copy(update={"cluster": None, "services": {
        n: s.model_copy(update={"node_pool": None}) for n, s in spec.services.items()}})
    (tmp_path / "spec.json").write_text(spec_json(local))
    proc = subprocess.run([sys.executable, "-m", "workbench.services.launch", str(tmp_path / "spec.json"), "model",
                           "127.0.0.1", "8124"], capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, **secret_env(local)})
    assert proc.returncode == 5
    assert "args ['--api-key'," in proc.stdout and "'8124']" in proc.stdout
    assert SECRET not in proc.stdout + proc.stderr
