"""SLURM: the `cluster:` section is checked like the rest of a config, and the scripts it turns into say exactly
what they should: one array task per shard, the resources asked for, every value quoted, no secret anywhere."""

from __future__ import annotations

import shlex
import subprocess
import textwrap
from pathlib import Path

import pytest

from workbench.errors import RunFailed, UsageError
from workbench.spec import Cluster, load_config
from workbench.spec.models import NodePool
from workbench.workers.slurm import SlurmJob, merge_script, sbatch, shard_script, submit, write_scripts

BASE = """\
services:
  main: {url: "http://127.0.0.1:8000/v1", model: m, api_key: "${NEL_TEST_KEY}"}
benchmarks:
  - name: gsm8k
    max_problems: 4
"""
HOSTILE = "/shared/my evals/$(rm -rf /)/`reboot`/it's"
SECRET = "sk-secret-key-do-not-leak"


def config_with(tmp_path: Path, cluster: str, overrides: tuple[str, ...] = ()) -> Cluster | None:
    path = tmp_path / "suite.yaml"
    path.write_text(BASE + textwrap.dedent(cluster))
    config, _ = load_config(path, overrides)
    return config.cluster


def error_of(tmp_path: Path, cluster: str, overrides: tuple[str, ...] = ()) -> str:
    with pytest.raises(UsageError) as info:
        config_with(tmp_path, cluster, overrides)
    return str(info.value)


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEL_TEST_KEY", SECRET)


def job(root: str = "/shared/evals") -> SlurmJob:
    base = Path(root)
    return SlurmJob(config=base / "suite.yaml", store=base / "nel.duckdb", output_dir=base, workdir=base,
                    python="/opt/venv/bin/python")


FULL = """\
cluster:
  type: slurm
  shards: 4
  walltime: "1-02:00:00"
  node_pools: [batch, batch_short]
  account: llm-eval
  qos: high
  cpus_per_task: 8
  mem: 32G
  gpus_per_task: a100:1
  job_name: my-eval
  setup: ["module load cuda/12.4", "source /shared/venv/bin/activate"]
  sbatch_args: ["--constraint=ib", "--exclusive"]
  merge_walltime: 20
  scripts_dir: /shared/scripts
  submit: false
"""


# ---- the config ------------------------------------------------------------------------------------------
def test_every_cluster_key_becomes_a_typed_setting(tmp_path: Path) -> None:
    cluster = config_with(tmp_path, FULL)
    assert cluster == Cluster(
        type="slurm", shards=4, walltime="1-02:00:00", node_pools={"default": NodePool(partition="batch,batch_short")},
        account="llm-eval",
        qos="high", cpus_per_task=8, mem="32G", gpus_per_task="a100:1", job_name="my-eval",
        setup=("module load cuda/12.4", "source /shared/venv/bin/activate"),
        sbatch_args=("--constraint=ib", "--exclusive"), merge_walltime="20", scripts_dir=Path("/shared/scripts"),
        submit=False,
    )


def test_no_cluster_or_a_local_one_runs_here(tmp_path: Path) -> None:
    assert config_with(tmp_path, "") is None
    assert config_with(tmp_path, "cluster: {type: local}\n") is None
    # what every array task does with the SLURM config it was given
    assert config_with(tmp_path, "cluster: {type: slurm, shards: 2}\n", ("cluster.type=local",)) is None


@pytest.mark.parametrize(("written", "walltime"), [
    ("90", "90"), ("'90'", "90"), ("'30:00'", "30:00"), ("'01:30:00'", "01:30:00"), ("2-00:00:00", "2-00:00:00"),
    ("01:30:00", "01:30:00"),  # unquoted, YAML reads 5400 (base 60): still an hour and a half, not 90 hours
    ("30:00", "00:30:00"),
])
def test_walltime_takes_minutes_or_slurm_times_quoted_or_not(tmp_path: Path, written: str, walltime: str) -> None:
    cluster = config_with(tmp_path, f"cluster:\n  type: slurm\n  shards: 2\n  walltime: {written}\n")
    assert cluster is not None and cluster.walltime == walltime


