"""Reading the answer out of the shapes clients post to ``/verify`` (``workbench.serve.gym_format``)."""

from __future__ import annotations

from typing import Any

import pytest

from workbench.serve.gym_format import FormatError, parse_response


def _message(*texts: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": t} for t in texts]}


def test_a_string_is_scored_as_is() -> None:
    parsed = parse_response("The answer is: 4")
    assert (parsed.text, parsed.source) == ("The answer is: 4", "text")


def test_responses_output_text_parts_join_and_messages_join_by_line() -> None:
    parsed = parse_response({"output": [_message("The ans", "wer is 4"), _message("Final: 4")]})
    assert parsed.text == "The answer is 4\nFinal: 4"
    assert parsed.source == "responses"


def test_function_calls_and_their_outputs_are_kept_not_scored() -> None:
    parsed = parse_response({"output": [
        {"type": "function_call", "name": "calc", "arguments": '{"x": 1}', "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1", "output": "2"},
        _message("The answer is: 2"),
    ]})
    assert parsed.text == "The answer is: 2"
    assert parsed.details()["tool_calls"] == [
        {"type": "function_call", "name": "calc", "arguments": '{"x": 1}', "call_id": "c1"},
        {"type": "function_call_output", "call_id": "c1", "output": "2"},
    ]


def test_reasoning_summary_and_content_go_to_details_only() -> None:
    parsed = parse_response({"output": [
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}],
         "content": [{"type": "reasoning_text", "text": "more"}]},
        _message("42"),
    ]})
    assert parsed.text == "42"
    assert parsed.details()["reasoning"] == "think\nmore"


def test_an_empty_reasoning_item_as_openai_sends_it_is_accepted() -> None:
    parsed = parse_response({"output": [{"type": "reasoning", "summary": [], "encrypted_content": None},
                                        _message("x")]})
    assert parsed.text == "x" and "reasoning" not in parsed.details()


def test_a_refusal_is_not_scored_but_recorded() -> None:
    parsed = parse_response({"output": [{"type": "message", "content": [{"type": "refusal", "refusal": "no"}]}]})
    assert parsed.text == "" and parsed.details()["refusal"] == "no"


def test_chat_completion_first_choice_with_tool_calls_and_reasoning() -> None:
    parsed = parse_response({"choices": [{"message": {
        "role": "assistant", "content": "The answer is: 7", "reasoning_content": "hmm",
        "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}}]})
    assert (parsed.text, parsed.source, parsed.reasoning) == ("The answer is: 7", "chat_completions", "hmm")
    assert parsed.tool_calls == [{"type": "function_call", "name": "f", "arguments": "{}", "call_id": "t1"}]


def test_chat_completion_content_may_be_null_or_parts() -> None:
    assert parse_response({"choices": [{"message": {"content": None}}]}).text == ""
    parts = {"choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}}]}
    assert parse_response(parts).text == "ab"


@pytest.mark.parametrize(("body", "field"), [
    ({"output": [_message("x"), {"type": "web_search_call"}]}, "response.output[1].type"),
    ({"output": [{"type": "message", "content": [{"type": "image", "url": "u"}]}]},
     "response.output[0].content[0].type"),
    ({"output": "text"}, "response.output"),
    ({"output": [3]}, "response.output[0]"),
    ({"output": [{"type": "function_call", "arguments": "{}"}]}, "response.output[0].name"),
    ({"output": [{"type": "message", "content": [{"type": "output_text", "text": 5}]}]},
     "response.output[0].content[0].text"),
    ({"choices": []}, "response.choices"),
    ({"choices": [{"message": "hi"}]}, "response.choices[0].message"),
    ({"choices": [{"message": {"content": "x", "tool_calls": [{"id": "t"}]}}]},
     "response.choices[0].message.tool_calls[0].function"),
    ({"id": "resp_1"}, "response"),
    (None, "response"),
    (12, "response"),
])
def test_unreadable_shapes_name_the_field(body: Any, field: str) -> None:
    with pytest.raises(FormatError) as caught:
        parse_response(body)
    assert caught.value.field == field
