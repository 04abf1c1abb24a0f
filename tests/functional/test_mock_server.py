"""The mock model as a real server: endpoints, errors, keep-alive, latency, faults, CLI, signals."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from workbench.environments import get_environment
from workbench.errors import RunFailed
from workbench.mock import MockHandle, mock_model

pytestmark = pytest.mark.timeout(60)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def mock() -> Iterator[MockHandle]:
    with mock_model() as handle:
        yield handle


@pytest.fixture()
def client(mock: MockHandle) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=mock.base_url, timeout=10) as c:
        yield c


def _prompt(i: int) -> str:
    return get_environment("gsm8k").seed(i).prompt


def _chat(client: httpx.Client, content: str, attempt: int = 0, **extra: object) -> httpx.Response:
    body = {"model": "my-model", "messages": [{"role": "user", "content": content}], **extra}
    return client.post("/chat/completions", json=body, headers={"X-Nel-Attempt": str(attempt)})


def _raw(port: int, payload: bytes, reads: int = 1) -> bytes:
    """Send raw bytes on one connection and read until ``reads`` responses or the peer closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(payload)
        data = b""
        while data.count(b"HTTP/1.1 ") < reads or not data.endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        return data


# --- endpoints and shapes -------------------------------------------------------------------


def test_chat_completions_answer_in_openai_shape(client: httpx.Client) -> None:
    response = _chat(client, _prompt(0))
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["id"].startswith("chatcmpl-")
    assert body["object"] == "chat.completion"
    assert isinstance(body["created"], int)
    assert body["model"] == "my-model"
    choice = body["choices"][0]
    assert choice["index"] == 0 and choice["message"]["role"] == "assistant"
    assert isinstance(choice["message"]["content"], str)
    assert choice["finish_reason"] in ("stop", "length")
    usage = body["usage"]
    assert usage["prompt_tokens"] == (len(_prompt(0)) + 3) // 4
    assert (
        usage["total_tokens"]
        == usage["prompt_tokens"] + usage["completion_tokens"]
        >= usage["prompt_tokens"] + 1
    )


def test_system_prompt_counts_towards_prompt_tokens_and_the_task_is_still_found(client: httpx.Client) -> None:
    system = "You are a helpful assistant. " * 10
    body = {
        "model": "m",
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": _prompt(0)}],
    }
    plain = _chat(client, _prompt(0)).json()
    with_system = client.post("/chat/completions", json=body, headers={"X-Nel-Attempt": "0"}).json()
    assert with_system["usage"]["prompt_tokens"] == (len(system) + len(_prompt(0)) + 3) // 4
    assert with_system["choices"][0]["message"]["content"] == plain["choices"][0]["message"]["content"]


def test_completions_answer_a_wrapped_prompt_in_openai_shape(client: httpx.Client) -> None:
    prompt = f"Question: {_prompt(1)}\nAnswer:"
    response = client.post("/completions", json={"model": "m", "prompt": prompt, "seed": 3})
    body = response.json()
    assert response.status_code == 200
    assert body["id"].startswith("cmpl-") and body["object"] == "text_completion" and body["model"] == "m"
    assert isinstance(body["choices"][0]["text"], str) and body["choices"][0]["finish_reason"] in (
        "stop",
        "length",
    )
    assert body["usage"]["prompt_tokens"] == (len(prompt) + 3) // 4


def test_responses_api_reads_input_parts_and_instructions(client: httpx.Client) -> None:
    request = {
        "model": "m",
        "instructions": "Be brief.",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": _prompt(2)}]}
        ],
    }
    body = client.post("/responses", json=request, headers={"X-Nel-Attempt": "0"}).json()
    assert body["id"].startswith("resp_") and body["object"] == "response" and body["model"] == "m"
    assert body["status"] in ("completed", "incomplete")
    [message] = body["output"]
    assert (message["type"], message["role"]) == ("message", "assistant")
    [part] = message["content"]
    assert part["type"] == "output_text" and isinstance(part["text"], str)
    usage = body["usage"]
    assert usage["input_tokens"] == (len("Be brief.") + len(_prompt(2)) + 3) // 4
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    as_string = client.post("/responses", json={"model": "m", "input": _prompt(2)},
                            headers={"X-Nel-Attempt": "0"}).json()
    assert as_string["output"][0]["content"][0]["text"] == part["text"]