@pytest.mark.parametrize(("cluster", "where", "message"), [
    ("cluster: {type: pbs, shards: 2}", "suite.yaml:6: cluster.type", "expected one of local, slurm"),
    ("cluster: {type: slurm}", "suite.yaml:6: cluster", "missing required key 'shards'"),
    ("cluster: {type: slurm, shards: 0}", "suite.yaml:6: cluster.shards", "must be at least 1"),
    ("cluster: {type: slurm, shards: two}", "suite.yaml:6: cluster.shards", "expected a whole number"),
    ("cluster: {type: slurm, shards: 2, nodes: 3}", "suite.yaml:6: cluster.nodes", "unknown key; expected one of"),
    ("cluster: {type: slurm, shards: 2, walltime: '25:99:00'}", "suite.yaml:6: cluster.walltime",
     "expected a time limit"),
    ("cluster: {type: slurm, shards: 2, walltime: soon}", "suite.yaml:6: cluster.walltime", "expected a time limit"),
    ("cluster: {type: slurm, shards: 2, mem: lots}", "suite.yaml:6: cluster.mem", "expected memory like 8G"),
    ("cluster: {type: slurm, shards: 2, node_pools: ['a b']}", "suite.yaml:6: cluster.node_pools.0",
     "is not a partition name"),
    ("cluster: {type: slurm, shards: 2, account: 'x\\n#SBATCH --uid=0'}", "suite.yaml:6: cluster.account",
     "expected a name"),
    ("cluster: {type: slurm, shards: 2, sbatch_args: ['exclusive']}", "suite.yaml:6: cluster.sbatch_args.0",
     "expected an sbatch option"),
    ("cluster: {type: slurm, shards: 2, setup: [\"a\\nb\"]}", "suite.yaml:6: cluster.setup.0", "no line breaks"),
    ("cluster: {type: slurm, shards: 2, submit: maybe}", "suite.yaml:6: cluster.submit", "expected true or false"),
    ("cluster: {type: slurm, shards: 2, cpus_per_task: 1.5}", "suite.yaml:6: cluster.cpus_per_task",
     "expected a whole number"),
    ("cluster: [slurm]", "suite.yaml:6: cluster", "expected a mapping"),
])
def test_a_wrong_cluster_setting_is_named_by_file_line_and_path(tmp_path: Path, cluster: str, where: str,
                                                                 message: str) -> None:
    error = error_of(tmp_path, cluster + "\n")
    assert where in error and message in error, error
    assert "\n" not in error


def test_an_override_is_checked_like_the_file(tmp_path: Path) -> None:
    error = error_of(tmp_path, "cluster: {type: slurm, shards: 2}\n", ("cluster.shards=-1",))
    assert error.startswith("-O cluster.shards: must be at least 1")


# ---- the scripts -----------------------------------------------------------------------------------------
def test_the_array_script_has_one_task_per_shard_and_the_resources_asked_for(tmp_path: Path) -> None:
    cluster = config_with(tmp_path, FULL)
    assert cluster is not None
    text = shard_script(cluster, job(), Path("/shared/scripts"))
    directives = [line for line in text.splitlines() if line.startswith("#SBATCH")]
    assert directives == [
        "#SBATCH --job-name=my-eval",
        '#SBATCH --output="/shared/scripts/shard-%a.log"',
        '#SBATCH --error="/shared/scripts/shard-%a.log"',
        "#SBATCH --open-mode=append",
        "#SBATCH --export=ALL",
        "#SBATCH --time=1-02:00:00",
        "#SBATCH --partition=batch,batch_short",  # the older list of partitions: one pool, SLURM's pick
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --cpus-per-task=8",
        "#SBATCH --mem=32G",
        "#SBATCH --account=llm-eval",
        "#SBATCH --qos=high",
        "#SBATCH --array=0-3",
        "#SBATCH --gpus-per-task=a100:1",
        "#SBATCH --constraint=ib",
        "#SBATCH --exclusive",
    ]
    body = text.split("set -eo pipefail", 1)[1]
    assert body.index("module load cuda/12.4") < body.index("source /shared/venv/bin/activate") < body.index("exec")
    assert 'export NEL_SHARD_IDX="$SLURM_ARRAY_TASK_ID" NEL_TOTAL_SHARDS=4' in text  # a lone resubmitted K is K of 4
    run = shlex.split(text.splitlines()[-1])
    # every task runs the run specification written beside the scripts (not a command line rebuilt from it)
    assert run == ["exec", "/opt/venv/bin/python", "-m", "workbench.cli", "eval", "run", "--spec",
                   "/shared/scripts/spec.json", "--no-progress", "--resume"]


