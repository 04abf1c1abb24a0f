"""The Responses-API response built from a model's answer, and the ``gym://`` URL grammar.

The response is what NeMo Gym's ``/verify`` validates; besides the shape checks here, it is validated
against Gym's own pydantic model (``NeMoGymResponse``) with the interpreter of ``.venv-gym`` when
``make gym`` has installed it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest

from workbench.errors import UsageError
from workbench.gym.remote import row_messages
from workbench.gym.responses import build_response
from workbench.gym.url import parse_gym_url
from workbench.model.client import ModelResponse

ROOT = Path(__file__).resolve().parents[2]
GYM_PYTHON = ROOT / ".venv-gym" / "bin" / "python"

PLAIN = ModelResponse(text="so \\boxed{4}", finish_reason="stop", prompt_tokens=12, completion_tokens=5,
                      total_tokens=17, response_id="chatcmpl-1")
RICH = ModelResponse(
    text="Let me look it up.", finish_reason="tool_calls", prompt_tokens=30, completion_tokens=20, total_tokens=50,
    reasoning_tokens=8, reasoning="The user wants the weather.", response_id="chatcmpl-2",
    tool_calls=[{"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
                {"type": "function_call", "id": "fc_9", "call_id": "call_2", "name": "now", "arguments": {}}],
)
CUT = ModelResponse(text="The answer is", finish_reason="length")
CALL_ONLY = ModelResponse(text="", tool_calls=[{"id": "call_1", "function": {"name": "f", "arguments": "{}"}}])


class TestBuildResponse:
    """build_response: every answer becomes a complete Responses-API response."""

    def test_plain_answer_is_one_completed_message_with_output_text(self):
        r = build_response(PLAIN, model_id="m", created_at=1.0)
        assert r["object"] == "response" and r["status"] == "completed" and r["model"] == "m"
        assert r["id"].startswith("resp_")
        [message] = r["output"]
        assert message["type"] == "message" and message["role"] == "assistant" and message["id"].startswith("msg_")
        assert message["content"] == [{"type": "output_text", "text": "so \\boxed{4}", "annotations": []}]
        usage = r["usage"]
        assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == (12, 5, 17)

    def test_reasoning_comes_first_and_tool_calls_become_function_call_items(self):
        r = build_response(RICH, model_id="m", created_at=1.0)
        kinds = [item["type"] for item in r["output"]]
        assert kinds == ["reasoning", "message", "function_call", "function_call"]
        assert r["output"][0]["summary"] == [{"type": "summary_text", "text": "The user wants the weather."}]
        chat_call, responses_call = r["output"][2], r["output"][3]
        assert chat_call["call_id"] == "call_1" and chat_call["name"] == "get_weather"
        assert chat_call["arguments"] == '{"city": "Paris"}' and chat_call["id"].startswith("fc_")
        assert responses_call["id"] == "fc_9" and responses_call["call_id"] == "call_2"
        assert responses_call["arguments"] == "{}"
        assert r["usage"]["output_tokens_details"]["reasoning_tokens"] == 8

    def test_a_reply_cut_at_the_token_limit_is_incomplete(self):
        r = build_response(CUT, model_id="m")
        assert r["status"] == "incomplete" and r["incomplete_details"] == {"reason": "max_output_tokens"}
        assert r["usage"] is None

    def test_a_tool_call_without_text_has_no_empty_message(self):
        r = build_response(CALL_ONLY, model_id="m")
        assert [item["type"] for item in r["output"]] == ["function_call"]

    def test_same_answer_same_ids(self):
        assert build_response(RICH, model_id="m", created_at=1.0) == build_response(RICH, model_id="m", created_at=1.0)

    def test_text_override_replaces_the_model_text(self):
        r = build_response(PLAIN, model_id="m", text="other")
        assert r["output"][-1]["content"][0]["text"] == "other"

    @pytest.mark.skipif(not GYM_PYTHON.exists(), reason="NeMo Gym is not installed (.venv-gym: run `make gym`)")
    def test_gym_own_pydantic_model_accepts_every_shape(self):
        shapes = [build_response(m, model_id="m") for m in (PLAIN, RICH, CUT, CALL_ONLY)]
        code = (
            "import sys, json\n"
            "from nemo_gym.openai_utils import NeMoGymResponse\n"
            "for shape in json.load(sys.stdin):\n"
            "    r = NeMoGymResponse.model_validate(shape)\n"
            "    assert len(r.output) == len(shape['output']), r\n"
            "print('ok')\n"
        )
        proc = subprocess.run([str(GYM_PYTHON), "-c", code], input=orjson.dumps(shapes), capture_output=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr.decode()[-3000:]
        assert proc.stdout.strip() == b"ok"


class TestRowMessages:
    """A Gym row's responses_create_params replayed as chat messages."""

    def test_text_input_and_instructions(self):
        row = {"responses_create_params": {"input": "What is 2+2?", "instructions": "Be brief."}}
        assert row_messages(row) == [{"role": "system", "content": "Be brief."},
                                     {"role": "user", "content": "What is 2+2?"}]

    def test_message_items_with_content_parts_and_developer_role(self):
        row = {"responses_create_params": {"input": [
            {"role": "developer", "content": "Box it."},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "2+"}, {"text": "2?"}]},
        ]}}
        assert row_messages(row) == [{"role": "system", "content": "Box it."}, {"role": "user", "content": "2+2?"}]

    @pytest.mark.parametrize("row", [{}, {"responses_create_params": {}}, {"responses_create_params": {"input": []}},
                                     {"responses_create_params": {"input": [{"type": "function_call_output"}]}}])
    def test_rows_that_cannot_be_replayed_are_refused(self, row):
        with pytest.raises(ValueError):
            row_messages(row)


