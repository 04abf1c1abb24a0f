"""Configs in NeMo Evaluator's schema: strict validation naming file, line and dot-path."""

import textwrap

import pytest

from workbench.errors import UsageError
from workbench.spec import load_config, model_config

GOOD = """\
services:
  main:
    type: api
    url: http://127.0.0.1:8000/v1
    model: my-model
    api_key: ${NEL_TEST_KEY:-sk-default}
    generation:
      temperature: 0.7
      top_p: 0.9
      max_tokens: 512
      seed: 3
      stop: ["</s>"]
      frequency_penalty: 0.1
      presence_penalty: -0.1
benchmarks:
  - name: gsm8k
    solver: {type: simple, service: main}
    repeats: 4
    max_problems: 50
    max_concurrent: 16
    timeout: 30
    system_prompt: Be careful.
output:
  dir: out
  store: out/x.duckdb
"""


def write(tmp_path, text, name="config.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def error_of(tmp_path, text, overrides=()):
    path = write(tmp_path, text)
    with pytest.raises(UsageError) as info:
        load_config(path, overrides)
    return str(info.value)


def test_a_complete_config_becomes_typed_settings(tmp_path, monkeypatch):
    monkeypatch.delenv("NEL_TEST_KEY", raising=False)
    config, _ = load_config(write(tmp_path, GOOD))
    bench = config.benchmarks[0]
    assert (bench.name, bench.repeats, bench.max_problems, bench.max_concurrent) == ("gsm8k", 4, 50, 16)
    model = model_config(config, bench)
    assert (model.model_id, model.temperature, model.top_p, model.max_tokens, model.seed) == ("my-model", 0.7, 0.9,
                                                                                           512, 3)
    assert (model.stop, model.frequency_penalty, model.presence_penalty) == (("</s>",), 0.1, -0.1)
    assert (model.request_timeout, model.system_prompt, model.api_key) == (30.0, "Be careful.", "sk-default")
    assert str(config.output_dir) == "out" and str(config.store) == "out/x.duckdb"


def test_environment_variables_are_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("NEL_TEST_KEY", "sk-from-env")
    config, _ = load_config(write(tmp_path, GOOD))
    assert config.services["main"].api_key == "sk-from-env"


def test_a_missing_environment_variable_without_default_names_it_and_the_line(tmp_path):
    message = error_of(tmp_path, GOOD.replace("${NEL_TEST_KEY:-sk-default}", "${NEL_SURELY_UNSET_VAR}"))
    assert "config.yaml:6: services.main.api_key" in message
    assert "NEL_SURELY_UNSET_VAR is not set" in message


@pytest.mark.parametrize(
    ("old", "new", "where", "what"),
    [
        ("      top_p: 0.9\n", "      top_p: 0.9\n      top_k: 5\n", ":10: services.main.generation.top_k",
         "unknown key"),
        ("output:\n", "outputs:\n", ":23: outputs", "unknown key"),
        ("    repeats: 4\n", "    repeats: four\n", ":18: benchmarks.0.repeats", "expected a whole number"),
        ("    repeats: 4\n", "    repeats: 0\n", ":18: benchmarks.0.repeats", "at least 1"),
        ("      temperature: 0.7\n", "      temperature: 3\n", ":8: services.main.generation.temperature",
         "outside [0.0, 2.0]"),
        ("service: main}", "service: judge}", ":17: benchmarks.0.solver.service", "no service named 'judge'"),
        ("type: simple,", "type: react,", ":17: benchmarks.0.solver.type", "expected one of simple, tool_calling"),
        ("  - name: gsm8k\n", "  - name: nosuchbench\n", ":16: benchmarks.0.name", "unknown benchmark"),
        ("    model: my-model\n", "", ":2: services.main", "missing required key 'model'"),
        ("    type: api\n", "    type: local\n", ":3: services.main.type", "expected one of api"),
        ("    timeout: 30\n", "    timeout: true\n", ":21: benchmarks.0.timeout", "expected a number"),
        ("      stop: [\"</s>\"]\n", "      stop: [1]\n", ":12: services.main.generation.stop", "list of strings"),
    ],
)
def test_each_mistake_is_named_by_file_line_and_dot_path(tmp_path, old, new, where, what):
    assert old in GOOD
    message = error_of(tmp_path, GOOD.replace(old, new))
    assert where in message, message
    assert what in message, message
    assert "config.yaml" in message


AGENT = GOOD.replace("""  - name: gsm8k
    solver: {type: simple, service: main}""", """  - name: file_tasks
    sandbox: box
    solver: {type: tool_calling, service: main, max_turns: 6, tool_timeout: 20, response_mode: sandbox_artifact}
  - name: humaneval
    sandbox: {type: local, timeout: 5}""") + """sandboxes:
  box: {type: docker, image: nel-sandbox:bookworm, timeout: 30, memory: 256m, cpus: 0.5, network: none, concurrency: 2}
"""


def test_sandboxes_are_named_once_or_given_inline_and_a_tool_solver_takes_its_settings(tmp_path):
    config, _ = load_config(write(tmp_path, AGENT))
    agent, code = config.benchmarks[0], config.benchmarks[1]
    assert agent.sandbox is not None and agent.sandbox.type == "docker" and agent.sandbox.memory_bytes == 256 * 2**20
    assert (agent.sandbox.cpus, agent.sandbox.network, agent.sandbox.concurrency) == (0.5, "none", 2)
    assert agent.tool_solver is not None
    assert (agent.tool_solver.max_turns, agent.tool_solver.tool_timeout) == (6, 20.0)
    assert (agent.tool_solver.sandbox_tools, agent.tool_solver.response_mode) == (True, "sandbox_artifact")
    assert code.sandbox is not None and (code.sandbox.type, code.sandbox.timeout) == ("local", 5)
    assert code.tool_solver is None


@pytest.mark.parametrize(
    ("old", "new", "where", "what"),
    [
        ("memory: 256m", "memory: lots", "sandboxes.box.memory", "expected a size"),
        ("network: none", "network: host", "sandboxes.box.network", "'none' or 'bridge'"),
        ("cpus: 0.5", "cpus: 0", "sandboxes.box.cpus", "greater than 0"),
        ("concurrency: 2}", "concurrency: 2, gpus: 1}", "sandboxes.box.gpus", "unknown key"),
        ("sandbox: box", "sandbox: boxx", "benchmarks.0.sandbox", "no sandbox named 'boxx'"),
        ("max_turns: 6", "max_turns: 0", "benchmarks.0.solver.max_turns", "at least 1"),
        ("max_turns: 6", "max_turns: 6, resource_service: nope", "benchmarks.0.solver.resource_service",
         "no service named 'nope'"),
        ("    sandbox: box\n", "", "benchmarks.0.solver.sandbox_tools", "need a sandbox"),
        ("response_mode: sandbox_artifact", "response_mode: vibes", "benchmarks.0.solver.response_mode",
         "expected one of"),
        ("max_turns: 6", "max_turns: 6, max_tokens: 3", "benchmarks.0.solver.max_tokens", "unknown key"),
    ],
)
def test_each_sandbox_or_agent_mistake_is_named_by_file_line_and_dot_path(tmp_path, old, new, where, what):
    assert old in AGENT
    message = error_of(tmp_path, AGENT.replace(old, new))
    assert where in message and what in message and "config.yaml:" in message, message


def test_a_solver_service_is_required_when_there_are_several(tmp_path):
    text = GOOD.replace("benchmarks:", "  other:\n    url: http://h/v1\n    model: m\nbenchmarks:").replace(
        "    solver: {type: simple, service: main}\n", "")
    assert "name the service to evaluate" in error_of(tmp_path, text)


def test_the_only_service_is_used_when_none_is_named(tmp_path):
    config, _ = load_config(write(tmp_path, GOOD.replace("    solver: {type: simple, service: main}\n", "")))
    assert config.benchmarks[0].service == "main"


def test_responses_protocol_with_stop_sequences_is_refused(tmp_path):
    text = GOOD.replace("    model: my-model\n", "    model: my-model\n    protocol: responses\n")
    message = error_of(tmp_path, text)
    assert "services.main.generation.stop" in message


def test_duplicate_keys_and_invalid_yaml_name_their_line(tmp_path):
    assert "config.yaml:11: services.main.generation.max_tokens: duplicate key" in error_of(
        tmp_path, GOOD.replace("      max_tokens: 512\n", "      max_tokens: 512\n      max_tokens: 256\n"))
    assert "config.yaml:3: invalid YAML" in error_of(tmp_path, "services:\n  - [unclosed\n")
    assert "the config is empty" in error_of(tmp_path, "")


class TestOverrides:
    """-O dot.path=value, applied before validation."""

    def test_overrides_set_nested_values_and_list_items(self, tmp_path):
        config, _ = load_config(write(tmp_path, GOOD), ["benchmarks.0.repeats=8",
                                                        "services.main.generation.temperature=0.2"])
        assert config.benchmarks[0].repeats == 8
        assert config.services["main"].generation.temperature == 0.2

    def test_an_override_of_an_unknown_key_is_refused_as_from_the_command_line(self, tmp_path):
        message = error_of(tmp_path, GOOD, ["benchmarks.0.repeat=8"])
        assert message.startswith("-O benchmarks.0.repeat") and "unknown key" in message

    def test_an_override_out_of_range_is_refused(self, tmp_path):
        message = error_of(tmp_path, GOOD, ["benchmarks.0.repeats=x"])
        assert "-O benchmarks.0.repeats: expected a whole number" in message
        assert "not an index" in error_of(tmp_path, GOOD, ["benchmarks.3.repeats=2"])
        assert "expected dot.path=value" in error_of(tmp_path, GOOD, ["benchmarks.0.repeats"])
