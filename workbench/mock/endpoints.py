"""The OpenAI-compatible API of the mock model: validate a request body, answer it in OpenAI's shapes.

Each endpoint takes the decoded JSON body and the attempt number (the
``X-Nel-Attempt`` header) and returns the response body as bytes, or raises
``ApiError``, which the server sends as ``{"error": {"message", "type", "code", "param"}}``.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterator
from typing import Any

import orjson

from workbench.mock.agent import AGENT_SCORERS, AgentReply, agent_turn, generic_tool_turn, offered_tools
from workbench.mock.answers import AnswerIndex, Task
from workbench.mock.config import MockConfig
from workbench.mock.images import image_key
from workbench.mock.judge import is_judge_prompt, judge_reply
from workbench.mock.responder import CHARS_PER_TOKEN, Completion, Responder, apply_limits, count_tokens

Body = dict[str, Any]


class ApiError(Exception):
    """A request the API refuses, with the HTTP status and OpenAI-style error fields."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = error_body(message, type=type, code=code, param=param)


def error_body(message: str, *, type: str, code: str | None = None, param: str | None = None) -> bytes:
    """An OpenAI-style error document."""
    return orjson.dumps({"error": {"message": message, "type": type, "param": param, "code": code}})


def _missing(name: str) -> ApiError:
    return ApiError(f"Missing required parameter: '{name}'.", code="missing_required_parameter", param=name)


def _invalid(name: str, expected: str) -> ApiError:
    return ApiError(f"Invalid type for '{name}': expected {expected}.", code="invalid_type", param=name)


