"""Services nel starts itself: how a config describes one, the command line each kind runs, what the run's
identity records of it, and the one-line refusals of the types nel does not run."""

from __future__ import annotations

import socket
import sys
from typing import Any

import pytest

from workbench.errors import UsageError
from workbench.services.commands import require_program, server_argv
from workbench.services.fleet import ServiceFleet, services_of, start_order
from workbench.services.ports import check_free, port_holder
from workbench.spec import model_config, validate
from workbench.spec.models import ServerService


def spec_of(services: dict[str, Any], benchmarks: list[dict[str, Any]] | None = None, **more: Any) -> Any:
    return validate({"services": services, "benchmarks": benchmarks or [{"name": "gsm8k"}], **more})


def problem(services: dict[str, Any], benchmarks: list[dict[str, Any]] | None = None, **more: Any) -> str:
    with pytest.raises(UsageError) as err:
        spec_of(services, benchmarks, **more)
    return str(err.value)


def server(**fields: Any) -> ServerService:
    return ServerService.model_validate({"model": "org/model", **fields})


class TestConfig:
    """How `services.NAME` describes a server nel starts."""

    def test_a_command_service_needs_its_command(self) -> None:
        assert problem({"m": {"type": "command", "model": "x"}}) == "services.m: missing required key 'command'"

    def test_a_built_in_server_type_refuses_a_command_of_its_own(self) -> None:
        assert "type vllm builds its own command line" in problem(
            {"m": {"type": "vllm", "model": "x", "command": ["serve"]}})

    def test_a_command_service_sets_its_parallelism_in_its_command(self) -> None:
        assert problem({"m": {"type": "command", "model": "x", "command": ["s"], "tensor_parallel_size": 2}}) \
            .startswith("services.m.tensor_parallel_size: a command service sets its own parallelism")

    def test_depends_on_must_name_a_service(self) -> None:
        assert problem({"m": {"type": "vllm", "model": "x", "depends_on": ["db"]}}) \
            == "services.m.depends_on.0: no service named 'db'; services: m"

    def test_a_depends_on_cycle_is_refused_with_its_path(self) -> None:
        services = {"a": {"type": "command", "model": "x", "command": ["s"], "depends_on": "b"},
                    "b": {"type": "command", "model": "y", "command": ["s"], "depends_on": "a"}}
        assert problem(services, [{"name": "gsm8k", "solver": {"service": "a"}}]) \
            == "services.a.depends_on: a cycle: a -> b -> a"

    def test_a_node_pool_in_a_local_run_is_refused(self) -> None:
        assert "this run is local" in problem({"m": {"type": "vllm", "model": "x", "node_pool": "gpu"}})

    def test_the_port_is_a_tcp_port(self) -> None:
        assert problem({"m": {"type": "vllm", "model": "x", "port": 70000}}) \
            == "services.m.port: must be at most 65535, got 70000"

    def test_a_benchmark_calls_a_started_server_like_an_api_service(self) -> None:
        spec = spec_of({"m": {"type": "vllm", "model": "org/model", "generation": {"temperature": 0.5}}})
        spec.services["m"].bind(43210)
        model = model_config(spec, spec.benchmarks[0])
        assert (model.endpoint, model.model_id, model.temperature) == \
            ("http://127.0.0.1:43210/v1/chat/completions", "org/model", 0.5)

    def test_a_judge_may_be_a_started_server(self) -> None:
        spec = spec_of({"m": {"type": "vllm", "model": "a"}, "j": {"type": "sglang", "model": "b"}},
                       [{"name": "gsm8k", "solver": {"service": "m"},
                         "scoring": {"metrics": [{"type": "judge", "service": "j"}]}}])
        assert services_of(spec.benchmarks[0]) == {"m", "j"}


