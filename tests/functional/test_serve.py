"""``nel serve`` as a real subprocess on 127.0.0.1 (port 0): the Gym resources-server protocol end to end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from nel_helpers import command_line, descendants, running, wait_for
from waiting import wait_until

from workbench.environments import get_environment
from workbench.serve.process import ServeHandle, serve_process

TOKEN = "s3cret-token-for-tests"
SLOW_BENCH = '''
import os
import time
from pathlib import Path
from workbench.environments.byob import benchmark, scorer

def rows():
    return [{"q": "fast one", "target": "fast"}, {"q": "slow one", "target": "slow"}]

@benchmark(name="slow-echo", dataset=rows, prompt="Say: {q}", target_field="target", system_prompt="Be brief.")
@scorer
def check(sample):
    """Echo check whose verify of 'slow' takes two seconds (stands in for code execution); it starts by
    creating the file $NEL_TEST_SLOW_STARTED, so a test knows it is under way."""
    if sample.response == "slow":
        Path(os.environ["NEL_TEST_SLOW_STARTED"]).touch()
        time.sleep(2.0)
    return {"correct": sample.response == sample.target}
'''


@pytest.fixture(scope="module")
def server() -> Iterator[ServeHandle]:
    with serve_process(["-b", "gsm8k", "--port", "0", "--max-body-bytes", "65536"]) as handle:
        yield handle


@pytest.fixture(scope="module")
def gym_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeHandle]:
    out = tmp_path_factory.mktemp("export")
    env = {**os.environ, "NEL_SERVE_TOKEN": TOKEN}
    with serve_process(["-b", "gsm8k", "--port", "0", "--gym-compat", "--export-data", str(out), "--and-serve"],
                       env=env) as handle:
        yield handle


@pytest.fixture(scope="module")
def slow_started(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The file the slow verify creates as it starts."""
    return tmp_path_factory.mktemp("slow") / "started"


@pytest.fixture(scope="module")
def slow_server(tmp_path_factory: pytest.TempPathFactory, slow_started: Path) -> Iterator[ServeHandle]:
    path = tmp_path_factory.mktemp("byob") / "slow_bench.py"
    path.write_text(SLOW_BENCH)
    env = {**os.environ, "NEL_TEST_SLOW_STARTED": str(slow_started)}
    with serve_process(["-b", str(path), "--port", "0"], env=env) as handle:
        yield handle


@pytest.fixture
def client(server: ServeHandle) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=10) as c:
        yield c


def _responses(text: str, *extra: dict[str, Any]) -> dict[str, Any]:
    return {"id": "resp_1", "object": "response", "output": [
        *extra, {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}]}


def _error(reply: httpx.Response, status: int) -> dict[str, Any]:
    assert reply.status_code == status, reply.text
    assert reply.headers["content-type"].startswith("application/json")
    error: dict[str, Any] = reply.json()["error"]
    return error


