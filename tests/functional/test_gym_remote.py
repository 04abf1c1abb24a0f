"""`nel eval run --bench gym://…`: remote environments, tested against real servers on loopback.

Round trip: a `nel serve -b gsm8k` subprocess evaluated through `gym://` gives the same rewards, task by
task and attempt by attempt, as the local gsm8k run with the same mock model. Interoperability: NeMo
Gym's own `resources_servers.math_with_judge` (from `.venv-gym`, `should_use_judge: false`, offline)
scores the mock's answers through `protocol=native`, and its rewards are 1 exactly where the mock
boxed the right answer (that server reads only the last `\\boxed{}`).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from gym_helpers import GYM_PYTHON, NOT_INSTALLED, gym_resources_server
from nel_helpers import NEL, assert_ok, assert_one_line_error, clean_env, free_port, nel, stop

from workbench.environments import get_environment
from workbench.errors import UsageError
from workbench.mock import MockHandle
from workbench.store import open_store

pytestmark = pytest.mark.timeout(240)

needs_gym = pytest.mark.skipif(not GYM_PYTHON.exists(), reason=NOT_INSTALLED)
PROBLEMS, REPEATS = 20, 2
NATIVE_PROBLEMS, NATIVE_REPEATS = 12, 4
GYM_CONFIG = """\
dry_run: false
head_server:
  host: 127.0.0.1
  port: {head_port}
math_with_judge:
  resources_servers:
    math_with_judge:
      entrypoint: app.py
      host: 127.0.0.1
      port: {port}
      judge_model_server:
        type: responses_api_models
        name: policy_model
      judge_responses_create_params:
        input: []
      should_use_judge: false
"""


def _run_args(bench: str, mock: MockHandle, out: Path, *, problems: int, repeats: int) -> list[str]:
    return ["eval", "run", "-b", bench, "--model-url", mock.base_url, "--model-id", "nel-mock",
            "--repeats", str(repeats), "--max-problems", str(problems), "--max-concurrent", "16", "--no-progress",
            "--output-dir", str(out)]


def _steps(out: Path) -> list[dict[str, Any]]:
    return open_store(out / "nel.duckdb").dicts(
        "SELECT task_idx, repeat, task_id, reward, response, extracted_answer, expected_answer, scoring_method, "
        "scoring_details, messages, prompt_tokens, completion_tokens, model_ms, verify_ms, seed_ms "
        "FROM steps ORDER BY task_idx, repeat"
    )


def _pass_at_1(proc: subprocess.CompletedProcess[str]) -> str:
    match = re.search(r"pass@1\s+(\S+)", proc.stdout)
    assert match, proc.stdout
    return match.group(1)


@pytest.fixture(scope="module")
def gym_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """NeMo Gym's math_with_judge resources server (library verifier only: offline) on loopback: host:port."""
    with gym_resources_server("math_with_judge", GYM_CONFIG, tmp_path_factory.mktemp("gym") / "server.log") as at:
        yield at


def _gym_rows(path: Path, n: int, *, with_question: bool = True) -> Path:
    """The first ``n`` GSM8K problems as Gym math rows: the gsm8k prompt as input, plus expected_answer."""
    env = get_environment("gsm8k")
    lines = []
    for i in range(n):
        seed = env.seed(i)
        row: dict[str, object] = {"responses_create_params": {"input": [{"role": "user", "content": seed.prompt}]},
                                  "expected_answer": seed.expected_answer}
        if with_question:
            row["question"] = seed.prompt
        lines.append(orjson.dumps(row))
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _last_boxed(text: str) -> str | None:
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    end = text.find("}", start)
    return text[start + len("\\boxed{"):end] if end > 0 else None


