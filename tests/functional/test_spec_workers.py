"""What a worker does with the run specification it is handed (``--spec FILE`` or ``--spec env``, as the
supervisor, Ray, SLURM and Kubernetes start it): it runs exactly that, and a spec it cannot read is one line
naming the file (or variable) and the field, exit 2, before anything starts."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from nel_helpers import assert_ok, assert_one_line_error, clean_env, nel

from workbench.spec import load_config
from workbench.spec.io import spec_json
from workbench.store.reader import Store


def spec_file(tmp_path: Path, url: str) -> Path:
    config = tmp_path / "suite.yaml"
    config.write_text(f"services:\n  main:\n    url: {url}\n    model: nel-mock\nbenchmarks:\n"
                      f"  - name: gsm8k\n    max_problems: 3\n    repeats: 2\noutput:\n  store: {tmp_path}/nel.duckdb\n"
                      f"  dir: {tmp_path}/out\n")
    path = tmp_path / "spec.json"
    path.write_text(spec_json(load_config(config)[0]))
    return path


def test_a_worker_runs_the_spec_it_is_given_from_a_file_or_the_environment(mock, tmp_path: Path) -> None:
    path = spec_file(tmp_path, mock.base_url)
    assert_ok(nel("eval", "run", "--spec", str(path), "--no-progress", cwd=tmp_path))
    assert_ok(nel("eval", "run", "--spec", "env", "--no-progress", cwd=tmp_path,
                  env=clean_env(NEL_RUN_SPEC=path.read_text())))
    assert Store(tmp_path / "nel.duckdb").rows("SELECT count(*), count(DISTINCT run_id) FROM steps") == [(12, 2)]


@pytest.mark.parametrize(("change", "message"), [
    (lambda tree: tree["benchmarks"][0].update(shiny_new_option=1), "benchmarks.0.shiny_new_option: unknown key"),
    (lambda tree: tree["benchmarks"][0].update(repeats="two"), "benchmarks.0.repeats:"),
    (lambda tree: tree.pop("benchmarks"), "missing required key 'benchmarks'"),
])
def test_a_spec_it_cannot_read_is_one_line_naming_the_field(tmp_path: Path, change, message: str) -> None:  # type: ignore[no-untyped-def]
    path = spec_file(tmp_path, "http://127.0.0.1:9/v1")
    tree = orjson.loads(path.read_bytes())
    change(tree)
    path.write_bytes(orjson.dumps(tree))
    line = assert_one_line_error(nel("eval", "run", "--spec", str(path), cwd=tmp_path), 2)
    assert str(path) in line and message in line
    line = assert_one_line_error(nel("eval", "run", "--spec", "env", cwd=tmp_path,
                                     env=clean_env(NEL_RUN_SPEC=path.read_text())), 2)
    assert "NEL_RUN_SPEC" in line and message in line


def test_a_spec_that_is_not_json_or_not_there_is_named(tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text("{not json")
    line = assert_one_line_error(nel("eval", "run", "--spec", str(tmp_path / "broken.json"), cwd=tmp_path), 2)
    assert "broken.json" in line and "not a JSON run specification" in line
    line = assert_one_line_error(nel("eval", "run", "--spec", str(tmp_path / "missing.json"), cwd=tmp_path), 2)
    assert "missing.json" in line
    line = assert_one_line_error(nel("eval", "run", "--spec", "env", cwd=tmp_path), 2)
    assert "NEL_RUN_SPEC" in line
