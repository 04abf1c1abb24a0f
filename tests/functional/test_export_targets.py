"""Exports to inspect_ai, MLflow and W&B, read back by the real clients.

One run of GSM8K against the mock, with ``output.export: [inspect, mlflow, wandb]`` in its config and secrets in
the environment, is shared by the module; ``nel eval export RUN --to ...`` is exercised on the same store.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from inspect_ai.log import read_eval_log
from mlflow.tracking import MlflowClient
from nel_helpers import assert_ok, assert_one_line_error, clean_env, nel
from wandb_records import run_facts

from workbench.cli import main
from workbench.mock import MockHandle

SECRETS = {"NEMO_API_KEY": "sk-model-KEY-7f3a91", "WANDB_API_KEY": "wandb-KEY-0c55e2" + "0" * 24,
           "MLFLOW_TRACKING_TOKEN": "mlflow-TOKEN-b81d4e"}
PROBLEMS, REPEATS = 6, 3


def export_env(tmp: Path, **extra: str) -> dict[str, str]:
    """Offline W&B with its caches in ``tmp`` (nothing in the home directory), and the secrets set."""
    env = clean_env(WANDB_MODE="offline", WANDB_CONFIG_DIR=str(tmp / "wandb-config"),
                    WANDB_CACHE_DIR=str(tmp / "wandb-cache"), WANDB_DATA_DIR=str(tmp / "wandb-data"), **SECRETS)
    env.pop("MLFLOW_TRACKING_URI", None)
    return {**env, **extra}


def nel_here(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp: Path, *args: str,
             **env: str) -> tuple[int, str, str]:
    """`nel ARGS` in this process (mlflow is imported once for the module): exit code, stdout, stderr."""
    for name, value in export_env(tmp, **env).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False) if "MLFLOW_TRACKING_URI" not in env else None
    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def run(mock: MockHandle, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A finished run exported by its config to all three targets: its id, output, folder and bundle."""
    root = tmp_path_factory.mktemp("exports")
    config = root / "eval.yaml"
    config.write_text(f"""\
services:
  main: {{url: {mock.base_url}, model: nel-mock}}
benchmarks:
  - {{name: gsm8k, max_problems: {PROBLEMS}, repeats: {REPEATS}}}
output:
  dir: {root / "out"}
  export: [inspect, mlflow, wandb]
  export_config:
    mlflow: {{experiment_name: nel-evals, tags: {{team: evals}}}}
""")
    proc = nel("eval", "run", str(config), "--no-progress", cwd=root, env=export_env(root), timeout=180)
    assert_ok(proc)
    run_id = re.search(r"run (\S+) complete", proc.stdout).group(1)  # type: ignore[union-attr]
    folder = root / "out" / "runs" / run_id
    bundle = orjson.loads((folder / f"eval-{run_id}.json").read_bytes())
    return {"id": run_id, "root": root, "folder": folder, "stdout": proc.stdout, "bundle": bundle,
            "store": root / "out" / "nel.duckdb"}


def results(folder: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (folder / "results.jsonl").read_bytes().splitlines()]


class TestAfterARun:
    """``output.export`` sends a finished run to each target and prints one line per target."""

    def test_one_line_per_target_after_the_artifacts(self, run: dict[str, Any]) -> None:
        lines = run["stdout"].splitlines()
        export = next(i for i, line in enumerate(lines) if line.startswith("  export "))
        assert [line.split()[0] for line in lines[export + 1:export + 4]] == ["inspect", "mlflow", "wandb"]
        assert "wandb sync " in lines[export + 3]

    def test_no_secret_reaches_any_file_written(self, run: dict[str, Any]) -> None:
        for path in run["root"].rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                for name, value in SECRETS.items():
                    assert value.encode() not in data, f"{name} found in {path}"
        for value in SECRETS.values():
            assert value not in run["stdout"]


class TestInspectLog:
    """The ``.eval`` log is what inspect_ai's own reader reads: header, every sample, scores and usage."""

    def test_header_and_every_sample_read_back(self, run: dict[str, Any]) -> None:
        (path,) = run["folder"].glob("*.eval")
        log = read_eval_log(str(path))
        assert log.status == "success"
        assert (log.eval.task, log.eval.model, log.eval.config.epochs) == ("gsm8k", "nel-mock", REPEATS)
        assert log.eval.dataset.samples == PROBLEMS
        assert log.samples is not None and len(log.samples) == PROBLEMS * REPEATS
        usage = log.stats.model_usage["nel-mock"]
        assert usage.total_tokens == run["bundle"]["runtime_stats"]["total_tokens"] > 0

    def test_accuracy_is_nels_pass_rate_and_each_score_its_step(self, run: dict[str, Any]) -> None:
        (path,) = run["folder"].glob("*.eval")
        log = read_eval_log(str(path))
        bundle = run["bundle"]
        (score,) = log.results.scores  # type: ignore[union-attr]
        assert score.name == bundle["primary_metric"]
        assert score.metrics["accuracy"].value == bundle["pass_at_k"]["1"]["value"]
        steps = {(r["task_id"], r["repeat"] + 1): r for r in results(run["folder"])}
        for sample in log.samples or []:
            step = steps[(sample.id, sample.epoch)]
            s = sample.scores[bundle["primary_metric"]]  # type: ignore[index]
            assert s.value == ("C" if step["passed"] else "I")
            assert s.answer == step["extracted_answer"]
            assert sample.target == step["expected_answer"]
            assert sample.messages[-1].role == "assistant" and sample.output.completion == step["model_response"]
            assert sample.output.usage.total_tokens == step["total_tokens"]  # type: ignore[union-attr]