def test_all_endpoints_give_the_same_verdict_for_the_same_attempt(client: httpx.Client) -> None:
    chat = _chat(client, _prompt(4), attempt=2).json()["choices"][0]["message"]["content"]
    text = client.post(
        "/completions", json={"model": "m", "prompt": _prompt(4)}, headers={"X-Nel-Attempt": "2"}
    ).json()["choices"][0]["text"]
    assert chat == text
    assert _chat(client, _prompt(4), attempt=2).json()["choices"][0]["message"]["content"] == chat


def test_attempts_are_keyed_by_the_attempt_header(client: httpx.Client) -> None:
    env = get_environment("gsm8k")
    outcomes = set()
    for i in range(20):
        for attempt in range(4):
            content = _chat(client, _prompt(i), attempt=attempt).json()["choices"][0]["message"]["content"]
            outcomes.add((i, env.verify(content, env.seed(i).expected_answer).reward))
    assert {reward for _, reward in outcomes} == {0.0, 1.0}
    assert any((i, 0.0) in outcomes and (i, 1.0) in outcomes for i in range(20)), (
        "no task passed only sometimes"
    )


def test_unknown_prompt_gets_a_generic_reply(client: httpx.Client) -> None:
    first = _chat(client, "Tell me a joke.").json()["choices"][0]["message"]["content"]
    assert "mock model" in first
    assert _chat(client, "Tell me a joke.", attempt=3).json()["choices"][0]["message"]["content"] == first


def test_max_tokens_and_stop_are_honoured(client: httpx.Client) -> None:
    prompt = "Tell me a joke."
    cut = _chat(client, prompt, max_tokens=3).json()
    assert cut["choices"][0]["finish_reason"] == "length"
    assert len(cut["choices"][0]["message"]["content"]) == 12 and cut["usage"]["completion_tokens"] == 3
    stopped = _chat(client, prompt, stop=["mock"]).json()["choices"][0]
    assert stopped["finish_reason"] == "stop" and "mock" not in stopped["message"]["content"]
    short = client.post("/responses", json={"model": "m", "input": prompt, "max_output_tokens": 2}).json()
    assert short["status"] == "incomplete" and short["incomplete_details"] == {"reason": "max_output_tokens"}


def test_prompt_longer_than_the_context_window_is_a_400(client: httpx.Client) -> None:
    response = _chat(client, "word " * 8000)
    assert response.status_code == 400
    error = response.json()["error"]
    assert "maximum context length is 8192 tokens" in error["message"]
    assert error["code"] == "context_length_exceeded"


def test_models_and_health(client: httpx.Client, mock: MockHandle) -> None:
    models = client.get("/models").json()
    assert models["object"] == "list"
    assert [m["id"] for m in models["data"]] == ["nel-mock"]
    assert models["data"][0]["object"] == "model"
    health = httpx.get(mock.base_url.removesuffix("/v1") + "/health")
    assert health.status_code == 200 and health.json()["status"] == "ok"


# --- errors ---------------------------------------------------------------------------------


def test_unknown_path_is_a_404_json_error(client: httpx.Client) -> None:
    response = client.post("/chat/complete", json={})
    assert response.status_code == 404
    assert set(response.json()["error"]) >= {"message", "type", "code"}


def test_wrong_method_is_a_405_json_error(client: httpx.Client) -> None:
    response = client.get("/chat/completions")
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert response.json()["error"]["code"] == "method_not_allowed"
    assert client.post("/models").status_code == 405