def _text_of(content: object, name: str, part_types: tuple[str, ...]) -> str:
    """The text of a message's content: a string, or the text parts of a content-part list."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if not isinstance(content, list):
        raise _invalid(name, "a string or an array of content parts")
    texts: list[str] = []
    for part in content:
        if not isinstance(part, dict):
            raise _invalid(f"{name}[]", "a content part object")
        if part.get("type") in part_types:
            text = part.get("text")
            if not isinstance(text, str):
                raise _invalid(f"{name}[].text", "a string")
            texts.append(text)
    return "\n".join(texts)


class Api:
    """The endpoints, sharing one answer index, one responder and one id counter."""

    def __init__(self, config: MockConfig, index: AnswerIndex, responder: Responder) -> None:
        self.config = config
        self.index = index
        self.responder = responder
        self._ids = itertools.count(1)
        self._repeats: dict[str, Iterator[int]] = {}
        """Per task: the next attempt number of a request that names neither an attempt nor a seed."""
        self.echo: str | None = None
        """Set by the server for one request under ``--echo-headers``: the text every reply then holds."""
        self._id_prefix = os.urandom(4).hex()
        self.models_body = orjson.dumps(
            {
                "object": "list",
                "data": [
                    {
                        "id": config.model_name,
                        "object": "model",
                        "created": int(time.time()),
                        "owned_by": "nel",
                    }
                ],
            }
        )
        self.health_body = orjson.dumps({"status": "ok", "model": config.model_name, "tasks": len(index)})

    # --- shared parts -------------------------------------------------------------------------

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}{self._id_prefix}{next(self._ids):016x}"

    @staticmethod
    def _common(body: Body, token_limit_field: str) -> tuple[str, object, int | None, tuple[str, ...]]:
        """Validate what all endpoints share: model, seed, the token limit, stop, stream, n."""
        model = body.get("model")
        if model is None:
            raise _missing("model")
        if not isinstance(model, str):
            raise _invalid("model", "a string")
        seed = body.get("seed")
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
            raise _invalid("seed", "an integer")
        max_tokens = body.get(token_limit_field)
        if max_tokens is None and token_limit_field == "max_completion_tokens":
            token_limit_field = "max_tokens"
            max_tokens = body.get(token_limit_field)
        if max_tokens is not None and (
            not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1
        ):
            raise ApiError(
                f"Invalid '{token_limit_field}': expected an integer >= 1.",
                code="invalid_value",
                param=token_limit_field,
            )
        stop = body.get("stop")
        if stop is None:
            stops: tuple[str, ...] = ()
        elif isinstance(stop, str):
            stops = (stop,)
        elif isinstance(stop, list) and all(isinstance(s, str) for s in stop):
            stops = tuple(stop)
        else:
            raise _invalid("stop", "a string or an array of strings")
        if body.get("stream"):
            raise ApiError(
                "The mock model does not support streaming; send 'stream': false.",
                code="unsupported_parameter",
                param="stream",
            )
        if body.get("n", 1) != 1:
            raise ApiError(
                "The mock model returns one choice; 'n' must be 1.", code="unsupported_value", param="n"
            )
        return model, seed, max_tokens, stops

    def _complete(
        self, primary: str, parts: list[str], param: str, seed: object, attempt: object
    ) -> tuple[Completion, int]:
        """The reply to a prompt: ``primary`` is tried as an exact prompt, then all ``parts`` are searched."""
        prompt_tokens = max(1, (sum(map(len, parts)) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN)
        limit = self.config.context_window
        if prompt_tokens > limit:
            raise ApiError(
                f"This model's maximum context length is {limit} tokens. However, your request has "
                f"{prompt_tokens} prompt tokens. Please reduce the length of the {param}.",
                code="context_length_exceeded",
                param=param,
            )
        if self.echo is not None:  # --echo-headers (a test feature): the request itself is the answer
            return Completion(self.echo), prompt_tokens
        verdict = judge_reply(primary) if is_judge_prompt(primary) else None
        if verdict is not None:
            return Completion(verdict), prompt_tokens
        task = self._task(primary, parts)
        return self.responder.respond(task, seed, self._attempt(task, seed, attempt)), prompt_tokens

    def _attempt(self, task: Task | None, seed: object, attempt: object) -> object:
        """The attempt number a reply is decided by.

        nel sends it (``X-Nel-Attempt``); other harnesses (NeMo Gym's model servers) send neither it nor a
        seed, yet repeat a prompt to sample it again. Then each repeat of a task is the next attempt (0, 1,
        2, ...), so repeats vary as a native run's do and a given (prompt, repeat number) reads the same in
        every process. A request with a seed and no header stays attempt 0, as before."""
        if attempt is not None:
            return attempt
        if seed is not None or task is None:
            return 0
        counter = self._repeats.get(task.key)
        if counter is None:
            counter = self._repeats[task.key] = itertools.count()
        return next(counter)

    def _task(self, primary: str, parts: list[str]) -> Task | None:
        task = self.index.exact(primary)
        if task is None and parts:
            task = self.index.lookup(parts[0] if len(parts) == 1 else "\n\n".join(parts))
        return task

    def _agent_reply(self, body: Body, primary: str, messages: list[Any], seed: object,
                     attempt: object) -> AgentReply | None:
        """A scripted agent turn when the request offers tools and its task is agentic, else ``None``."""
        offered = offered_tools(body.get("tools"))
        if offered is None or self.echo is not None:
            return None
        task = self._task(primary, [primary])
        if task is None:  # an unknown prompt with tools (a Gym row): call a tool once, then answer
            return generic_tool_turn(primary, messages, body["tools"])
        if task.scorer not in AGENT_SCORERS:
            return None
        # an agent's turns share one attempt: a turn is not a repeat, so no per-prompt counting here
        turn_attempt = 0 if attempt is None else attempt
        return agent_turn(task, self.responder.skill.attempt(task.key, seed, turn_attempt), messages, offered)

    # --- endpoints ----------------------------------------------------------------------------

    def chat_completions(self, body: Body, attempt: object) -> bytes:
        messages = body.get("messages")
        if messages is None:
            raise _missing("messages")
        if not isinstance(messages, list) or not messages:
            raise _invalid("messages", "a non-empty array of messages")
        model, seed, max_tokens, stops = self._common(body, "max_completion_tokens")
        parts: list[str] = []
        primary = ""
        for i, message in enumerate(messages):
            if not isinstance(message, dict):
                raise _invalid(f"messages[{i}]", "a message object")
            text = _text_of(message.get("content"), f"messages[{i}].content", ("text",))
            parts.append(text)
            if message.get("role") == "user":
                primary = image_key(text, message.get("content"))
        agent = self._agent_reply(body, primary, messages, seed, attempt)
        if agent is not None:
            return self._tool_turn(model, agent, parts)
        completion, prompt_tokens = self._complete(primary, parts, "messages", seed, attempt)
        completion = apply_limits(completion, max_tokens, stops)
        completion_tokens = count_tokens(completion.text)
        return orjson.dumps(
            {
                "id": self._new_id("chatcmpl-"),
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": completion.text, "refusal": None},
                        "logprobs": None,
                        "finish_reason": completion.finish_reason,
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
                "system_fingerprint": "fp_nel_mock",
            }
        )

    def _tool_turn(self, model: str, agent: AgentReply, parts: list[str]) -> bytes:
        prompt_tokens = count_tokens("".join(parts))
        calls_text = "".join(c["function"]["arguments"] for c in agent.tool_calls or ())
        completion_tokens = count_tokens(agent.text + calls_text)
        message: dict[str, Any] = {"role": "assistant", "content": agent.text, "refusal": None}
        if agent.tool_calls:
            message["tool_calls"] = agent.tool_calls
        return orjson.dumps({
            "id": self._new_id("chatcmpl-"), "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": agent.finish_reason}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
            "system_fingerprint": "fp_nel_mock",
        })

    def completions(self, body: Body, attempt: object) -> bytes:
        prompt = body.get("prompt")
        if prompt is None:
            raise _missing("prompt")
        if isinstance(prompt, list) and len(prompt) == 1:
            prompt = prompt[0]
        if not isinstance(prompt, str):
            raise _invalid("prompt", "a string")
        model, seed, max_tokens, stops = self._common(body, "max_tokens")
        completion, prompt_tokens = self._complete(prompt, [prompt], "prompt", seed, attempt)
        completion = apply_limits(completion, max_tokens, stops)
        completion_tokens = count_tokens(completion.text)
        return orjson.dumps(
            {
                "id": self._new_id("cmpl-"),
                "object": "text_completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "text": completion.text,
                        "logprobs": None,
                        "finish_reason": completion.finish_reason,
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            }
        )

    def responses(self, body: Body, attempt: object) -> bytes:
        items = body.get("input")
        if items is None:
            raise _missing("input")
        instructions = body.get("instructions")
        if instructions is not None and not isinstance(instructions, str):
            raise _invalid("instructions", "a string")
        model, seed, max_tokens, _ = self._common(body, "max_output_tokens")
        parts = [instructions] if instructions else []
        if isinstance(items, str):
            primary = items
            parts.append(items)
        elif isinstance(items, list):
            primary = ""
            for i, item in enumerate(items):
                if not isinstance(item, dict):
                    raise _invalid(f"input[{i}]", "an input item object")
                content = item.get("content", item.get("output"))
                text = _text_of(content, f"input[{i}].content", ("input_text", "output_text", "text"))
                parts.append(text)
                if item.get("role") == "user":
                    primary = image_key(text, content)
        else:
            raise _invalid("input", "a string or an array of input items")
        completion, input_tokens = self._complete(primary, parts, "input", seed, attempt)
        completion = apply_limits(completion, max_tokens)
        output_tokens = count_tokens(completion.text)
        complete = completion.finish_reason == "stop"
        status = "completed" if complete else "incomplete"
        return orjson.dumps(
            {
                "id": self._new_id("resp_"),
                "object": "response",
                "created_at": int(time.time()),
                "status": status,
                "error": None,
                "incomplete_details": None if complete else {"reason": "max_output_tokens"},
                "instructions": instructions,
                "model": model,
                "output": [
                    {
                        "type": "message",
                        "id": self._new_id("msg_"),
                        "status": status,
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": completion.text, "annotations": []}],
                    }
                ],
                # the fields every Responses-API reply carries (NeMo Gym's NeMoGymResponse requires them)
                "parallel_tool_calls": body.get("parallel_tool_calls", True),
                "tool_choice": body.get("tool_choice", "auto"),
                "tools": body.get("tools") or [],
                "temperature": body.get("temperature"),
                "top_p": body.get("top_p"),
                "max_output_tokens": max_tokens,
                "metadata": body.get("metadata") if isinstance(body.get("metadata"), dict) else {},
                "usage": {
                    "input_tokens": input_tokens,
                    "input_tokens_details": {"cached_tokens": 0},
                    "output_tokens": output_tokens,
                    "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": input_tokens + output_tokens,
                },
            }
        )