def test_the_merge_script_merges_the_store_after_the_shards(tmp_path: Path) -> None:
    cluster = config_with(tmp_path, FULL)
    assert cluster is not None
    text = merge_script(cluster, job(), Path("/shared/scripts"))
    assert "#SBATCH --job-name=my-eval-merge" in text
    assert "#SBATCH --time=20" in text and "#SBATCH --kill-on-invalid-dep=yes" in text
    assert "--array" not in text and "--gpus" not in text
    assert shlex.split(text.splitlines()[-1]) == ["exec", "/opt/venv/bin/python", "-m", "workbench.cli", "eval",
                                                  "merge", "/shared/evals/nel.duckdb"]


def _stub_python(tmp_path: Path) -> Path:
    """A "python" that writes the arguments it got, one per line, where the test can read them."""
    stub = tmp_path / "python"
    stub.write_text(f"#!/bin/bash\nprintf '%s\\n' \"$@\" > {shlex.quote(str(tmp_path / 'argv'))}\n")
    stub.chmod(0o755)
    return stub


def test_hostile_paths_reach_nel_as_they_are_and_run_nothing(tmp_path: Path) -> None:
    cluster = config_with(tmp_path, "cluster: {type: slurm, shards: 2}\n")
    assert cluster is not None
    root = tmp_path / HOSTILE.lstrip("/")
    root.mkdir(parents=True)
    hostile = SlurmJob(config=root / "suite.yaml", store=root / "nel.duckdb", output_dir=root, workdir=root,
                       python=str(_stub_python(tmp_path)), spec='{"note": "$(touch PWNED)"}')
    scripts = write_scripts(cluster, hostile, tmp_path / "scripts 100%")
    # sbatch reads double quotes in #SBATCH lines; % would start one of its file name patterns
    assert f'#SBATCH --output="{tmp_path}/scripts 100%%/shard-%a.log"' in scripts.shards.read_text()
    env = {"PATH": "/usr/bin:/bin", "SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_JOB_ID": "9"}
    for script, expected in (
        (scripts.shards, ["-m", "workbench.cli", "eval", "run", "--spec", f"{tmp_path}/scripts 100%/spec.json",
                          "--no-progress", "--resume"]),
        (scripts.merge, ["-m", "workbench.cli", "eval", "merge", f"{root}/nel.duckdb",
                         "--spec", f"{tmp_path}/scripts 100%/spec.json"]),  # its output.export applies to the merge
    ):
        proc = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr
        assert (tmp_path / "argv").read_text().splitlines() == expected
    assert not list(tmp_path.rglob("PWNED")) and not Path("PWNED").exists()


def test_a_path_with_a_line_break_is_refused_it_would_end_a_comment() -> None:
    with pytest.raises(UsageError, match="line break"):
        job("/shared/x\nrm -rf ~")


def test_no_script_holds_the_api_key(tmp_path: Path) -> None:
    cluster = config_with(tmp_path, FULL.replace("/shared/scripts", str(tmp_path / "s")))
    assert cluster is not None
    scripts = write_scripts(cluster, job(), tmp_path / "s")
    for path in (scripts.shards, scripts.merge, scripts.submit):
        assert SECRET not in path.read_text()


