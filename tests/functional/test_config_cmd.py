"""`nel config schema` and `nel config check`: the run specification for editors, for a dry check, and as the JSON
that workers elsewhere are handed (the Kubernetes shards' ConfigMap is made with it)."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import orjson
import yaml
from nel_helpers import assert_ok, assert_one_line_error, clean_env, nel

from workbench.spec.io import read_spec

K8S = Path(__file__).resolve().parents[2] / "deploy" / "k8s"

SUITE = """\
services:
  main:
    url: http://127.0.0.1:8000/v1
    model: m
    api_key: ${MY_KEY}
    generation: {temperature: 0.5, extra_body: {top_k: 20}}
benchmarks:
  - name: gsm8k
    repeats: 2
"""


def test_the_schema_is_json_schema_that_checks_a_suite(tmp_path: Path) -> None:
    proc = nel("config", "schema", cwd=tmp_path)
    assert_ok(proc)
    schema = orjson.loads(proc.stdout)
    assert schema["$schema"].endswith("2020-12/schema") and "suite.yaml" in schema["title"]
    jsonschema.validate(yaml.safe_load(SUITE.replace("${MY_KEY}", "k")), schema)
    bad = yaml.safe_load(SUITE.replace("repeats", "repeat"))
    try:
        jsonschema.validate(bad, schema)
    except jsonschema.ValidationError as exc:
        assert "repeat" in exc.message
    else:
        raise AssertionError("an unknown key passed the schema")


def test_check_says_ok_or_names_the_file_line_and_key(tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text(SUITE)
    proc = nel("config", "check", "suite.yaml", cwd=tmp_path, env=clean_env(MY_KEY="sk-secret-value-123"))
    assert_ok(proc)
    assert proc.stdout.strip() == "suite.yaml: ok: 1 service(s), 1 benchmark(s)"
    (tmp_path / "bad.yaml").write_text(SUITE.replace("repeats: 2", "repeat: 2"))
    line = assert_one_line_error(nel("config", "check", "bad.yaml", cwd=tmp_path, env=clean_env(MY_KEY="k")), 2)
    assert "bad.yaml:9: benchmarks.0.repeat: unknown key" in line
    line = assert_one_line_error(nel("config", "check", "suite.yaml", cwd=tmp_path), 2)  # the key's variable unset
    assert line.endswith("suite.yaml:5: services.main.api_key: environment variable MY_KEY is not set "
                         "(write ${MY_KEY:-default} for a default)")


def test_check_json_is_the_spec_a_worker_reads_without_key_or_local_path(tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text(SUITE)
    proc = nel("config", "check", "suite.yaml", "--json", "-O", "benchmarks.0.repeats=3", cwd=tmp_path,
               env=clean_env(MY_KEY="sk-secret-value-123"))
    assert_ok(proc)
    assert "sk-secret-value-123" not in proc.stdout and str(tmp_path) not in proc.stdout
    (tmp_path / "spec.json").write_text(proc.stdout)
    spec = read_spec(str(tmp_path / "spec.json"), {"NEMO_API_KEY": "from-the-pod"})
    assert spec.benchmarks[0].repeats == 3 and spec.services["main"].generation.extra_body == {"top_k": 20}
    assert spec.services["main"].api_key == "from-the-pod"  # as the Kubernetes shards get it, from a Secret


def test_the_kubernetes_run_spec_is_suite_yaml_as_nel_config_check_makes_it(tmp_path: Path) -> None:
    proc = nel("config", "check", str(K8S / "run" / "suite.yaml"), "--json", cwd=tmp_path)
    assert_ok(proc)
    (config_map,) = [d for d in yaml.safe_load_all((K8S / "run-spec.yaml").read_text()) if d]
    assert config_map["kind"] == "ConfigMap" and config_map["metadata"]["name"] == "nel-run-spec"
    assert orjson.loads(config_map["data"]["spec.json"]) == orjson.loads(proc.stdout), (
        "deploy/k8s/run-spec.yaml is stale: make it again from suite.yaml (see the comment there)")