class TestProtocol:
    """/health, /seed_session and /verify serve the benchmark with the engine's own seed and verify."""

    def test_ready_line_and_health_name_the_benchmark(self, server: ServeHandle, client: httpx.Client) -> None:
        assert (server.benchmark, server.size) == ("gsm8k", 1319)
        health = client.get("/health").json()
        assert health["status"] == "ok" and health["benchmark"] == "gsm8k" and health["dataset_size"] == 1319
        assert health["protocol"] == "nemo-gym-resources-server"

    def test_seed_session_is_the_environments_seed(self, client: httpx.Client) -> None:
        reply = client.post("/seed_session", json={"idx": 5})
        assert reply.status_code == 200
        seed = get_environment("gsm8k").seed(5)
        body = reply.json()
        assert body["prompt"] == seed.prompt and body["expected_answer"] == seed.expected_answer
        assert body["messages"] == list(seed.messages) and body["metadata"] == seed.metadata
        assert body["responses_create_params"] == {"input": list(seed.messages)}
        assert "nel_serve_session" in reply.headers["set-cookie"]

    def test_verify_evaluator_format_matches_the_environment(self, client: httpx.Client) -> None:
        env = get_environment("gsm8k")
        seed = env.seed(0)
        for text in (f"The answer is: {seed.expected_answer}", "The answer is: -3", "no idea"):
            reply = client.post("/verify", json={"response": text, "expected": seed.expected_answer,
                                                 "metadata": seed.metadata}).json()
            verdict = env.verify(text, seed.expected_answer, **seed.metadata)
            assert reply["reward"] == verdict.reward
            assert reply["extracted_answer"] == verdict.extracted_answer
            assert reply["scoring_details"]["method"] == verdict.scoring_details["method"]

    def test_verify_responses_object_scores_output_text_and_keeps_tool_calls(self, client: httpx.Client) -> None:
        call = {"type": "function_call", "name": "calculator", "arguments": '{"expr": "2+2"}', "call_id": "c1"}
        reasoning = {"type": "reasoning", "summary": [{"type": "summary_text", "text": "add them"}]}
        row = {"responses_create_params": {"input": [{"role": "user", "content": "2+2?"}]}, "expected_answer": "4",
               "uuid": "u-1", "response": _responses("The answer is: 4", reasoning, call)}
        body = client.post("/verify", json=row).json()
        assert body["reward"] == 1.0 and body["extracted_answer"] == "4"
        assert body["scoring_details"]["tool_calls"][0]["name"] == "calculator"
        assert body["scoring_details"]["reasoning"] == "add them"
        assert body["responses_create_params"] == row["responses_create_params"]
        assert body["response"] == row["response"] and body["uuid"] == "u-1"

    def test_verify_chat_completion_object(self, client: httpx.Client) -> None:
        completion = {"object": "chat.completion", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "The answer is: 12"}}]}
        body = client.post("/verify", json={"response": completion, "expected_answer": "12"}).json()
        assert body["reward"] == 1.0 and body["scoring_details"]["response_format"] == "chat_completions"

    def test_verify_with_only_idx_uses_the_benchmarks_answer(self, client: httpx.Client) -> None:
        expected = get_environment("gsm8k").seed(7).expected_answer
        body = client.post("/verify", json={"response": f"The answer is: {expected}", "idx": 7}).json()
        assert body["reward"] == 1.0 and body["expected_answer"] == expected and body["metadata"]["idx"] == 7

    def test_default_mode_does_not_echo_unknown_row_fields(self, client: httpx.Client) -> None:
        body = client.post("/verify", json={"response": "4", "expected": "4", "my_field": 1}).json()
        assert "my_field" not in body and "response" not in body


