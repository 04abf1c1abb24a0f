"""The merge-request regression gates ship as files a CI system runs: deploy/gitlab-ci-eval.yml and
.github/workflows/eval-gate.yml. Each is read as its CI would read it, and every line of its jobs' scripts runs in a
shell, job after job in the pipeline's order, with the file's own variables and the model URL pointed at the mock:
the same model on both sides passes, and a worse candidate (a mock that does not know GSM8K) fails the strict stages.
What only a CI machine does (checkout, pip install) is kept out of those lines: `before_script:` on GitLab, the
"Install nel" steps on GitHub."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from nel_helpers import ROOT, clean_env

from workbench.mock import MockHandle, mock_model

GITLAB = ROOT / "deploy" / "gitlab-ci-eval.yml"
GITHUB = ROOT / ".github" / "workflows" / "eval-gate.yml"
POLICY = ROOT / "deploy" / "eval-gate-policy.yaml"
INSTALL_STEP = "Install nel"


@dataclass(frozen=True)
class Line:
    job: str
    command: str
    returncode: int
    output: str


@pytest.fixture(scope="module")
def worse() -> Iterator[MockHandle]:
    """A worse model: the mock answering only unit_conversion_mc's answer key, so every GSM8K answer is wrong."""
    with mock_model(latency_ms=0, benchmarks=("unit_conversion_mc",)) as handle:
        yield handle