class TestCommandLines:
    """Each server kind's own CLI, with the port nel picked and extra_args last."""

    def test_vllm(self) -> None:
        assert server_argv(server(type="vllm", tensor_parallel_size=2, extra_args=["--dtype", "bfloat16"]), 8001) \
            == ["vllm", "serve", "org/model", "--host", "127.0.0.1", "--port", "8001",
                "--tensor-parallel-size", "2", "--dtype", "bfloat16"]

    def test_sglang_runs_in_this_python(self) -> None:
        assert server_argv(server(type="sglang", tensor_parallel_size=4), 9) == \
            [sys.executable, "-m", "sglang.launch_server", "--model-path", "org/model", "--host", "127.0.0.1",
             "--port", "9", "--tensor-parallel-size", "4"]

    def test_trt_llm(self) -> None:
        assert server_argv(server(type="trt_llm", tensor_parallel_size=8), 9) == \
            ["trtllm-serve", "org/model", "--host", "127.0.0.1", "--port", "9", "--tp_size", "8"]

    def test_a_command_gets_its_port_and_model_filled_in(self) -> None:
        s = server(type="command", command=["srv", "--port={port}", "--name", "{model}", '{"a": {}}'])
        assert server_argv(s, 5555) == ["srv", "--port=5555", "--name", "org/model", '{"a": {}}']

    def test_a_missing_vllm_says_how_to_do_without_it(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("PATH", "/nonexistent")
        with pytest.raises(UsageError) as err:
            require_program("m", server(type="vllm"))
        assert str(err.value) == ("services.m: type vllm needs vLLM (the `vllm` command), which is not installed "
                                  "here; install it, or start the server with type: command (command: [..., "
                                  "\"{port}\"]), or point type: api at a server running elsewhere")

    def test_a_missing_command_program_is_named(self) -> None:
        with pytest.raises(UsageError, match=r"services.m.command: 'no-such-server-xyz' is not a program"):
            require_program("m", server(type="command", command=["no-such-server-xyz"]))


class TestIdentity:
    """The run's identity records what is served, never the port or a secret."""

    def identity(self, **fields: Any) -> dict[str, Any]:
        spec = spec_of({"m": {"model": "org/model", **fields}})
        return model_config(spec, spec.benchmarks[0]).identity()

    def test_the_served_model_and_its_arguments_are_recorded(self) -> None:
        ident = self.identity(type="vllm", tensor_parallel_size=2, extra_args=["--max-model-len", "4096"])
        assert ident["served"] == {"type": "vllm", "model": "org/model", "tensor_parallel_size": 2,
                                   "command": [], "extra_args": ["--max-model-len", "4096"], "env": []}
        assert ident["model_url"] == "http://127.0.0.1:PORT/v1/chat/completions"

    def test_the_port_does_not_change_the_identity(self) -> None:
        spec = spec_of({"m": {"type": "vllm", "model": "x"}})
        identities = []
        for port in (40001, 40002):
            spec.services["m"].bind(port)
            identities.append(model_config(spec, spec.benchmarks[0]).identity())
        assert identities[0] == identities[1]

    def test_secret_flags_and_env_values_stay_out(self) -> None:
        ident = self.identity(type="command", command=["srv", "--api-key", "sk-secret-123456", "--hf-token=hf_abc"],
                              env={"HF_TOKEN": "hf_very_secret"})
        assert "sk-secret-123456" not in str(ident) and "hf_abc" not in str(ident)
        assert "hf_very_secret" not in str(ident)
        assert ident["served"]["command"] == ["srv", "--api-key", "REDACTED", "--hf-token=REDACTED"]
        assert ident["served"]["env"] == ["HF_TOKEN"]

    def test_the_servers_own_api_key_is_what_nel_sends(self) -> None:
        spec = spec_of({"m": {"type": "vllm", "model": "x", "extra_args": ["--api-key", "sk-local-key-1"]}})
        assert model_config(spec, spec.benchmarks[0]).api_key == "sk-local-key-1"

    def test_other_arguments_change_the_identity(self) -> None:
        assert self.identity(type="vllm") != self.identity(type="vllm", extra_args=["--quantization", "fp8"])


class TestStartOrder:
    """depends_on orders start-up; a server stops after the last benchmark that calls it."""

    def test_dependencies_start_first(self) -> None:
        spec = spec_of({"a": {"type": "command", "model": "x", "command": ["s"], "depends_on": ["b"]},
                        "b": {"type": "command", "model": "y", "command": ["s"], "depends_on": ["c"]},
                        "c": {"type": "command", "model": "z", "command": ["s"]}},
                       [{"name": "gsm8k", "solver": {"service": "a"}}])
        assert start_order(spec, {"a"}) == ["c", "b", "a"]

    def test_an_api_dependency_is_not_started(self) -> None:
        spec = spec_of({"a": {"type": "command", "model": "x", "command": ["s"], "depends_on": ["db"]},
                        "db": {"type": "api", "url": "http://h/v1", "model": "m"}},
                       [{"name": "gsm8k", "solver": {"service": "a"}}])
        assert start_order(spec, {"a"}) == ["a"]

    def test_each_server_is_released_after_its_last_benchmark(self) -> None:
        spec = spec_of({"a": {"type": "command", "model": "x", "command": ["s"]},
                        "b": {"type": "command", "model": "y", "command": ["s"]}},
                       [{"name": "gsm8k", "solver": {"service": "a"}}, {"name": "gsm8k", "solver": {"service": "b"}},
                        {"name": "gsm8k", "solver": {"service": "a"}}])
        assert ServiceFleet(spec).last_use == {"a": 2, "b": 1}


class TestPorts:
    def test_a_taken_port_names_the_process_holding_it(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen()
            port = s.getsockname()[1]
            import os

            assert port_holder(port) is not None and port_holder(port).startswith(f"pid {os.getpid()} (")
            with pytest.raises(UsageError) as err:
                check_free("127.0.0.1", port, "services.m.port")
        assert str(err.value).startswith(f"services.m.port: port {port} is already in use by pid {os.getpid()} (")


class TestRefused:
    """NeMo Evaluator's types that nel does not run: one line with what to use instead."""

    @pytest.mark.parametrize(("section", "kind", "expected"), [
        ("service", "nat_agent", "use type: api"), ("service", "nim", "type: command"),
        ("solver", "harbor", "tool_calling"), ("solver", "openclaw", "tool_calling"),
        ("solver", "container", "tool_calling"), ("sandbox", "ecs_fargate", "type: docker"),
        ("sandbox", "apptainer", "type: docker"),
    ])
    def test_refused_types(self, section: str, kind: str, expected: str) -> None:
        api = {"type": "api", "url": "http://h/v1", "model": "m"}
        if section == "service":
            message = problem({"m": {"type": kind, "model": "x"}})
            where = "services.m.type"
        elif section == "solver":
            message = problem({"m": api}, [{"name": "gsm8k", "solver": {"type": kind}}])
            where = "benchmarks.0.solver.type"
        else:
            message = problem({"m": api}, [{"name": "gsm8k", "sandbox": {"type": kind}}])
            where = "benchmarks.0.sandbox.type"
        assert message.startswith(f"{where}: {kind!r} is not supported: ") and expected in message
        assert "\n" not in message


def test_a_servers_secrets_are_redacted_wherever_nel_writes_text() -> None:
    from workbench.secrets import redact_text

    spec = spec_of({"m": {"type": "command", "model": "x", "command": ["srv", "--api-key", "sk-server-key-777"],
                          "env": {"HF_TOKEN": "hf_server_token_888", "DTYPE": "bfloat16"}}})
    assert sorted(spec.services["m"].secrets()) == ["hf_server_token_888", "sk-server-key-777"]
    model_config(spec, spec.benchmarks[0])
    assert redact_text("sk-server-key-777 hf_server_token_888 bfloat16").count("bfloat16") == 1
    assert "sk-server-key-777" not in redact_text("key sk-server-key-777")
    assert "hf_server_token_888" not in redact_text("token hf_server_token_888")


def test_a_server_that_cannot_be_started_is_one_line(tmp_path: Any) -> None:
    from workbench.errors import RunFailed
    from workbench.services.server import ServerProcess

    not_executable = tmp_path / "serve.txt"
    not_executable.write_text("")
    with pytest.raises(RunFailed) as err:
        ServerProcess("m", [str(not_executable), "--api-key", "sk-never-shown-1"], "127.0.0.1", 1, {})
    assert str(err.value) == (f"services.m: cannot start the server ({not_executable} --api-key REDACTED): "
                              "Permission denied")


def test_a_started_servers_secrets_stay_out_of_the_workers_spec_file_and_reach_them_by_environment(tmp_path):
    """A background, SLURM or Ray worker reads the spec from a file: a server's env values and its --api-key are
    not in it; the worker's environment carries them, and the spec it reads is the one written."""
    from workbench.spec import load_config
    from workbench.spec.io import read_spec, secret_env, spec_json

    config = tmp_path / "suite.yaml"
    config.write_text("services:\n  served:\n    type: command\n    model: m\n"
                      "    command: [srv, --port, '{port}', --api-key, sk-SERVER-7d1c]\n"
                      "    env: {HF_TOKEN: hf_SECRET_42, CUDA_VISIBLE_DEVICES: '0'}\n"
                      "benchmarks:\n  - {name: gsm8k, solver: {service: served}}\n")
    spec = load_config(config)[0]
    text = spec_json(spec)
    assert "sk-SERVER-7d1c" not in text and "hf_SECRET_42" not in text and "CUDA_VISIBLE_DEVICES" not in text
    file = tmp_path / "spec.json"
    file.write_text(text)
    back = read_spec(str(file), env=secret_env(spec)).services["served"]
    original = spec.services["served"]
    assert (back.command, back.env) == (original.command, original.env)  # type: ignore[union-attr]
