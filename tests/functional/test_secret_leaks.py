"""Secrets never leave `nel`: a model that echoes the request's headers, and a server error that quotes a URL
with a key in its query string, leave the key in no row of the store, no file of the output directory and no
line of the terminal (issue 14, item 11)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from nel_helpers import assert_ok, assert_one_line_error, clean_env, eval_args, nel

from workbench.mock import MockHandle, mock_model

API_KEY = "sk-test-SECRET123456"
QUERY_KEY = "QUERY-SECRET-987654"


@pytest.fixture(scope="module")
def echo() -> Iterator[MockHandle]:
    """The mock model replying with the request line and headers it got (its labelled --echo-headers feature)."""
    with mock_model(echo_headers=True) as handle:
        yield handle


def store_text(store: Path, cwd: Path) -> str:
    """Every row of every table and view of the store (the database and the live segments), as JSON text:
    asked through `nel sql`, because DuckDB compresses strings, so the file's bytes are not the whole story."""
    listing = nel("sql", "SELECT table_catalog || '.' || table_schema || '.' || table_name AS name "
                  "FROM information_schema.tables", "--store", str(store), "--format", "json", cwd=cwd)
    assert_ok(listing)
    names = [row["name"] for row in orjson.loads(listing.stdout)]
    assert any(name.endswith(".steps") for name in names), names
    query = " UNION ALL ".join(f"SELECT to_json(t)::VARCHAR AS row FROM {name} t" for name in names)
    rows = nel("sql", query, "--store", str(store), "--format", "json", cwd=cwd)
    assert_ok(rows)
    return rows.stdout


def files_holding(root: Path, secret: str) -> list[str]:
    """The files under ``root`` (the store, its segments and journals, workers' logs and state, exports) whose
    bytes hold ``secret``."""
    needle = secret.encode()
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes())


def checkpoint(store: Path, cwd: Path) -> None:
    assert_ok(nel("sql", "CHECKPOINT", "--store", str(store), cwd=cwd))


def assert_nowhere(secret: str, proc: subprocess.CompletedProcess[str], store: Path, root: Path) -> None:
    assert secret not in proc.stdout and secret not in proc.stderr
    assert secret not in store_text(store, root)
    checkpoint(store, root)
    assert files_holding(root, secret) == []


class TestAnEchoingModel:
    """The model puts the request's Authorization header in its answer: the answer is stored without the key."""

    def test_the_api_key_is_in_no_row_file_or_line(self, echo: MockHandle, tmp_path: Path) -> None:
        store = tmp_path / "out" / "nel.duckdb"
        proc = nel(*eval_args(echo.base_url, problems=3, repeats=2, store=store, output_dir=tmp_path / "out"),
                   cwd=tmp_path, env=clean_env(OPENAI_API_KEY=API_KEY))
        assert_ok(proc)
        text = store_text(store, tmp_path)
        assert API_KEY not in text
        assert "Authorization: Bearer <redacted>" in text  # the model did echo the header: redacted, kept
        exported = list((tmp_path / "out" / "runs").rglob("*.json*"))
        assert {p.name for p in exported} >= {"results.jsonl", "trajectories.jsonl"}
        assert any(p.name.startswith("eval-") for p in exported)
        assert_nowhere(API_KEY, proc, store, tmp_path)

    def test_shard_workers_logs_state_and_merged_store_hold_no_key(self, echo: MockHandle, tmp_path: Path) -> None:
        store = tmp_path / "out" / "nel.duckdb"
        proc = nel(*eval_args(echo.base_url, problems=4, repeats=2, store=store, output_dir=tmp_path / "out",
                              extra=["--shards", "2"]),
                   cwd=tmp_path, env=clean_env(NEMO_API_KEY=API_KEY), timeout=120)
        assert_ok(proc)
        assert list((tmp_path / "out").glob("nel.duckdb.workers/*/shard-1.log"))  # the workers' logs are there
        text = store_text(store, tmp_path)
        assert API_KEY not in text
        assert "Authorization: Bearer <redacted>" in text
        assert_nowhere(API_KEY, proc, store, tmp_path)


class TestAKeyInTheUrl:
    """A server error quoting the request URL (query string included) does not carry the key out."""

    def test_the_shard_error_and_the_printed_error_hold_no_key(self, echo: MockHandle, tmp_path: Path) -> None:
        store = tmp_path / "out" / "nel.duckdb"
        url = echo.base_url.removesuffix("/v1") + f"/nowhere?api_key={QUERY_KEY}"  # the echoing mock's 404 quotes it
        proc = nel(*eval_args(url, problems=2, repeats=1, store=store, output_dir=tmp_path / "out"), cwd=tmp_path)
        line = assert_one_line_error(proc, 1)
        assert QUERY_KEY not in line
        assert "HTTP 404" in line and "api_key=<redacted>" in line
        shards = nel("sql", "SELECT error FROM run_shards", "--store", str(store), "--format", "json", cwd=tmp_path)
        assert_ok(shards)
        errors = [row["error"] for row in orjson.loads(shards.stdout)]
        assert len(errors) == 1 and "Unknown request URL" in errors[0] and "api_key=<redacted>" in errors[0]
        assert_nowhere(QUERY_KEY, proc, store, tmp_path)

    def test_a_background_run_refuses_a_url_with_a_key(self, tmp_path: Path) -> None:
        """Its URL would be written to the launch's state file and every worker's command line."""
        url = f"http://127.0.0.1:9/v1?api_key={QUERY_KEY}"
        proc = nel(*eval_args(url, problems=2, repeats=1, store=tmp_path / "nel.duckdb", extra=["--shards", "2"]),
                   cwd=tmp_path)
        line = assert_one_line_error(proc, 2)
        assert "carries credentials" in line and QUERY_KEY not in proc.stdout + proc.stderr
        assert files_holding(tmp_path, QUERY_KEY) == []


def test_a_ray_run_refuses_a_url_carrying_a_key_before_any_task_sees_it(tmp_path):
    secret = "sk-test-RAYKEY987654321"
    proc = nel(*eval_args(f"http://127.0.0.1:9/v1?api_key={secret}", problems=2, repeats=1, output_dir=tmp_path),
               "--engine", "ray", "--shards", "2", cwd=tmp_path)
    assert "carries credentials" in assert_one_line_error(proc, 2)
    assert secret not in proc.stdout + proc.stderr
