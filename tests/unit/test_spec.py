"""The run specification: one object from flags, YAML and JSON alike; its schema checks configs; workers read it
back whole, with their keys from the environment; a spec they cannot read is one line naming what."""

from __future__ import annotations

import textwrap
from pathlib import Path

import jsonschema
import orjson
import pytest
import yaml

from workbench.cli import build_parser
from workbench.cli.eval_run import run_spec
from workbench.errors import UsageError
from workbench.spec import load_config
from workbench.spec.flags import form_fields, spec_flags, spec_from_flags
from workbench.spec.io import key_env_name, read_spec, secret_env, spec_json
from workbench.spec.models import RunSpec

SUITE = """\
services:
  main: {url: "http://127.0.0.1:8000/v1", model: m, api_key: "sk-from-the-config-123",
         generation: {temperature: 0.2, stop: "</s>"}}
  judge: {url: "http://127.0.0.1:8001/v1", model: j}
sandboxes:
  box: {type: docker, memory: 256m}
benchmarks:
  - name: gsm8k
    solver: {service: main}
    repeats: 4
    max_problems: 20
    problem_range: [0, 100]
    scoring:
      metrics: [{type: judge, name: correctness, service: judge}]
  - name: humaneval
    solver: {service: main}
    sandbox: box
output: {dir: out}
"""


def _args(*argv: str):  # type: ignore[no-untyped-def]
    return build_parser().parse_args(["eval", "run", *argv])


def test_the_json_schema_accepts_a_config_and_refuses_an_unknown_key(tmp_path: Path) -> None:
    schema = RunSpec.model_json_schema()
    jsonschema.validate(yaml.safe_load(SUITE), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(yaml.safe_load(SUITE.replace("repeats: 4", "repeat: 4")), schema)


def test_flags_and_a_config_file_build_the_same_spec(tmp_path: Path) -> None:
    path = tmp_path / "suite.yaml"
    path.write_text(textwrap.dedent("""\
        services:
          main: {url: "http://h:8000/v1", model: m, generation: {temperature: 0.5, max_tokens: 64}}
        benchmarks:
          - {name: gsm8k, repeats: 3, max_problems: 7, max_concurrent: 8}
        output: {dir: out}
        """))
    from_file, _ = load_config(path)
    from_flags = run_spec(_args("-b", "gsm8k", "--model-url", "http://h:8000/v1", "--model-id", "m",
                                "--temperature", "0.5", "--max-tokens", "64", "--repeats", "3", "--max-problems", "7",
                                "--max-concurrent", "8", "--output-dir", "out"))
    assert from_flags.model_dump(exclude={"source"}) == from_file.model_dump(exclude={"source"})


def test_a_flags_mistake_names_the_flag() -> None:
    for argv, flag, what in ((["--temperature", "3"], "--temperature", "outside [0.0, 2.0]"),
                             (["--repeats", "0"], "--repeats", "must be at least 1, got 0"),
                             (["--max-retries", "-1"], "--max-retries", "must be at least 0"),
                             (["--problem-range", "9:3"], "--problem-range", "0 <= START < END"),
                             (["--sandbox", "podman"], "--sandbox", "'docker' or 'local'"),
                             (["--protocol", "responses", "--stop", "x"], "--stop", "no stop sequences")):
        args = _args("-b", "gsm8k", "--model-url", "http://h/v1", "--model-id", "m", *argv)
        with pytest.raises(UsageError) as info:
            spec_from_flags(args)
        assert str(info.value).startswith(f"{flag}: ") and what in str(info.value), str(info.value)


def test_every_flag_has_a_field_and_the_form_shows_the_essentials() -> None:
    flags = {f.flag.flag for f in spec_flags()}
    assert {"--bench", "--model-url", "--model-id", "--repeats", "--temperature", "--sandbox", "--store"} <= flags
    assert [f.dest for f in form_fields()][:3] == ["bench", "model_url", "model_id"]


def test_a_worker_reads_the_whole_spec_back_with_its_keys_from_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "suite.yaml"
    path.write_text(SUITE)
    spec, _ = load_config(path)
    text = spec_json(spec)
    assert "sk-from-the-config" not in text
    env = secret_env(spec)
    assert env == {key_env_name("main"): "sk-from-the-config-123"}
    (tmp_path / "spec.json").write_text(text)
    again = read_spec(str(tmp_path / "spec.json"), env)
    assert again.model_dump() == spec.model_dump()
    assert again.services["main"].api_key == "sk-from-the-config-123"
    assert again.benchmarks[1].sandbox_spec == spec.benchmarks[1].sandbox_spec
    assert read_spec("env", {"NEL_RUN_SPEC": text, **env}).model_dump() == spec.model_dump()


def test_a_spec_from_a_newer_nel_names_the_field_it_does_not_know(tmp_path: Path) -> None:
    path = tmp_path / "suite.yaml"
    path.write_text(SUITE)
    tree = orjson.loads(spec_json(load_config(path)[0]))
    tree["benchmarks"][0]["shiny_new_option"] = 1
    (tmp_path / "spec.json").write_bytes(orjson.dumps(tree))
    with pytest.raises(UsageError) as info:
        read_spec(str(tmp_path / "spec.json"), {})
    assert "benchmarks.0.shiny_new_option: unknown key" in str(info.value)
    assert str(tmp_path / "spec.json") in str(info.value)
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(UsageError, match="not a JSON run specification"):
        read_spec(str(tmp_path / "broken.json"), {})