class TestGymCompat:
    """--gym-compat answers as a Gym resources server; the token and --export-data come with it here."""

    def test_every_request_needs_the_token(self, gym_server: ServeHandle) -> None:
        assert _error(httpx.get(f"{gym_server.url}/health"), 401)["field"] == "Authorization"
        wrong = httpx.get(f"{gym_server.url}/health", headers={"Authorization": "Bearer nope"})
        assert _error(wrong, 401)["message"].startswith("wrong")
        right = httpx.get(f"{gym_server.url}/health", headers={"Authorization": f"Bearer {TOKEN}"})
        assert right.status_code == 200 and right.json()["gym_compat"] is True
        assert TOKEN not in " ".join(gym_server.preamble)

    def test_export_rows_have_the_ng_collect_rollouts_shape(self, gym_server: ServeHandle) -> None:
        env = get_environment("gsm8k")
        path = Path(gym_server.preamble[0].rsplit(" to ", 1)[1])
        rows = [orjson.loads(line) for line in path.read_bytes().splitlines()]
        assert len(rows) == len(env) == 1319
        for idx in (0, 100, 1318):
            row, seed = rows[idx], env.seed(idx)
            assert row["responses_create_params"] == {"input": list(seed.messages)}
            assert row["expected_answer"] == seed.expected_answer and row["metadata"] == seed.metadata
            assert row["task_id"] == seed.task_id and row["eval_type"] == "gsm8k"
        assert len({row["uuid"] for row in rows}) == len(rows)

    def test_an_exported_row_verifies_and_every_field_is_echoed(self, gym_server: ServeHandle) -> None:
        path = Path(gym_server.preamble[0].rsplit(" to ", 1)[1])
        row = orjson.loads(path.read_bytes().splitlines()[3])
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=gym_server.url, headers=headers) as c:
            assert c.post("/seed_session", json=row).status_code == 200
            assert c.post("/seed_session", json={"uuid": "no-idx"}).json() == {}
            verified = {**row, "agent_ref": {"name": "simple_agent"},
                        "response": _responses(f"The answer is: {row['expected_answer']}")}
            body = c.post("/verify", json=verified).json()
        assert body["reward"] == 1.0
        for key in ("responses_create_params", "response", "expected_answer", "uuid", "eval_type", "agent_ref"):
            assert body[key] == verified[key]

    def test_an_echoed_integer_beyond_64_bits_is_not_a_500(self, gym_server: ServeHandle) -> None:
        """Found by the schemathesis fuzz: JSON allows any integer, orjson writes only 64-bit ones."""
        headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        raw = b'{"": -9223372036854775809, "response": "", "expected": "", "metadata": null}'
        answer = httpx.post(f"{gym_server.url}/verify", content=raw, headers=headers)
        assert answer.status_code == 200
        assert answer.json()[""] == -9223372036854775809


class TestBadInput:
    """Every bad request is a 4xx with a JSON error naming the field; the server keeps serving."""

    def test_malformed_json(self, client: httpx.Client) -> None:
        reply = client.post("/verify", content=b'{"response": ', headers={"content-type": "application/json"})
        assert _error(reply, 400)["field"] == "body"

    def test_missing_fields(self, client: httpx.Client) -> None:
        assert _error(client.post("/verify", json={"expected": "1"}), 422)["field"] == "response"
        assert _error(client.post("/verify", json={"response": "1"}), 422)["field"] == "expected_answer"
        assert _error(client.post("/seed_session", json={}), 422)["field"] == "idx"

    def test_out_of_range_and_mistyped_idx(self, client: httpx.Client) -> None:
        assert _error(client.post("/seed_session", json={"idx": 1319}), 422)["type"] == "out_of_range"
        assert _error(client.post("/seed_session", json={"idx": -1}), 422)["field"] == "idx"
        assert _error(client.post("/seed_session", json={"idx": "3"}), 422)["field"] == "idx"
        meta = {"response": "1", "expected": "1", "metadata": {"idx": 99999}}
        assert _error(client.post("/verify", json=meta), 422)["field"] == "metadata.idx"

    def test_unknown_output_item_type(self, client: httpx.Client) -> None:
        response = _responses("4", {"type": "web_search_call", "id": "ws"})
        error = _error(client.post("/verify", json={"response": response, "expected": "4"}), 422)
        assert error["field"] == "response.output[0].type" and "web_search_call" in error["message"]

    def test_wrong_content_type(self, client: httpx.Client) -> None:
        reply = client.post("/verify", content=b"response=4", headers={"content-type": "text/plain"})
        assert _error(reply, 415)["field"] == "Content-Type"

    def test_huge_body_is_413_by_header_and_by_stream(self, client: httpx.Client) -> None:
        big = orjson.dumps({"response": "x" * 70_000, "expected": "1"})
        assert _error(client.post("/verify", content=big, headers={"content-type": "application/json"}), 413)
        chunks = iter([big[:40_000], big[40_000:]])  # a generator body is sent chunked: no Content-Length
        reply = client.post("/verify", content=chunks, headers={"content-type": "application/json"})
        assert _error(reply, 413)["field"] == "body"
        assert client.get("/health").status_code == 200

    def test_unknown_route_and_method(self, client: httpx.Client) -> None:
        assert _error(client.get("/nope"), 404)["field"] == "path"
        assert _error(client.get("/verify"), 405)["field"] == "method"