class TestRoundTrip:
    """gym:// against `nel serve` = the local run of the same benchmark."""

    def test_same_rewards_per_task_and_attempt_as_the_local_run(self, mock, nel_serve, tmp_path):
        local = nel(*_run_args("gsm8k", mock, tmp_path / "local", problems=PROBLEMS, repeats=REPEATS), cwd=tmp_path)
        assert_ok(local)
        remote = nel(*_run_args(nel_serve, mock, tmp_path / "remote", problems=PROBLEMS, repeats=REPEATS),
                     cwd=tmp_path)
        assert_ok(remote)
        a, b = _steps(tmp_path / "local"), _steps(tmp_path / "remote")
        assert len(a) == len(b) == PROBLEMS * REPEATS
        assert [(s["task_idx"], s["repeat"], s["task_id"], s["reward"], s["extracted_answer"]) for s in a] == \
               [(s["task_idx"], s["repeat"], s["task_id"], s["reward"], s["extracted_answer"]) for s in b]
        assert _pass_at_1(local) == _pass_at_1(remote)
        assert 0 < sum(float(s["reward"]) for s in b) < len(b)  # the mock gets some right, some wrong
        # the engine made the model call: transcript, tokens and timings are there as for a local run
        step = b[0]
        assert orjson.loads(step["messages"])[-1]["role"] == "user"
        assert step["prompt_tokens"] and step["completion_tokens"] and step["model_ms"] > 0 and step["verify_ms"] > 0
        assert orjson.loads(step["scoring_details"])["remote"].startswith("http://127.0.0.1:")

    def test_resume_continues_against_the_same_server(self, mock, nel_serve, tmp_path):
        out = tmp_path / "out"
        assert_ok(nel(*_run_args(nel_serve, mock, out, problems=2, repeats=1), cwd=tmp_path))
        again = nel(*_run_args(nel_serve, mock, out, problems=2, repeats=1), "--resume", cwd=tmp_path)
        assert_ok(again)
        assert "0 new steps" in again.stdout

    def test_the_run_identity_names_the_server(self, nel_serve):
        from workbench.gym.remote import remote_environment

        port = nel_serve.rsplit(":", 1)[1]
        a, b = remote_environment(f"gym://127.0.0.1:{port}"), remote_environment(f"gym://localhost:{port}")
        assert len(a) == len(b) == len(get_environment("gsm8k"))
        assert a.seed(3) == b.seed(3) and a.seed(3).task_id == get_environment("gsm8k").seed(3).task_id
        assert a.data_hash != b.data_hash


class TestNativeGym:
    """gym://…?protocol=native against NeMo Gym's own math_with_judge server."""

    @needs_gym
    def test_rewards_are_one_exactly_where_the_mock_boxed_the_right_answer(self, mock, gym_server, tmp_path):
        rows = _gym_rows(tmp_path / "rows.jsonl", NATIVE_PROBLEMS)
        bench = f"gym://{gym_server}?protocol=native&data={rows}"
        proc = nel(*_run_args(bench, mock, tmp_path / "out", problems=NATIVE_PROBLEMS, repeats=NATIVE_REPEATS),
                   cwd=tmp_path, timeout=180)
        assert_ok(proc)
        steps = _steps(tmp_path / "out")
        assert len(steps) == NATIVE_PROBLEMS * NATIVE_REPEATS
        for s in steps:
            boxed = _last_boxed(str(s["response"] or ""))
            right = boxed is not None and boxed.replace(",", "").strip() == str(s["expected_answer"]).replace(",", "")
            assert float(s["reward"]) == (1.0 if right else 0.0), s
            details = orjson.loads(s["scoring_details"])
            assert details["method"] == "gym_native" and "library_reward" in details  # the server's own fields
            assert "response" not in details and "responses_create_params" not in details
        rewards = [float(s["reward"]) for s in steps]
        assert 0 < sum(rewards) < len(rewards), "the check needs both right and wrong boxed answers"
        assert all(s["prompt_tokens"] and s["messages"] for s in steps)

    @needs_gym
    def test_the_run_identity_follows_the_rows_file(self, gym_server, tmp_path):
        from workbench.gym.remote import remote_environment

        first = remote_environment(f"gym://{gym_server}?protocol=native&data={_gym_rows(tmp_path / 'a.jsonl', 3)}")
        same = remote_environment(f"gym://{gym_server}?protocol=native&data={_gym_rows(tmp_path / 'b.jsonl', 3)}")
        other = remote_environment(f"gym://{gym_server}?protocol=native&data={_gym_rows(tmp_path / 'c.jsonl', 4)}")
        assert first.data_hash == same.data_hash != other.data_hash  # the content counts, not the path

    @needs_gym
    def test_a_server_that_refuses_the_rows_stops_the_run_with_its_own_words(self, mock, gym_server, tmp_path):
        rows = _gym_rows(tmp_path / "rows.jsonl", 2, with_question=False)
        bench = f"gym://{gym_server}?protocol=native&data={rows}"
        proc = nel(*_run_args(bench, mock, tmp_path / "out", problems=2, repeats=1), cwd=tmp_path)
        line = assert_one_line_error(proc, 1)
        assert "HTTP 422" in line and "question" in line and f"http://{gym_server}/verify" in line