def test_invalid_json_body_is_a_400(client: httpx.Client) -> None:
    response = client.post(
        "/chat/completions", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert "JSON" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/chat/completions", {"model": "m"}, "messages"),
        ("/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}, "model"),
        ("/completions", {"model": "m"}, "prompt"),
        ("/responses", {"model": "m"}, "input"),
    ],
)
def test_missing_required_field_is_a_400_naming_it(
    client: httpx.Client, path: str, body: dict, field: str
) -> None:
    response = client.post(path, json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert f"'{field}'" in error["message"] and error["param"] == field


# --- connections and latency ----------------------------------------------------------------


def test_keep_alive_serves_several_requests_on_one_connection(mock: MockHandle) -> None:
    body = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    request = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (
        len(body),
        body,
    )
    data = _raw(mock.port, request * 3 + b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n", reads=4)
    assert data.count(b"HTTP/1.1 200 OK") == 4
    assert b"Connection: close" not in data


def test_connection_close_is_honoured(mock: MockHandle) -> None:
    with socket.create_connection(("127.0.0.1", mock.port), timeout=5) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):  # ends because the server closes
            data += chunk
    assert data.startswith(b"HTTP/1.1 200 OK") and b"Connection: close" in data


@pytest.fixture(scope="module")
def slow() -> Iterator[MockHandle]:
    with mock_model(latency_ms=150, jitter_ms=40) as handle:
        yield handle


def test_latency_is_honoured(slow: MockHandle) -> None:
    with httpx.Client(base_url=slow.base_url) as client:
        started = time.perf_counter()
        for _ in range(3):
            assert _chat(client, "hi").status_code == 200
        per_request = (time.perf_counter() - started) / 3
        started = time.perf_counter()
        client.get("/models")
        info = time.perf_counter() - started
    assert 0.11 <= per_request < 0.5
    assert info < 0.1


def test_pipelined_replies_keep_request_order_despite_jitter(slow: MockHandle) -> None:
    requests = b""
    for i in range(6):
        body = orjson.dumps({"model": f"model-{i}", "messages": [{"role": "user", "content": "hi"}]})
        requests += b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (
            len(body),
            body,
        )
    data = _raw(slow.port, requests, reads=6)
    assert [int(n) for n in re.findall(rb'"model":"model-(\d)"', data)] == list(range(6))


# --- faults ---------------------------------------------------------------------------------


def test_429_fault_has_retry_after_and_a_json_error() -> None:
    with (
        mock_model(fail_rate=1.0, faults=("429",), retry_after_s=3) as m,
        httpx.Client(base_url=m.base_url) as c,
    ):
        response = _chat(c, "hi")
        assert response.status_code == 429
        assert response.headers["retry-after"] == "3"
        assert response.json()["error"]["code"] == "rate_limit_exceeded"
        assert c.get("/models").status_code == 200
        assert httpx.get(m.base_url.removesuffix("/v1") + "/health").status_code == 200


def test_500_fault_is_a_json_error_and_retries_can_succeed() -> None:
    with (
        mock_model(fail_rate=0.5, faults=("500",), fault_seed=1) as m,
        httpx.Client(base_url=m.base_url) as c,
    ):
        statuses = [_chat(c, "hi").status_code for _ in range(30)]
        assert set(statuses) == {200, 500}
        failed = next(r for r in (_chat(c, "hi") for _ in range(30)) if r.status_code == 500)
        assert failed.json()["error"]["type"] == "server_error"


def test_malformed_fault_sends_a_body_that_is_not_json() -> None:
    with mock_model(fail_rate=1.0, faults=("malformed",)) as m, httpx.Client(base_url=m.base_url) as c:
        response = _chat(c, "hi")
        assert response.status_code == 200
        with pytest.raises(ValueError):
            orjson.loads(response.content)


def test_truncated_fault_raises_an_httpx_protocol_error() -> None:
    with (
        mock_model(fail_rate=1.0, faults=("truncated",)) as m,
        httpx.Client(base_url=m.base_url) as c,
        pytest.raises(httpx.RemoteProtocolError),
    ):
        _chat(c, _prompt(0))


def test_timeout_fault_hangs_until_the_client_times_out() -> None:
    with (
        mock_model(fail_rate=1.0, faults=("timeout",), hang_s=1.0) as m,
        httpx.Client(base_url=m.base_url, timeout=0.3) as c,
        pytest.raises(httpx.ReadTimeout),
    ):
        _chat(c, "hi")


# --- command line and process -------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workbench.mock", *args],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=ROOT,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--fail-rate", "1.5"], "--fail-rate must be between 0 and 1"),
        (["--faults", "429,explode"], "unknown fault 'explode'"),
        (["--port", "70000"], "out of range"),
        (["--latency-ms", "fast"], "invalid float value"),
        (["--benchmarks", "nope"], "unknown benchmark 'nope'"),
    ],
)
def test_bad_flags_exit_2_with_a_one_line_message(args: list[str], message: str) -> None:
    result = _cli(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert message in result.stderr and result.stderr.count("\n") == 1


def test_port_in_use_exits_2_with_a_one_line_message(mock: MockHandle) -> None:
    result = _cli("--port", str(mock.port))
    assert result.returncode == 2
    assert "already in use" in result.stderr and result.stderr.count("\n") == 1


def test_ready_line_is_the_only_output_and_sigterm_exits_0() -> None:
    with mock_model(skill_seed=9) as m:
        assert m.base_url == f"http://127.0.0.1:{m.port}/v1"
        m.process.send_signal(signal.SIGTERM)
        assert m.process.wait(10) == 0
        assert m.process.stdout is not None
        assert m.process.stdout.read() == b""


def test_sigterm_right_after_the_ready_line_is_never_lost() -> None:
    # uvloop once dropped a signal that arrived before its loop ran: the server then hung until SIGKILL.
    for _ in range(8):
        with mock_model(benchmarks=("gsm8k",)) as m:
            m.process.send_signal(signal.SIGTERM)
            assert m.process.wait(3) == 0


def test_sigint_exits_0_without_a_traceback() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "workbench.mock", "--skill-seed", "4"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith("nel mock model listening on http://127.0.0.1:") and line.endswith(
        "(skill-seed 4)\n"
    )
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=10)
    assert process.returncode == 0
    assert (stdout, stderr) == ("", "")


