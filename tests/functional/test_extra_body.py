"""`generation.extra_body`: a server's own request parameters (vLLM's ``top_k``, ``chat_template_kwargs``) reach
every request, whichever way the run was described (flags, a YAML config, shard workers) and are part of the
run's identity; a key nel sets itself is refused with the flag or the file and line named."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nel_helpers import assert_ok, assert_one_line_error, eval_args, nel
from recording_model import Recorder, recording_model, url_of

from workbench.store.reader import Store

EXTRA = {"top_k": 20, "chat_template_kwargs": {"enable_thinking": False}}


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    with recording_model() as server:
        yield server


def identity_extra(store: Path) -> list[Any]:
    return [json.loads(identity).get("extra_body") for (identity,) in Store(store).rows("SELECT identity FROM runs")]


def test_the_flag_reaches_every_request_and_the_runs_identity(tmp_path: Path, recorder: Recorder) -> None:
    store = tmp_path / "nel.duckdb"
    proc = nel(*eval_args(url_of(recorder), problems=3, repeats=2, store=store,
                          extra=["--extra-body", json.dumps(EXTRA)]), cwd=tmp_path)
    assert_ok(proc)
    assert len(recorder.bodies) == 6
    assert all(body["top_k"] == 20 and body["chat_template_kwargs"] == {"enable_thinking": False}
               for body in recorder.bodies)
    assert identity_extra(store) == [EXTRA]


def test_shard_workers_send_it_too(tmp_path: Path, recorder: Recorder) -> None:
    store = tmp_path / "nel.duckdb"
    proc = nel(*eval_args(url_of(recorder), problems=4, repeats=1, store=store,
                          extra=["--extra-body", json.dumps(EXTRA), "--shards", "2"]), cwd=tmp_path, timeout=120)
    assert_ok(proc)
    assert len(recorder.bodies) == 4 and all(body["top_k"] == 20 for body in recorder.bodies)


def test_a_yaml_config_sets_it_and_o_overrides_it(tmp_path: Path, recorder: Recorder) -> None:
    config = tmp_path / "suite.yaml"
    config.write_text(f"""\
services:
  main:
    url: {url_of(recorder)}
    model: m
    generation:
      extra_body:
        top_k: 20
benchmarks:
  - name: gsm8k
    max_problems: 2
    repeats: 1
output:
  store: {tmp_path / "nel.duckdb"}
""")
    assert_ok(nel("eval", "run", str(config), "--no-progress", "-O",
                  "services.main.generation.extra_body={top_k: 5, min_p: 0.1}", cwd=tmp_path))
    assert [(body["top_k"], body["min_p"]) for body in recorder.bodies] == [(5, 0.1), (5, 0.1)]


def test_a_run_without_it_keeps_the_identity_it_always_had(tmp_path: Path, recorder: Recorder) -> None:
    store = tmp_path / "nel.duckdb"
    assert_ok(nel(*eval_args(url_of(recorder), problems=1, repeats=1, store=store), cwd=tmp_path))
    assert identity_extra(store) == [None]
    assert "top_k" not in recorder.bodies[0]


@pytest.mark.parametrize(("value", "message"), [
    ('{"seed": 3}', "--extra-body: 'seed' is set by generation.seed, not here"),
    ('{"messages": []}', "--extra-body: 'messages' is set by nel, not here"),
    ("[1]", "--extra-body: expected a JSON object, got a list"),
    ("{top_k", "--extra-body: not valid JSON"),
])
def test_a_bad_value_is_named_by_its_flag(tmp_path: Path, value: str, message: str) -> None:
    proc = nel(*eval_args("http://127.0.0.1:9/v1", problems=1, repeats=1, extra=["--extra-body", value]),
               cwd=tmp_path)
    assert proc.returncode == 2
    assert message in proc.stderr


def test_in_a_config_the_file_and_line_are_named(tmp_path: Path) -> None:
    config = tmp_path / "suite.yaml"
    config.write_text("services:\n  main:\n    url: http://127.0.0.1:9/v1\n    model: m\n    generation:\n"
                      "      extra_body:\n        model: other\nbenchmarks:\n  - name: gsm8k\n")
    line = assert_one_line_error(nel("eval", "run", str(config), cwd=tmp_path), 2)
    assert line.endswith("suite.yaml:7: services.main.generation.extra_body.model: 'model' is set by nel, not here")
