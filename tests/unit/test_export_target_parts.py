"""Export targets in small: the names ``--to`` and ``output.export`` accept, the facts a tracker is given, how a
step becomes an inspect sample, and the one line a missing extra or a bad config gets."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import orjson
import pytest

from workbench.errors import UsageError
from workbench.export.inspect_messages import conversation
from workbench.export.run_facts import endpoint_host, run_metrics, run_params
from workbench.export.targets import export_targets, parse_targets
from workbench.export.to_inspect import SampleIds, log_name
from workbench.export.to_wandb import first_line, wandb_run_id
from workbench.extras import MissingExtra
from workbench.spec import load_config
from workbench.spec.models import RunSpec

BUNDLE = {
    "run_id": "gsm8k-20261125-0001", "benchmark": "gsm8k", "model_id": "m", "status": "complete",
    "model_url": "https://user:sk-SECRET@api.example.com:8443/v1/chat/completions?key=sk-SECRET",
    "protocol": "chat_completions", "nel_version": "0.1.0", "n_repeats": 4, "n_steps": 8, "n_tasks": 2,
    "created_at": "2026-11-25T01:24:22.424806Z", "primary_metric": "numeric",
    "config": {"identity_hash": "abc", "problem_start": 0, "problem_end": 2,
               "identity": {"temperature": 0.7, "top_p": None, "data_hash": "d1", "solver": "simple"}},
    "pass_at_k": {"1": {"value": 0.5, "low": 0.1, "high": 0.9}, "4": {"value": 1.0, "low": None, "high": None}},
    "scores": {"numeric": {"mean_reward": 0.5, "mean_reward_low": float("nan"), "pass_rate": 0.5}},
    "failure_analysis": {"categories": [{"category": "timeout", "count": 2}], "wrong_answers": {"count": 2}},
    "runtime_stats": {"latency_p50_ms": 3.0, "latency_p90_ms": 4.0, "latency_p99_ms": 5.0, "total_tokens": 80},
}


class TestTargetNames:
    """``--to`` takes names, repeated or as a comma list; an unknown one lists the known ones."""

    def test_repeated_and_comma_lists_in_order_once_each(self) -> None:
        assert parse_targets(["mlflow,inspect", "wandb", "mlflow"]) == ["mlflow", "inspect", "wandb"]

    def test_an_unknown_name_lists_the_known_ones(self) -> None:
        with pytest.raises(UsageError, match=r"--to neptune: unknown export target; known: inspect, mlflow, wandb"):
            parse_targets(["inspect,neptune"])

    def test_a_missing_extra_is_one_line_naming_it_before_anything_is_read(self, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setitem(sys.modules, "mlflow", None)  # what an uninstalled package looks like to find_spec
        with pytest.raises(MissingExtra) as info:
            export_targets(tmp_path / "no-store.duckdb", "r", tmp_path / "out", ["inspect", "mlflow"])
        assert "pip install 'nel-workbench[mlflow]'" in str(info.value)
        assert not (tmp_path / "out").exists()


class TestTrackerFacts:
    """What MLflow and W&B are given: no credentials, names MLflow accepts, no undefined numbers."""

    def test_the_endpoint_is_its_host_only(self) -> None:
        assert endpoint_host(BUNDLE["model_url"]) == "https://api.example.com:8443"  # type: ignore[arg-type]
        assert endpoint_host(None) is None

    def test_params_hold_the_run_and_no_secret(self) -> None:
        params = run_params(BUNDLE)
        assert params["model"] == "m" and params["repeats"] == "4" and params["temperature"] == "0.7"
        assert params["identity_hash"] == "abc" and params["problem_end"] == "2" and "top_p" not in params
        assert "SECRET" not in orjson.dumps(params).decode()

    def test_metrics_have_pass_at_k_bounds_rates_and_latency(self) -> None:
        metrics = run_metrics(BUNDLE)
        assert metrics["pass_at_1"] == 0.5 and metrics["pass_at_1_low"] == 0.1 and metrics["pass_at_1_high"] == 0.9
        assert metrics["pass_at_4"] == 1.0 and "pass_at_4_low" not in metrics  # undefined: left out, not NaN
        assert "numeric/mean_reward_low" not in metrics
        assert metrics["failure_rate/timeout"] == 0.25 and metrics["failure_rate/wrong_answer"] == 0.25
        assert metrics["latency_p99_ms"] == 5.0
        assert all(re.fullmatch(r"[A-Za-z0-9_\-./]+", name) for name in metrics)


class TestInspectSamples:
    """A step becomes an inspect sample: its conversation with the reply last, ids that never collide."""

    def test_input_is_what_came_before_the_first_reply_and_the_reply_is_last(self) -> None:
        messages = orjson.dumps([
            {"role": "system", "content": "be brief"}, {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "calc", "arguments": '{"x": "2+2"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "4"},
        ]).decode()
        calls = orjson.dumps([{"id": "c2", "function": {"name": "done", "arguments": "not json"}}]).decode()
        inputs, history, reply = conversation(messages, "2+2?", "4", calls, "m")
        assert [m.role for m in inputs] == ["system", "user"]
        assert [m.role for m in history] == ["system", "user", "assistant", "tool", "assistant"]
        assert history[2].tool_calls[0].arguments == {"x": "2+2"}  # type: ignore[union-attr,index]
        assert reply.tool_calls is not None and reply.tool_calls[0].parse_error is not None and reply.text == "4"

    def test_a_prompt_without_messages_is_one_user_message(self) -> None:
        inputs, history, _ = conversation(None, "question", "answer", None, "m")
        assert [(m.role, m.text) for m in history] == [("user", "question"), ("assistant", "answer")]
        assert len(inputs) == 1

    def test_a_task_held_twice_keeps_both_problems(self) -> None:
        ids = SampleIds()
        got = [ids.id_of({"task_id": t, "task_idx": i}) for t, i in (("a", 0), ("a", 0), ("b", 1), ("a", 2))]
        assert got == ["a", "a", "b", "a-2"]

    def test_the_log_name_is_the_same_for_the_same_run(self) -> None:
        assert log_name(BUNDLE) == "2026-11-25T01-24-22_gsm8k_gsm8k-20261125-0001.eval"


class TestWandbNames:
    def test_the_run_id_is_stable_short_and_valid(self) -> None:
        long = "x" * 100 + "/y"
        assert wandb_run_id(long) == wandb_run_id(long) and len(wandb_run_id(long)) <= 64
        assert re.fullmatch(r"[A-Za-z0-9_-]+", wandb_run_id("gsm8k/run:1"))

    def test_the_question_is_its_first_non_empty_line(self) -> None:
        assert first_line("\n  How many eggs?\nmore") == "How many eggs?"
        assert len(first_line("q" * 1000)) == 200


class TestConfig:
    """``output.export`` and ``output.export_config`` spelled as NeMo Evaluator spells them."""

    def _load(self, tmp_path: Path, output: str) -> RunSpec:
        path = tmp_path / "c.yaml"
        path.write_text(textwrap.dedent("""\
            services: {main: {url: "http://127.0.0.1:8000/v1", model: m}}
            benchmarks: [{name: gsm8k}]
            """) + output)
        return load_config(path)[0]

    def test_targets_and_their_options(self, tmp_path: Path) -> None:
        spec = self._load(tmp_path, "output: {export: [inspect, mlflow], export_config: {mlflow: "
                                    "{experiment_name: evals, tracking_uri: 'http://127.0.0.1:5000'}}}\n")
        assert spec.output.export == ["inspect", "mlflow"]
        assert spec.output.export_config.mlflow is not None
        assert spec.output.export_config.mlflow.experiment_name == "evals"

    def test_an_unknown_target_is_refused(self, tmp_path: Path) -> None:
        with pytest.raises(UsageError, match=r"output\.export"):
            self._load(tmp_path, "output: {export: [neptune]}\n")

    def test_options_for_a_target_not_exported_are_refused(self, tmp_path: Path) -> None:
        message = "export_config.wandb is set but 'wandb' is not in output.export"
        with pytest.raises(UsageError, match=re.escape(message)):
            self._load(tmp_path, "output: {export: [mlflow], export_config: {wandb: {project: p}}}\n")