class TestRemoteBind:
    """Binding beyond loopback needs --allow-remote and a token; refused with one line naming the flag."""

    def _serve(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        environ = {k: v for k, v in os.environ.items() if k != "NEL_SERVE_TOKEN"} | (env or {})
        return subprocess.run([sys.executable, "-m", "workbench.cli", "serve", "-b", "gsm8k", "--port", "0", *args],
                              capture_output=True, text=True, timeout=60, env=environ)

    def test_without_allow_remote(self) -> None:
        done = self._serve("--host", "0.0.0.0", "--auth-token", TOKEN)
        assert done.returncode == 2 and "--allow-remote" in done.stderr and len(done.stderr.splitlines()) == 1

    def test_without_a_token(self) -> None:
        done = self._serve("--host", "0.0.0.0", "--allow-remote")
        assert done.returncode == 2 and "--auth-token" in done.stderr and "NEL_SERVE_TOKEN" in done.stderr



class TestSandboxBenchmarks:
    """A benchmark scored by running code (humaneval) is served with sandboxes, each /verify in a fresh one;
    without them it is refused up front, not with a 5xx per request."""

    def test_without_a_sandbox_serving_it_is_refused_in_one_line(self) -> None:
        done = subprocess.run([sys.executable, "-m", "workbench.cli", "serve", "-b", "humaneval", "--port", "0"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and "--sandbox docker|local" in done.stderr
        assert len(done.stderr.splitlines()) == 1

    def test_its_rows_can_still_be_exported(self, tmp_path: Path) -> None:
        done = subprocess.run([sys.executable, "-m", "workbench.cli", "serve", "-b", "humaneval", "--port", "0",
                               "--export-data", str(tmp_path)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and "wrote 164 rows" in done.stdout
        rows = [line for f in tmp_path.glob("*.jsonl") for line in f.read_text().splitlines()]
        assert len(rows) == 164

    def test_each_response_runs_against_its_problems_tests_in_a_sandbox(self) -> None:
        from workbench.environments.humaneval import complete_function

        env = get_environment("humaneval")
        row = env.row(2)  # type: ignore[attr-defined]
        good = f"```python\n{complete_function(row)}\n```"
        slow = "```python\nimport time\ntime.sleep(3)\n```"
        with serve_process(["-b", "humaneval", "--port", "0", "--sandbox", "local"]) as handle, \
                httpx.Client(base_url=handle.url, timeout=30) as c:
            passed = c.post("/verify", json={"response": good, "idx": 2}).json()
            assert passed["reward"] == 1.0 and passed["scoring_details"]["outcome"] == "passed"
            assert "weaker isolation" in passed["scoring_details"]["sandbox"]
            wrong = c.post("/verify", json={"response": good, "metadata": {"idx": 3},
                                            "expected": env.seed(3).expected_answer}).json()
            assert wrong["reward"] == 0.0 and wrong["scoring_details"]["outcome"] != "passed"
            missing = c.post("/verify", json={"response": good, "expected": "x"})
            assert _error(missing, 422)["field"] == "idx"
            done: list[float] = []
            thread = threading.Thread(target=lambda: done.append(
                c.post("/verify", json={"response": slow, "idx": 0}).json()["reward"]))
            thread.start()
            wait_until(lambda: any("harness.py" in command_line(p) and running(p)
                                   for p in descendants(handle.process.pid)),
                       30, what="the slow response's tests to run in a sandbox")
            started = time.monotonic()
            assert c.get("/health").status_code == 200 and time.monotonic() - started < 1.0  # not blocked
            thread.join(30)
            assert done == [0.0]

    def test_an_agents_benchmark_is_not_served(self) -> None:
        done = subprocess.run([sys.executable, "-m", "workbench.cli", "serve", "-b", "file_tasks", "--port", "0",
                               "--sandbox", "local"], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and "only nel eval run drives" in done.stderr


class TestConcurrency:
    """A slow verify runs in a worker process of its own: other requests keep being answered meanwhile."""

    def test_slow_verify_does_not_block_others(self, slow_server: ServeHandle, slow_started: Path) -> None:
        assert (slow_server.benchmark, slow_server.size) == ("slow-echo", 2)
        slow_reply: list[httpx.Response] = []

        def slow() -> None:
            slow_reply.append(httpx.post(f"{slow_server.url}/verify", json={"response": "slow", "idx": 1}, timeout=10))

        thread = threading.Thread(target=slow)
        thread.start()
        wait_for(slow_started.exists, timeout=30)  # the slow verify is under way
        t0 = time.perf_counter()
        with httpx.Client(base_url=slow_server.url, timeout=10) as c:
            for _ in range(5):
                assert c.post("/verify", json={"response": "fast", "idx": 0}).json()["reward"] == 1.0
            seeded = c.post("/seed_session", json={"idx": 0}).json()
        fast_elapsed = time.perf_counter() - t0
        thread.join()
        assert fast_elapsed < 1.0, f"fast requests waited {fast_elapsed:.2f} s behind the slow verify"
        assert slow_reply[0].json()["reward"] == 1.0
        assert seeded["messages"][0] == {"role": "system", "content": "Be brief."}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "ctrl-c"])
def test_a_signal_stops_it_cleanly(sig: signal.Signals) -> None:
    with serve_process(["-b", "gsm8k", "--port", "0"]) as handle:
        handle.process.send_signal(sig)
        assert handle.process.wait(10) == 0


GYM_PYTHON = Path(__file__).resolve().parents[2] / ".venv-gym" / "bin" / "python"
GYM_CHECK = '''
import json, sys, urllib.request
from nemo_gym.base_resources_server import BaseRunRequest, BaseVerifyRequest, BaseVerifyResponse
url, token, row_path = sys.argv[1:4]
row = json.loads(open(row_path).read())
BaseRunRequest.model_validate(row)  # the row is what ng_collect_rollouts accepts
text = "The answer is: " + row["expected_answer"]
response = {"id": "resp_1", "object": "response", "created_at": 0, "model": "m", "parallel_tool_calls": True,
            "tool_choice": "auto", "tools": [], "output": [{"id": "m1", "type": "message", "role": "assistant",
            "status": "completed", "content": [{"type": "output_text", "text": text, "annotations": []}]}]}
body = BaseVerifyRequest.model_validate({**row, "response": response}).model_dump(mode="json")
request = urllib.request.Request(url + "/verify", data=json.dumps({**row, **body}).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + token})
reply = BaseVerifyResponse.model_validate(json.loads(urllib.request.urlopen(request).read()))
print(reply.reward)
'''


@pytest.mark.skipif(not GYM_PYTHON.exists(), reason="no NeMo Gym venv at .venv-gym")
def test_nemo_gyms_own_models_accept_the_exported_row_and_the_verify_reply(gym_server: ServeHandle,
                                                                           tmp_path: Path) -> None:
    path = Path(gym_server.preamble[0].rsplit(" to ", 1)[1])
    row_path = tmp_path / "row.json"
    row_path.write_bytes(path.read_bytes().splitlines()[11])
    done = subprocess.run([str(GYM_PYTHON), "-c", GYM_CHECK, gym_server.url, TOKEN, str(row_path)],
                          capture_output=True, text=True, timeout=120)
    if "ModuleNotFoundError" in done.stderr:
        pytest.skip("nemo_gym is not installed in .venv-gym")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "1.0"