def gitlab_jobs(doc: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """Each job with a script (not the hidden `.templates`), in stage order (file order within a stage)."""
    stages = doc["stages"]
    jobs = [(name, job) for name, job in doc.items() if not name.startswith(".") and isinstance(job, dict)
            and "script" in job]
    jobs.sort(key=lambda item: stages.index(item[1].get("stage") or doc[item[1]["extends"]]["stage"]))
    return [(name, list(job["script"])) for name, job in jobs]


def github_jobs(doc: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """Each job's `run:` steps but the install ones, the jobs in an order their `needs:` allow."""
    jobs = doc["jobs"]
    ordered: list[tuple[str, list[str]]] = []
    done: set[str] = set()
    while len(done) < len(jobs):
        ready = [n for n, j in jobs.items() if n not in done and set(j.get("needs", [])) <= done]
        assert ready, f"{GITHUB}: a cycle in needs:"
        for name in ready:
            steps = [s for s in jobs[name]["steps"] if "run" in s]
            ordered.append((name, [s["run"] for s in steps if s.get("name") != INSTALL_STEP]))
            done.add(name)
    return ordered


def ci_env(variables: dict[str, Any], tmp_path: Path, **overrides: str) -> dict[str, str]:
    """The environment a job sees: ours (nel on PATH, no stray NEL_* variables, an empty user config), the
    file's variables (but those GitHub fills in from its secrets and contexts), then ``overrides``."""
    env = clean_env(XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update({k: str(v) for k, v in variables.items() if "${{" not in str(v)})
    env.update(overrides)
    return env


def run_pipeline(jobs: list[tuple[str, list[str]]], env: dict[str, str], cwd: Path) -> list[Line]:
    """Every line in a shell (bash, as both CIs default to), in order; a job stops at its first failing line,
    as a CI job does, and so does the pipeline."""
    (cwd / "deploy").mkdir(exist_ok=True)
    shutil.copy(POLICY, cwd / "deploy" / POLICY.name)
    lines = []
    for job, commands in jobs:
        for command in commands:
            proc = subprocess.run(["bash", "-eo", "pipefail", "-c", command], cwd=cwd, env=env, capture_output=True,
                                  text=True, timeout=120, stdin=subprocess.DEVNULL)
            lines.append(Line(job, command, proc.returncode, proc.stdout + proc.stderr))
            if proc.returncode:
                return lines
    return lines


def _show(lines: list[Line]) -> str:
    return "\n".join(f"[{x.job}] exit {x.returncode}: {x.command}\n{x.output[-1500:]}" for x in lines)


def _pipelines() -> list[Any]:
    gitlab = yaml.safe_load(GITLAB.read_text())
    github = yaml.safe_load(GITHUB.read_text())
    return [pytest.param(gitlab_jobs(gitlab), gitlab["variables"], id="gitlab"),
            pytest.param(github_jobs(github), github["env"], id="github")]


class TestTheGateFiles:
    """What the files hold, before anything runs."""

    def test_gitlab_has_baseline_candidate_and_both_strict_stages(self):
        jobs = dict(gitlab_jobs(yaml.safe_load(GITLAB.read_text())))
        assert list(jobs) == ["eval:baseline", "eval:candidate", "regression:compare", "regression:gate"]
        assert any("nel compare" in c and "--strict" in c for c in jobs["regression:compare"])
        assert any("nel gate" in c and "--strict" in c for c in jobs["regression:gate"])

    def test_github_runs_every_step_but_the_installs(self):
        doc = yaml.safe_load(GITHUB.read_text())
        skipped = [s["run"] for j in doc["jobs"].values() for s in j["steps"] if s.get("name") == INSTALL_STEP]
        assert skipped and all(cmd.startswith("pip install") for cmd in skipped)
        commands = [c for _, cs in github_jobs(doc) for c in cs]
        assert len(commands) == 4 and all(c.startswith("nel ") for c in commands)
        assert [c.split()[1] for c in commands] == ["eval", "eval", "compare", "gate"]

    def test_no_secret_value_is_written_in_either_file(self):
        github = yaml.safe_load(GITHUB.read_text())
        assert github["env"]["NEMO_API_KEY"] == "${{ secrets.NEMO_API_KEY }}"
        assert "NEMO_API_KEY" not in yaml.safe_load(GITLAB.read_text())["variables"]


@pytest.mark.parametrize(("jobs", "variables"), _pipelines())
class TestThePipelines:
    """The files' script lines, run in a shell against the mock."""

    def test_the_same_model_on_both_sides_passes_every_stage(self, jobs, variables, mock, tmp_path):
        lines = run_pipeline(jobs, ci_env(variables, tmp_path, NEL_MODEL_URL=mock.base_url), tmp_path)
        assert [x.returncode for x in lines] == [0, 0, 0, 0], _show(lines)
        report = orjson.loads((tmp_path / "results" / "regression.json").read_bytes())
        assert report["verdict"] == "PASS"
        assert report["score_deltas"]["pass@1"]["delta"] == 0.0
        assert orjson.loads((tmp_path / "results" / "gate.json").read_bytes())["decision"] == "GO"

    def test_a_worse_candidate_fails_the_strict_comparison(self, jobs, variables, mock, worse, tmp_path):
        env = ci_env(variables, tmp_path, NEL_MODEL_URL=mock.base_url, NEL_CANDIDATE_MODEL_URL=worse.base_url)
        lines = run_pipeline(jobs, env, tmp_path)
        assert [x.returncode for x in lines] == [0, 0, 1], _show(lines)
        assert "verdict: BLOCK" in lines[-1].output
        report = orjson.loads((tmp_path / "results" / "regression.json").read_bytes())
        assert report["score_deltas"]["pass@1"]["significant"] is True
        assert report["score_deltas"]["pass@1"]["candidate"] == 0.0

    def test_a_worse_candidate_fails_the_strict_gate(self, jobs, variables, mock, worse, tmp_path):
        env = ci_env(variables, tmp_path, NEL_MODEL_URL=mock.base_url, NEL_CANDIDATE_MODEL_URL=worse.base_url)
        without_compare = [(job, [c for c in cmds if not c.startswith("nel compare")]) for job, cmds in jobs]
        lines = run_pipeline(without_compare, env, tmp_path)
        assert [x.returncode for x in lines] == [0, 0, 1], _show(lines)
        assert "decision: NO-GO" in lines[-1].output
