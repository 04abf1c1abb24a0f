"""`nel eval run`, `nel sql`, `nel list`, `nel validate` end to end: real subprocesses against the mock
model on loopback, checked through the store they leave behind."""

from __future__ import annotations

import http.server
import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb
import orjson
import polars as pl
import pytest
from nel_helpers import NEL, assert_ok, assert_one_line_error, clean_env, eval_args, nel

from workbench.mock import MockHandle
from workbench.resources import sql_path
from workbench.store import open_store

pytestmark = pytest.mark.timeout(60)

PROBLEMS, REPEATS = 20, 3


@pytest.fixture(scope="module")
def finished(
    mock: MockHandle, tmp_path_factory: pytest.TempPathFactory
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """One completed `nel eval run` (20 problems x 3 repeats, 64 in flight) and its output dir."""
    out = tmp_path_factory.mktemp("cli-run")
    proc = nel(
        *eval_args(
            mock.base_url, problems=PROBLEMS, repeats=REPEATS, output_dir=out / "results", concurrency=64
        ),
        cwd=out,
    )
    assert_ok(proc)
    return proc, out / "results"


def _store(finished: tuple[subprocess.CompletedProcess[str], Path]) -> Path:
    return finished[1] / "nel.duckdb"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TestEvalRun:
    """`nel eval run` against the mock: the summary it prints and the store it fills."""

    def test_prints_pass_at_1_to_k_with_95_percent_intervals(self, finished):
        proc, _ = finished
        for k in range(1, REPEATS + 1):
            assert re.search(rf"pass@{k}\s+\d\.\d{{4}}\s+95% CI \[\d\.\d{{4}}, \d\.\d{{4}}\]", proc.stdout), (
                proc.stdout
            )
        assert f"pass@{REPEATS + 1}" not in proc.stdout
        assert f"steps    {PROBLEMS * REPEATS}/{PROBLEMS * REPEATS}" in proc.stdout
        assert "complete" in proc.stdout.splitlines()[0]

    def test_announces_the_run_on_stderr_and_writes_a_summary_json(self, finished):
        proc, out = finished
        run_id = open_store(out).runs()["run_id"][0]
        assert f"starting run {run_id}" in proc.stderr
        data = orjson.loads((out / "runs" / run_id / "summary.json").read_bytes())
        assert data["status"] == "complete"
        assert sorted(data["pass_at_k"]) == [str(k) for k in range(1, REPEATS + 1)]
        assert data["n_steps"] == PROBLEMS * REPEATS

    def test_store_holds_one_step_per_problem_and_repeat(self, finished):
        steps = open_store(_store(finished)).steps()
        assert steps.height == PROBLEMS * REPEATS
        keys = steps.select("run_id", "task_idx", "repeat").unique()
        assert keys.height == PROBLEMS * REPEATS
        assert steps["run_id"].n_unique() == 1
        assert sorted(steps["task_idx"].unique().to_list()) == list(range(PROBLEMS))
        assert sorted(steps["repeat"].unique().to_list()) == list(range(REPEATS))

    def test_every_step_column_is_filled_sensibly(self, finished):
        store = open_store(_store(finished))
        steps = store.steps()
        tasks = store.sql(
            "SELECT rt.task_idx, t.task_id, t.prompt, t.expected_answer "
            "FROM run_tasks rt JOIN tasks t USING (task_id)"
        )
        by_idx = {r["task_idx"]: r for r in tasks.iter_rows(named=True)}
        assert len(by_idx) == PROBLEMS
        for row in steps.iter_rows(named=True):
            task = by_idx[row["task_idx"]]
            assert row["task_id"] == task["task_id"]
            assert row["prompt"] == task["prompt"] and row["prompt"].strip()
            assert row["expected_answer"] == task["expected_answer"]
            messages = orjson.loads(row["messages"])
            assert [m["role"] for m in messages] == ["user"]  # the reply is stored once, as response
            assert messages[0]["content"] == row["prompt"]
            assert row["response"].strip()
            assert row["finish_reason"] is not None
            assert row["http_status"] == 200 and row["n_retries"] == 0 and row["error"] is None
            assert row["prompt_tokens"] > 0 and row["completion_tokens"] > 0
            assert row["total_tokens"] == row["prompt_tokens"] + row["completion_tokens"]
            assert row["latency_ms"] > 0
            assert row["latency_ms"] == pytest.approx(row["seed_ms"] + row["model_ms"] + row["verify_ms"])
            assert re.fullmatch(r"[0-9a-f]{64}", row["request_hash"])
            assert row["scoring_method"]
            assert orjson.loads(row["scoring_details"])["method"] == row["scoring_method"]
            assert row["shard_idx"] == 0 and row["started_at"] is not None
            assert row["passed"] == (row["reward"] >= 1.0)
            if row["passed"]:
                assert row["failure_category"] is None
                assert float(row["extracted_answer"]) == float(row["expected_answer"])
            if row["failure_category"] is None:
                assert row["extracted_answer"] is not None

    def test_same_request_gives_same_hash_and_each_problem_its_own(self, finished):
        steps = open_store(_store(finished)).steps()
        per_task = steps.group_by("task_idx").agg(n=pl.col("request_hash").n_unique())
        assert per_task["n"].to_list() == [1] * PROBLEMS  # no seed: repeats send the same body
        assert steps["request_hash"].n_unique() == PROBLEMS

    def test_run_row_is_complete_with_its_configuration_and_no_live_segments_left(self, finished):
        store = open_store(_store(finished))
        runs = store.sql("SELECT * FROM runs")
        assert runs.height == 1
        run = runs.row(0, named=True)
        assert run["status"] == "complete" and run["finished_at"] is not None
        assert (run["n_tasks"], run["n_repeats"], run["model_id"]) == (PROBLEMS, REPEATS, "nel-mock")
        assert run["model_url"].endswith("/v1/chat/completions")
        assert orjson.loads(run["config"])["max_concurrent"] == 64
        segments = _store(finished).with_name("nel.duckdb.segments")
        assert not segments.exists() or not any(segments.iterdir())

    def test_run_metrics_agree_with_the_printed_pass_at_1(self, finished):
        proc, out = finished
        metrics = open_store(out).runs().row(0, named=True)
        printed = float(re.search(r"pass@1\s+(\d\.\d{4})", proc.stdout)[1])  # type: ignore[index]
        assert metrics["pass_at_1"] == pytest.approx(printed, abs=5e-5)
        assert metrics["n_steps"] == metrics["n_steps_expected"] == PROBLEMS * REPEATS


class TestSql:
    """`nel sql`: three output formats, named queries, one-line errors."""

    def test_table_csv_and_json_formats_give_the_same_answer(self, finished, tmp_path):
        store = str(_store(finished))
        query = "SELECT task_idx, count(*) AS n FROM steps GROUP BY task_idx ORDER BY task_idx"
        with ThreadPoolExecutor(3) as pool:  # three readers of one store at once, as a bonus
            table, csv, js = pool.map(
                lambda fmt: nel("sql", query, "--store", store, "--format", fmt, cwd=tmp_path),
                ["table", "csv", "json"],
            )
        for proc in (table, csv, js):
            assert_ok(proc)
        assert f"({PROBLEMS} rows)" in table.stdout
        lines = csv.stdout.strip().splitlines()
        assert lines[0] == "task_idx,n" and lines[1:] == [f"{i},{REPEATS}" for i in range(PROBLEMS)]
        assert orjson.loads(js.stdout) == [{"task_idx": i, "n": REPEATS} for i in range(PROBLEMS)]

    def test_named_query_sometimes_pass_lists_only_mixed_tasks(self, finished, tmp_path):
        proc = nel(
            "sql",
            "--named",
            "sometimes_pass",
            "--store",
            str(_store(finished)),
            "--format",
            "json",
            cwd=tmp_path,
        )
        assert_ok(proc)
        rows = orjson.loads(proc.stdout)
        assert rows, "the mock's skill profile gives some tasks a mixed record"
        assert all(0 < r["n_pass"] < r["n"] == REPEATS for r in rows)
        expected = open_store(_store(finished)).sql(
            "SELECT task_idx FROM steps GROUP BY task_idx HAVING bool_or(passed) AND NOT bool_and(passed) "
            "ORDER BY task_idx"
        )
        assert sorted(r["task_idx"] for r in rows) == expected["task_idx"].to_list()

    def test_every_named_query_runs_over_the_store(self, finished):
        store = open_store(_store(finished))
        for path in sorted(sql_path("queries").glob("*.sql")):
            store.sql(path.read_text())  # the CLI runs the same text; one subprocess above is enough

    def test_unknown_named_query_lists_the_known_ones(self, finished, tmp_path):
        line = assert_one_line_error(
            nel("sql", "--named", "nope", "--store", str(_store(finished)), cwd=tmp_path), 2
        )
        assert "sometimes_pass" in line

    def test_sql_syntax_error_exits_2_with_one_line(self, finished, tmp_path):
        proc = nel("sql", "SELEC count(*) FROM steps", "--store", str(_store(finished)), cwd=tmp_path)
        line = assert_one_line_error(proc, 2)
        assert "SQL error" in line
        assert proc.stdout == ""

    def test_query_against_a_missing_store_exits_2(self, tmp_path):
        line = assert_one_line_error(
            nel("sql", "SELECT 1", "--store", str(tmp_path / "nowhere"), cwd=tmp_path), 2
        )
        assert "no store here" in line


class TestCatalogue:
    """`nel list` and `nel validate`."""

    def test_list_shows_gsm8k_with_its_size(self, tmp_path):
        proc = nel("list", cwd=tmp_path)
        assert_ok(proc)
        header = ["NAME", "DOMAIN", "SIZE", "REPEATS", "SCORER", "SOURCE", "PRESENT"]
        assert proc.stdout.split("\n")[0].split() == header
        assert re.search(r"^gsm8k\s+math\s+1319\s+4\s+numeric\s+builtin\s+n/a$", proc.stdout, re.M), proc.stdout

    def test_list_json_is_machine_readable(self, tmp_path):
        proc = nel("list", "--json", cwd=tmp_path)
        assert_ok(proc)
        infos = {i["name"]: i for i in orjson.loads(proc.stdout)}
        assert infos["gsm8k"]["size"] == 1319

    def test_validate_checks_the_answer_key_scores_one(self, tmp_path):
        proc = nel("validate", "-b", "gsm8k", "--samples", "3", cwd=tmp_path)
        assert_ok(proc)
        assert proc.stdout.count(" OK") == 3
        assert "3/3 sampled expected answers score 1.0" in proc.stdout


class TestUsageErrors:
    """Mistakes a user can make: exit 2 (usage) or 1 (run failed), one line, no traceback."""

    def test_unknown_benchmark_exits_2_listing_known_ones(self, mock, tmp_path):
        args = eval_args(mock.base_url, problems=1, repeats=1, output_dir=tmp_path / "o")
        args[args.index("gsm8k")] = "nosuch"
        line = assert_one_line_error(nel(*args, cwd=tmp_path), 2)
        assert "'nosuch'" in line and "known benchmarks:" in line and "gsm8k" in line and "lm-eval://" in line

    def test_unreachable_model_exits_1_quickly_with_a_clear_message(self, tmp_path):
        url = f"http://127.0.0.1:{_closed_port()}/v1"
        t0 = time.perf_counter()
        proc = nel(
            *eval_args(url, problems=5, repeats=1, output_dir=tmp_path / "o"), cwd=tmp_path, timeout=30
        )
        elapsed = time.perf_counter() - t0
        line = assert_one_line_error(proc, 1)
        assert "cannot reach the model" in line and "check the model URL" in line
        assert elapsed < 15, f"took {elapsed:.1f} s to give up"
        assert not (tmp_path / "o" / "nel.duckdb").exists()

    def test_invalid_model_settings_exit_2(self, mock, tmp_path):
        extra = ["--max-retries", "-1"]
        proc = nel(
            *eval_args(mock.base_url, problems=1, repeats=1, output_dir=tmp_path / "o", extra=extra),
            cwd=tmp_path,
        )
        assert "--max-retries" in assert_one_line_error(proc, 2)

    def test_a_text_file_is_not_a_store_for_sql(self, tmp_path):
        bogus = tmp_path / "notes.txt"
        bogus.write_text("hello, not a database\n")
        line = assert_one_line_error(nel("sql", "SELECT 1", "--store", str(bogus), cwd=tmp_path), 2)
        assert "not a nel store" in line

    def test_a_text_file_is_refused_as_a_store_by_eval_run_before_any_step_runs(self, mock, tmp_path):
        bogus = tmp_path / "notes.txt"
        bogus.write_text("hello, not a database\n")
        proc = nel(*eval_args(mock.base_url, problems=3, repeats=1, store=bogus), cwd=tmp_path)
        assert "not a nel store" in assert_one_line_error(proc, 2)
        assert "starting run" not in proc.stderr
        assert not (tmp_path / "notes.txt.segments").exists()
        assert bogus.read_text() == "hello, not a database\n"

    def test_a_duckdb_file_without_nel_tables_is_not_a_store(self, tmp_path):
        other = tmp_path / "other.duckdb"
        duckdb.connect(str(other)).execute("CREATE TABLE t AS SELECT 1 AS x").close()
        line = assert_one_line_error(nel("sql", "SELECT * FROM t", "--store", str(other), cwd=tmp_path), 2)
        assert "not a nel store" in line

    def _newer_store(self, path: Path) -> Path:
        con = duckdb.connect(str(path))
        con.execute(sql_path("schema.sql").read_text())
        con.execute("UPDATE nel_meta SET value = '99' WHERE key = 'schema_version'")
        con.close()
        return path

    def test_a_store_from_a_newer_schema_is_refused_by_sql(self, tmp_path):
        store = self._newer_store(tmp_path / "nel.duckdb")
        line = assert_one_line_error(nel("sql", "SELECT 1", "--store", str(store), cwd=tmp_path), 2)
        assert "newer" in line and "99" in line

    def test_a_store_from_a_newer_schema_is_refused_by_eval_run_before_any_step_runs(self, mock, tmp_path):
        store = self._newer_store(tmp_path / "nel.duckdb")
        proc = nel(*eval_args(mock.base_url, problems=3, repeats=1, store=store), cwd=tmp_path)
        assert "newer" in assert_one_line_error(proc, 2)
        assert "starting run" not in proc.stderr
        assert not store.with_name("nel.duckdb.segments").exists()
        con = duckdb.connect(str(store), read_only=True)
        assert con.execute("SELECT count(*) FROM steps").fetchone() == (0,)
        con.close()


class _EchoKeyHandler(http.server.BaseHTTPRequestHandler):
    """An endpoint that rejects the key and quotes it back, as some OpenAI-compatible servers do."""

    status = 401

    def _send(self, code: int, body: dict) -> None:
        data = orjson.dumps(body)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send(200, {"object": "list", "data": []})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        key = self.headers.get("Authorization", "").removeprefix("Bearer ")
        self._send(self.server.status, {"error": {"message": f"Incorrect API key provided: {key}"}})  # type: ignore[attr-defined]

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def echo_key_server(request: pytest.FixtureRequest) -> Iterator[str]:
    """Base URL of a server answering every completion with ``request.param`` and the key quoted back."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _EchoKeyHandler)
    server.status = request.param  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


class TestSecrets:
    """API keys reach the model only: never the store, the output dir, or the terminal."""

    def _all_text_in_store(self, store: Path) -> str:
        """Every value of every table, as text (the file itself may compress strings)."""
        con = duckdb.connect(str(store), read_only=True)
        try:
            tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
            parts = []
            for table in tables:
                parts += [str(r) for r in con.execute(f"SELECT * FROM {table}").fetchall()]
            return "\n".join(parts)
        finally:
            con.close()

    def _assert_secret_nowhere(self, secret: str, out: Path, proc: subprocess.CompletedProcess[str]) -> None:
        assert_ok(proc)
        assert secret not in proc.stdout and secret not in proc.stderr
        files = [p for p in out.rglob("*") if p.is_file()]
        assert any(p.name == "nel.duckdb" for p in files) and any(p.suffix == ".json" for p in files)
        for path in files:
            assert secret.encode() not in path.read_bytes(), f"{secret} leaked into {path}"
        assert secret not in self._all_text_in_store(out / "nel.duckdb")

    def test_key_from_openai_api_key_env_is_never_written(self, mock, tmp_path):
        secret = "sk-test-ENVSECRET-0123456789abcdef"
        out = tmp_path / "o"
        proc = nel(
            *eval_args(mock.base_url, problems=5, repeats=2, output_dir=out),
            cwd=tmp_path,
            env=clean_env(OPENAI_API_KEY=secret),
        )
        self._assert_secret_nowhere(secret, out, proc)

    def test_key_from_api_key_flag_is_never_written(self, mock, tmp_path):
        secret = "sk-test-FLAGSECRET-0123456789abcdef"
        out = tmp_path / "o"
        proc = nel(
            *eval_args(mock.base_url, problems=5, repeats=2, output_dir=out, extra=["--api-key", secret]),
            cwd=tmp_path,
        )
        self._assert_secret_nowhere(secret, out, proc)

    def test_credentials_in_the_url_are_never_written(self, mock, tmp_path):
        password, query_key = "USERINFOSECRET0123456789", "URLQUERYSECRET0123456789"
        out = tmp_path / "o"
        url = mock.base_url.replace("http://", f"http://user:{password}@")
        url += f"/chat/completions?api_key={query_key}"
        proc = nel(*eval_args(url, problems=5, repeats=2, output_dir=out), cwd=tmp_path)
        self._assert_secret_nowhere(password, out, proc)
        self._assert_secret_nowhere(query_key, out, proc)

    @pytest.mark.parametrize("echo_key_server", [401, 400], indirect=True)
    def test_a_key_quoted_back_by_the_server_is_never_written(self, echo_key_server, tmp_path):
        secret = "sk-test-ECHOEDSECRET-0123456789"
        out = tmp_path / "o"
        proc = nel(
            *eval_args(echo_key_server, problems=3, repeats=1, output_dir=out),
            cwd=tmp_path,
            env=clean_env(OPENAI_API_KEY=secret),
        )
        assert proc.returncode in (0, 1), proc.stderr
        assert secret not in proc.stdout and secret not in proc.stderr
        assert secret not in self._all_text_in_store(out / "nel.duckdb")
        for path in (p for p in out.rglob("*") if p.is_file()):
            assert secret.encode() not in path.read_bytes(), f"{secret} leaked into {path}"


def test_a_store_path_with_an_apostrophe_works(mock, tmp_path):
    out = tmp_path / "o'brien results"
    proc = nel(*eval_args(mock.base_url, problems=5, repeats=2, output_dir=out), cwd=tmp_path)
    assert_ok(proc)
    assert open_store(out).sql("SELECT count(*) AS n FROM db.steps")["n"][0] == 10


def test_nel_sql_cannot_modify_the_store(finished, tmp_path):
    store = _store(finished)
    before = open_store(store).steps().height
    assert_one_line_error(nel("sql", "DELETE FROM db.steps", "--store", str(store), cwd=tmp_path), 2)
    for statement in ("DROP TABLE db.runs", "UPDATE db.steps SET reward = 0"):  # the same path, in-process
        with pytest.raises(duckdb.Error):
            open_store(store).sql(statement)
    assert open_store(store).steps().height == before
    assert open_store(store).sql("SELECT count(*) AS n FROM runs")["n"][0] == 1


def test_help_is_fast(tmp_path):
    t0 = time.perf_counter()
    proc = subprocess.run(
        [NEL, "--help"], cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=30
    )
    elapsed = time.perf_counter() - t0
    print(f"nel --help took {elapsed * 1000:.0f} ms")
    assert proc.returncode == 0 and "eval" in proc.stdout
    assert elapsed < 1.5


def test_step_times_fall_inside_their_run_whatever_the_local_timezone(mock, tmp_path):
    out = tmp_path / "o"
    proc = nel(
        *eval_args(mock.base_url, problems=5, repeats=2, output_dir=out),
        cwd=tmp_path,
        env=clean_env(TZ="Asia/Tokyo"),
    )
    assert_ok(proc)
    row = (
        open_store(out)
        .sql(
            "SELECT r.created_at, r.finished_at, min(s.started_at) AS first, max(s.started_at) AS last, "
            "min(sh.started_at) AS shard_start FROM runs r JOIN steps s USING (run_id) "
            "JOIN run_shards sh USING (run_id) GROUP BY ALL"
        )
        .row(0, named=True)
    )
    assert row["created_at"] <= row["shard_start"] <= row["first"] <= row["last"] <= row["finished_at"]


def test_demo_runs_gsm8k_against_the_built_in_mock_end_to_end(tmp_path):
    out = tmp_path / "demo"
    proc = nel(
        "demo", "--problems", "10", "--repeats", "2", "--output-dir", str(out), "--no-progress", cwd=tmp_path
    )
    assert_ok(proc)
    assert "mock model" in proc.stderr and "pass@2" in proc.stdout and "Next things to try" in proc.stdout
    metrics = open_store(out).runs().row(0, named=True)
    assert (metrics["status"], metrics["n_steps"], metrics["model_id"]) == ("complete", 20, "nel-mock")