class TestMlflow:
    """One MLflow run per nel run, read back with ``MlflowClient``; exporting again reuses it."""

    def check(self, client: MlflowClient, experiment: str, run: dict[str, Any]) -> Any:
        exp = client.get_experiment_by_name(experiment)
        assert exp is not None
        (found,) = client.search_runs([exp.experiment_id], filter_string=f"tags.`nel.run_id` = '{run['id']}'")
        bundle = found.data
        assert bundle.params["model"] == "nel-mock" and bundle.params["repeats"] == str(REPEATS)
        assert bundle.params["benchmark"] == "gsm8k" and "endpoint" in bundle.params
        assert bundle.metrics["pass_at_1"] == run["bundle"]["pass_at_k"]["1"]["value"]
        assert bundle.metrics["pass_at_1_low"] == run["bundle"]["pass_at_k"]["1"]["low"]
        assert bundle.metrics["latency_p90_ms"] == run["bundle"]["runtime_stats"]["latency_p90_ms"]
        names = {a.path for a in client.list_artifacts(found.info.run_id)}
        assert {"results.jsonl", "trajectories.jsonl", f"eval-{run['id']}.json"} <= names
        return found

    def test_the_runs_local_sqlite_store(self, run: dict[str, Any]) -> None:
        client = MlflowClient(tracking_uri=f"sqlite:///{run['folder'] / 'mlflow.db'}")
        found = self.check(client, "nel-evals", run)
        assert found.data.tags["team"] == "evals"

    def test_exporting_again_updates_the_same_run(self, run: dict[str, Any], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
        out = tmp_path / "again"
        for expected in ("created", "updated"):
            code, stdout, err = nel_here(monkeypatch, capsys, tmp_path, "eval", "export", run["id"], "--to", "mlflow",
                                         "-o", str(out), "--store", str(run["store"]))
            assert code == 0, err
            assert f" {expected} in experiment 'gsm8k'" in stdout
        self.check(MlflowClient(tracking_uri=f"sqlite:///{out / 'mlflow.db'}"), "gsm8k", run)

    def test_a_remote_tracking_server(self, run: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
        with mlflow_server(tmp_path) as uri:
            code, stdout, err = nel_here(monkeypatch, capsys, tmp_path, "eval", "export", run["id"], "--to", "mlflow",
                                         "-o", str(tmp_path / "o"), "--store", str(run["store"]),
                                         MLFLOW_TRACKING_URI=uri)
            assert code == 0, err
            assert f"at {uri}" in stdout
            self.check(MlflowClient(tracking_uri=uri), "gsm8k", run)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class mlflow_server:
    """``mlflow server`` as a real process on loopback (a sqlite backend in ``tmp``), stopped at exit."""

    START_S = 90.0

    def __init__(self, tmp: Path) -> None:
        self.tmp, self.port = tmp, free_port()

    def __enter__(self) -> str:
        cmd = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{self.tmp / 'srv.db'}",
               "--artifacts-destination", str(self.tmp / "srv-artifacts"), "--host", "127.0.0.1",
               "--port", str(self.port), "--workers", "1"]
        self.log = open(self.tmp / "server.log", "wb")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
                                     env={**os.environ, "MLFLOW_TRACKING_URI": ""})
        start = time.monotonic()
        uri = f"http://127.0.0.1:{self.port}"
        while time.monotonic() - start < self.START_S:
            assert self.proc.poll() is None, (self.tmp / "server.log").read_text()
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return uri
            except OSError:
                time.sleep(0.2)
        raise AssertionError(f"mlflow server did not start within {self.START_S} s")

    def __exit__(self, *_: object) -> None:
        os.killpg(self.proc.pid, 15)
        self.proc.wait(timeout=30)
        self.log.close()


class TestWandb:
    """An offline W&B run: its transaction log holds the config, the summary metrics and the task table."""

    def test_offline_run_files_hold_config_summary_and_table(self, run: dict[str, Any]) -> None:
        (log,) = run["folder"].glob("wandb/offline-run-*/run-*.wandb")
        config, summary, history = run_facts(log)
        bundle = run["bundle"]
        assert config["nel_run_id"] == run["id"] and config["model"] == "nel-mock"
        assert config["repeats"] == str(REPEATS)
        assert summary["pass_at_1"] == bundle["pass_at_k"]["1"]["value"]
        assert summary["tasks._type"] == "table-file" and summary["tasks.nrows"] == PROBLEMS
        assert "tasks" in history
        table = orjson.loads((log.parent / "files" / summary["tasks.path"]).read_bytes())
        assert table["columns"][:4] == ["task_idx", "task_id", "question", "pass_rate"]
        by_task: dict[str, list[bool]] = {}
        for r in results(run["folder"]):
            by_task.setdefault(r["task_id"], []).append(r["passed"])
        for row in table["data"]:
            assert row[3] == sum(by_task[row[1]]) / REPEATS and row[4] == REPEATS


class TestBadInput:
    """Bad input is one line and exit 2."""

    def test_an_unknown_target_lists_the_known_ones(self, run: dict[str, Any], tmp_path: Path) -> None:
        proc = nel("eval", "export", run["id"], "--to", "inspect,neptune", "--store", str(run["store"]), cwd=tmp_path)
        assert "known: inspect, mlflow, wandb" in assert_one_line_error(proc, 2)

    def test_an_unknown_run(self, run: dict[str, Any], tmp_path: Path) -> None:
        proc = nel("eval", "export", "no-such-run", "--to", "inspect", "--store", str(run["store"]), cwd=tmp_path)
        assert "no run 'no-such-run'" in assert_one_line_error(proc, 2)
        assert not list(tmp_path.rglob("*.eval"))