class TestPlainURLAgainstAGymServer:
    """`gym://HOST:PORT` as a user first types it, pointed at a NeMo Gym resources server."""

    @needs_gym
    def test_without_rows_it_says_in_one_line_what_to_add(self, mock, gym_server, tmp_path):
        proc = nel(*_run_args(f"gym://{gym_server}", mock, tmp_path / "out", problems=1, repeats=1), cwd=tmp_path)
        line = assert_one_line_error(proc, 2)
        assert "is a NeMo Gym resources server" in line
        assert line.endswith(f"gym://{gym_server}?protocol=native&data=ROWS.jsonl")
        assert not (tmp_path / "out" / "nel.duckdb").exists()

    @needs_gym
    def test_the_hint_keeps_the_urls_other_parameters(self, gym_server, monkeypatch):
        from workbench.gym.remote import remote_environment

        monkeypatch.setenv("GYM_TOKEN", "t")
        with pytest.raises(UsageError) as refused:
            remote_environment(f"gym://{gym_server}?auth_token_env=GYM_TOKEN&timeout=30")
        assert str(refused.value).endswith(
            f"gym://{gym_server}?protocol=native&data=ROWS.jsonl&auth_token_env=GYM_TOKEN&timeout=30")

    @needs_gym
    def test_data_alone_speaks_gyms_protocol_and_exported_rows_keep_nels_task_ids(self, mock, gym_server, tmp_path):
        """Rows `nel serve --export-data` wrote (with the question math_with_judge reads) run against Gym's own
        server under the task ids of the native gsm8k run: the two runs pair."""
        from workbench.serve.export import gym_rows

        env = get_environment("gsm8k")
        rows = [{**row, "question": row["responses_create_params"]["input"][-1]["content"]}
                for row, _ in zip(gym_rows(env), range(3), strict=False)]
        (tmp_path / "rows.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
        proc = nel(*_run_args(f"gym://{gym_server}?data=rows.jsonl", mock, tmp_path / "out", problems=3, repeats=1),
                   cwd=tmp_path)
        assert_ok(proc)
        steps = _steps(tmp_path / "out")
        assert [s["task_id"] for s in steps] == [env.seed(i).task_id for i in range(3)]
        assert {orjson.loads(s["scoring_details"])["method"] for s in steps} == {"gym_native"}


class TestBadInput:
    """Bad URLs, missing data and unreachable servers: one-line errors, no traceback."""

    @pytest.mark.parametrize(("bench", "part"), [
        ("gym://127.0.0.1", "port"),
        ("gym://127.0.0.1:70000", "port"),
        ("gum://127.0.0.1:80", "scheme"),
        ("gym://127.0.0.1:80?protocol=rest", "protocol"),
        ("gym://127.0.0.1:80?protocol=native&data=missing.jsonl", "data"),
    ])
    def test_bad_url_is_a_usage_error_naming_the_part(self, mock, tmp_path, bench, part):
        proc = nel(*_run_args(bench, mock, tmp_path / "out", problems=1, repeats=1), cwd=tmp_path)
        line = assert_one_line_error(proc, 2)
        assert f": {part}: " in line

    @pytest.mark.parametrize("query", ["", "?protocol=native&data=rows.jsonl"])
    def test_unreachable_server_names_the_url(self, mock, tmp_path, query):
        _gym_rows(tmp_path / "rows.jsonl", 1)
        port = free_port()
        proc = nel(*_run_args(f"gym://127.0.0.1:{port}{query}", mock, tmp_path / "out", problems=1, repeats=1),
                   cwd=tmp_path)
        line = assert_one_line_error(proc, 1)
        assert f"cannot reach the gym server at http://127.0.0.1:{port}" in line
        assert not (tmp_path / "out" / "nel.duckdb").exists()  # nothing started

    def test_a_bad_gym_row_names_file_and_line(self, mock, tmp_path):
        (tmp_path / "rows.jsonl").write_text('{"responses_create_params": {"input": []}}\n')
        proc = nel(*_run_args(f"gym://127.0.0.1:{free_port()}?protocol=native&data=rows.jsonl", mock,
                              tmp_path / "out", problems=1, repeats=1), cwd=tmp_path)
        line = assert_one_line_error(proc, 2)
        assert "rows.jsonl:1: not a NeMo Gym row" in line

    def test_a_4xx_from_nel_serve_is_reported_with_the_server_text(self, mock, tmp_path):
        proc = subprocess.Popen([NEL, "serve", "-b", "gsm8k", "--port", "0"], cwd=tmp_path,
                                env=clean_env(NEL_SERVE_TOKEN="right"), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
        try:
            assert proc.stdout is not None
            match = re.search(r" at http://([\d.]+:\d+)", proc.stdout.readline())
            assert match
            bench = f"gym://{match.group(1)}?auth_token_env=GYM_TOKEN"
            env = clean_env(GYM_TOKEN="wrong")
            bad = nel(*_run_args(bench, mock, tmp_path / "bad", problems=2, repeats=1), cwd=tmp_path, env=env)
            line = assert_one_line_error(bad, 1)
            assert "HTTP 401" in line and match.group(1) in line
            good = nel(*_run_args(bench, mock, tmp_path / "good", problems=2, repeats=1), cwd=tmp_path,
                       env=clean_env(GYM_TOKEN="right"))
            assert_ok(good)
        finally:
            stop(proc)


def test_the_gym_interpreter_is_the_one_ci_installs():
    """`make gym` builds .venv-gym; say plainly when it is missing rather than pass silently."""
    if not GYM_PYTHON.exists():
        pytest.skip("NeMo Gym is not installed in .venv-gym (run `make gym`; needs Python 3.13)")
    code = "import resources_servers, nemo_gym, sys; print(sys.version_info[:2])"
    out = subprocess.run([str(GYM_PYTHON), "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("(3, 13)")