class TestGymURL:
    """The gym:// grammar: good URLs parse, each mistake names its part."""

    def test_defaults_to_the_evaluator_protocol(self):
        u = parse_gym_url("gym://127.0.0.1:9090")
        assert (u.host, u.port, u.protocol, u.data, u.base_url) == ("127.0.0.1", 9090, "evaluator", None,
                                                                    "http://127.0.0.1:9090")

    def test_native_with_data_prefix_tls_and_timeout(self, tmp_path):
        (tmp_path / "rows.jsonl").write_text("{}\n")
        u = parse_gym_url("gym://gym.example:443/envs/math?protocol=native&data=rows.jsonl&tls=true&timeout=30",
                          cwd=tmp_path)
        assert u.protocol == "native" and u.data == tmp_path / "rows.jsonl" and u.timeout_s == 30.0
        assert u.base_url == "https://gym.example:443/envs/math"

    def test_ipv6_host(self):
        assert parse_gym_url("gym://[::1]:8000").base_url == "http://[::1]:8000"

    def test_the_token_comes_from_the_named_variable(self, monkeypatch):
        monkeypatch.setenv("GYM_TOKEN", "s3cret")
        u = parse_gym_url("gym://h:1?auth_token_env=GYM_TOKEN")
        assert u.headers() == {"Authorization": "Bearer s3cret"}
        assert "s3cret" not in str(u.identity())
        monkeypatch.delenv("GYM_TOKEN")
        with pytest.raises(UsageError, match=r"\$GYM_TOKEN, which is not set"):
            u.headers()

    @pytest.mark.parametrize(("url", "part"), [
        ("http://h:1", "scheme"),
        ("gym://h", "port"),
        ("gym://h:0", "port"),
        ("gym://h:99999", "port"),
        ("gym://h:http", "port"),
        ("gym://:80", "host"),
        ("gym://user:pw@h:80", "host"),
        ("gym://h:80?protocol=grpc", "protocol"),
        ("gym://h:80?colour=blue", "colour"),
        ("gym://h:80?protocol=native", "data"),
        ("gym://h:80?protocol=native&data=/no/such/rows.jsonl", "data"),
        ("gym://h:80?data=rows.jsonl", "data"),
        ("gym://h:80?tls=maybe", "tls"),
        ("gym://h:80?timeout=-1", "timeout"),
        ("gym://h:80?auth_token_env=a-b", "auth_token_env"),
        ("gym://h:80?protocol=native&protocol=evaluator", "protocol"),
    ])
    def test_a_bad_url_names_the_wrong_part(self, url, part):
        with pytest.raises(UsageError) as info:
            parse_gym_url(url)
        message = str(info.value)
        assert "\n" not in message and f": {part}: " in message, message
