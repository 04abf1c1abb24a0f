"""The model client's request bodies, response parsing and failure classification."""

import orjson
import pytest

from workbench.model.client import ModelResponse, _parse_success, _retry_after, build_body, prepare
from workbench.model.config import ModelConfig
from workbench.model.failures import classify_answer, classify_http_error

MSGS = ({"role": "user", "content": "What is 2+2?"},)


def config(**kw):
    return ModelConfig(url="http://h/v1", model_id="m", **kw)


def test_chat_body_puts_the_system_prompt_first_and_offsets_the_seed_by_the_attempt():
    body = build_body(config(system_prompt="Be brief.", seed=10, temperature=0.5, stop=("END",)), MSGS, "p", 3)
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert body["messages"][1] == MSGS[0]
    assert body["seed"] == 13
    assert body["temperature"] == 0.5
    assert body["stop"] == ["END"]


def test_no_sampling_parameter_is_sent_unless_set():
    assert build_body(config(), MSGS, "p", 0) == {"model": "m", "messages": list(MSGS)}


def test_completions_body_is_plain_text_with_the_system_prompt_prepended():
    body = build_body(config(protocol="completions", system_prompt="S", max_tokens=5), MSGS, "PROMPT", 0)
    assert body["prompt"] == "S\n\nPROMPT"
    assert body["max_tokens"] == 5


def test_responses_body_uses_input_instructions_and_max_output_tokens():
    body = build_body(config(protocol="responses", system_prompt="S", max_tokens=5), MSGS, "p", 0)
    assert body["input"] == list(MSGS)
    assert body["instructions"] == "S"
    assert body["max_output_tokens"] == 5


def test_the_request_hash_is_stable_and_changes_with_the_attempt_seed():
    c = config(seed=1)
    assert prepare(c, MSGS, "p", 0).request_hash == prepare(c, MSGS, "p", 0).request_hash
    assert prepare(c, MSGS, "p", 0).request_hash != prepare(c, MSGS, "p", 1).request_hash
    assert len(prepare(c, MSGS, "p", 0).request_hash) == 64


def test_a_chat_completion_is_parsed_with_usage_and_finish_reason():
    out = ModelResponse()
    body = {"id": "c1", "choices": [{"message": {"content": "4"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8,
                      "completion_tokens_details": {"reasoning_tokens": 0}}}
    assert _parse_success("chat_completions", orjson.dumps(body), out)
    assert (out.text, out.finish_reason, out.total_tokens, out.response_id) == ("4", "stop", 8, "c1")


def test_a_responses_api_answer_is_parsed_from_its_output_items():
    out = ModelResponse()
    body = {"id": "r1", "status": "completed", "output": [
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}]},
        {"type": "message", "content": [{"type": "output_text", "text": "The answer is 4"}]}],
        "usage": {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7}}
    assert _parse_success("responses", orjson.dumps(body), out)
    assert out.text == "The answer is 4"
    assert out.reasoning == "think"
    assert (out.prompt_tokens, out.completion_tokens, out.finish_reason) == (3, 4, "stop")


@pytest.mark.parametrize("content", [b"{not json", b'{"choices": []}', b"[]", b""])
def test_a_malformed_body_is_a_model_error_not_a_crash(content):
    out = ModelResponse()
    assert not _parse_success("chat_completions", content, out)
    assert out.failure == "model_error"
    assert "malformed" in out.error  # type: ignore[operator]


@pytest.mark.parametrize(
    ("status", "body", "category"),
    [
        (429, "slow down", "rate_limit"),
        (500, "boom", "server_error"),
        (503, "", "server_error"),
        (504, "", "timeout"),
        (400, "This model's maximum context length is 4096 tokens", "context_window"),
        (400, "bad temperature", "model_error"),
        (422, "unprocessable", "model_error"),
    ],
)
def test_http_errors_map_to_failure_categories(status, body, category):
    assert classify_http_error(status, body) == category


@pytest.mark.parametrize(
    ("text", "reward", "extracted", "category"),
    [
        ("", 0.0, None, "empty_response"),
        ("   \n", 0.0, None, "empty_response"),
        ("I'm sorry, but I can't help with that.", 0.0, None, "refusal"),
        ("Let me think about the ducks", 0.0, None, "format_error"),
        ("The answer is 5", 0.0, "5", None),
        ("The answer is 4", 1.0, "4", None),
    ],
)
def test_answers_that_did_not_pass_are_categorised(text, reward, extracted, category):
    assert classify_answer(text, reward, extracted) == category


def test_retry_after_accepts_seconds_and_http_dates():
    assert _retry_after("2") == 2.0
    assert _retry_after(None) is None
    assert _retry_after("soon") is None
    assert _retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