def test_submit_sh_submits_the_shards_then_the_merge_after_them(tmp_path: Path) -> None:
    cluster = config_with(tmp_path, "cluster: {type: slurm, shards: 2}\n")
    assert cluster is not None
    scripts = write_scripts(cluster, job(), tmp_path)
    fake = _fake_sbatch(tmp_path, ["41;cluster", "42"])
    proc = subprocess.run([str(scripts.submit), "--array=1"], capture_output=True, text=True, check=False,
                          env={"PATH": f"{fake.parent}:/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls == [f"--parsable --array=1 {scripts.shards}", f"--parsable --dependency=afterok:41 {scripts.merge}"]
    assert "shards: job 41; merge: job 42" in proc.stdout


# ---- submitting ------------------------------------------------------------------------------------------
def _fake_sbatch(tmp_path: Path, answers: list[str], fail_at: int | None = None) -> Path:
    """An `sbatch` that records its arguments and prints the next job id (or refuses call ``fail_at``)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "sbatch"
    lines = ["#!/bin/bash", f'echo "$*" >> {shlex.quote(str(tmp_path / "calls"))}',
             f'n=$(wc -l < {shlex.quote(str(tmp_path / "calls"))})']
    if fail_at is not None:
        lines.append(f'if [ "$n" = {fail_at} ]; then echo "sbatch: error: Invalid account" >&2; exit 1; fi')
    answers_text = " ".join(shlex.quote(a) for a in answers)
    lines += [f"answers=({answers_text})", 'echo "${answers[$((n-1))]}"']
    script.write_text("\n".join(lines) + "\n")
    script.chmod(0o755)
    return script


def test_submission_passes_the_array_job_id_to_the_merge_dependency(tmp_path: Path) -> None:
    cluster = config_with(tmp_path, "cluster: {type: slurm, shards: 2}\n")
    assert cluster is not None
    scripts = write_scripts(cluster, job(), tmp_path)
    fake = _fake_sbatch(tmp_path, ["7", "8"])
    done = submit(scripts, command=str(fake))
    assert (done.array_job, done.merge_job) == ("7", "8")
    assert (tmp_path / "calls").read_text().splitlines()[1] == f"--parsable --dependency=afterok:7 {scripts.merge}"


def test_a_refused_submission_is_one_line_naming_the_command_and_why(tmp_path: Path) -> None:
    cluster = config_with(tmp_path, "cluster: {type: slurm, shards: 2}\n")
    assert cluster is not None
    scripts = write_scripts(cluster, job(), tmp_path)
    with pytest.raises(RunFailed) as first:
        submit(scripts, command=str(_fake_sbatch(tmp_path, ["7"], fail_at=1)))
    assert str(first.value) == f"{_fake_sbatch(tmp_path, [])} --parsable {scripts.shards}: exit 1: " \
                               "sbatch: error: Invalid account"
    (tmp_path / "calls").unlink()
    with pytest.raises(RunFailed) as second:  # the shards went in: say how to finish by hand
        submit(scripts, command=str(_fake_sbatch(tmp_path, ["7"], fail_at=2)))
    assert "Invalid account" in str(second.value) and "the shards are job 7" in str(second.value)
    assert "\n" not in str(second.value)


def test_a_missing_sbatch_says_what_to_do() -> None:
    with pytest.raises(UsageError, match=r"not found on PATH.*cluster\.submit: false"):
        sbatch(["/nonexistent/sbatch", "--parsable", "x"])


def test_relative_paths_are_refused_every_node_must_find_them() -> None:
    with pytest.raises(UsageError, match=r"store: nel\.duckdb is not an absolute path"):
        SlurmJob(config=Path("/a/suite.yaml"), store=Path("nel.duckdb"), output_dir=Path("/a"), workdir=Path("/a"))


@pytest.mark.parametrize("flags", [["--shards", "2"], ["--background"], ["--engine", "ray"]])
def test_local_or_ray_shards_are_refused_for_a_slurm_config(tmp_path: Path, flags: list[str]) -> None:
    from workbench.cli import build_parser
    from workbench.cli.eval_run import cmd_eval_run

    path = tmp_path / "suite.yaml"
    path.write_text(BASE + "cluster: {type: slurm, shards: 2}\n")
    args = build_parser().parse_args(["eval", "run", str(path), *flags])
    with pytest.raises(UsageError, match=r"cluster\.type is slurm"):
        cmd_eval_run(args)


def test_every_task_runs_the_submitters_spec_here_with_absolute_paths_and_no_key(tmp_path: Path) -> None:
    import orjson

    from workbench.cli import build_parser
    from workbench.cli.eval_run import cmd_eval_run

    path = tmp_path / "suite.yaml"
    scripts = tmp_path / "scripts"
    path.write_text(BASE + f"cluster: {{type: slurm, shards: 2, submit: false, scripts_dir: '{scripts}'}}\n")
    args = build_parser().parse_args(["eval", "run", str(path), "-O", "benchmarks.0.max_problems=7"])
    assert cmd_eval_run(args) == 0
    text = (scripts / "spec.json").read_text()
    spec = orjson.loads(text)
    assert "cluster" not in spec, "a task runs its shard here"
    assert spec["benchmarks"][0]["max_problems"] == 7, "the submitter's -O overrides are in it"
    assert Path(spec["output"]["store"]).is_absolute() and Path(spec["output"]["dir"]).is_absolute()
    assert SECRET not in text