def test_mock_model_reports_a_server_that_dies_before_it_is_ready() -> None:
    with pytest.raises(RunFailed, match="unknown benchmark 'nope'"), mock_model(benchmarks=("nope",)):
        pass


class TestHarnessesThatSendNoSeed:
    """NeMo Gym's model servers repeat a prompt with neither a seed nor X-Nel-Attempt: each repeat is the next
    attempt, so repeats vary as a native run's do, and (prompt, repeat number) reads the same in every process."""

    @staticmethod
    def _unseeded(client: httpx.Client, i: int) -> str:
        body = {"model": "m", "messages": [{"role": "user", "content": _prompt(i)}]}
        return str(client.post("/chat/completions", json=body).json()["choices"][0]["message"]["content"])

    def test_repeats_are_successive_attempts_and_reproducible(self) -> None:
        prompts = range(40, 52)
        runs = []
        for _ in range(2):  # two fresh processes: the same sequence of replies
            with mock_model() as m, httpx.Client(base_url=m.base_url, timeout=10) as c:
                runs.append([[self._unseeded(c, i) for _ in range(4)] for i in prompts])
                explicit = [_chat(c, _prompt(i), attempt=a).json()["choices"][0]["message"]["content"]
                            for i in prompts for a in range(4)]
        assert runs[0] == runs[1]
        assert [reply for replies in runs[0] for reply in replies] == explicit  # repeat n is attempt n
        assert any(len(set(replies)) > 1 for replies in runs[0])

    def test_a_seed_without_an_attempt_header_stays_attempt_0(self, client: httpx.Client) -> None:
        body = {"model": "m", "seed": 5, "messages": [{"role": "user", "content": _prompt(60)}]}
        replies = {client.post("/chat/completions", json=body).json()["choices"][0]["message"]["content"]
                   for _ in range(4)}
        assert len(replies) == 1


GYM_PYTHON = Path(__file__).resolve().parents[2] / ".venv-gym" / "bin" / "python"
GYM_RESPONSE_CHECK = """
import json, sys
from nemo_gym.openai_utils import NeMoGymResponse
for line in sys.stdin:
    NeMoGymResponse.model_validate(json.loads(line))
print("ok")
"""


@pytest.mark.skipif(not GYM_PYTHON.exists(), reason="NeMo Gym is not installed in .venv-gym (run `make gym`)")
def test_responses_replies_validate_as_nemo_gyms_response(client: httpx.Client) -> None:
    """Gym's openai_model validates every /v1/responses reply as NeMoGymResponse before its agent sees it."""
    requests = [{"model": "m", "input": _prompt(3)},
                {"model": "m", "input": [{"role": "user", "content": _prompt(4)}], "max_output_tokens": 5,
                 "tools": [], "tool_choice": "auto", "temperature": 0.5, "instructions": "Be brief."}]
    replies = [client.post("/responses", json=r).content for r in requests]
    done = subprocess.run([str(GYM_PYTHON), "-c", GYM_RESPONSE_CHECK], input=b"\n".join(replies) + b"\n",
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    assert orjson.loads(replies[1])["status"] == "incomplete"  # the token limit, said as the API says it
