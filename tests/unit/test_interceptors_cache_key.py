"""The cache's key: every input that decides a model's answer changes it; headers and credentials do not."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from workbench.model.client import prepare
from workbench.model.config import ModelConfig
from workbench.model.interceptors.cache_key import cache_key, normalise_url, scope_of
from workbench.types import Message

BASE = ModelConfig(url="http://127.0.0.1:8000/v1", model_id="m", temperature=0.5, top_p=0.9, max_tokens=64, seed=1,
                   stop=("###",), frequency_penalty=0.1, presence_penalty=0.2, extra_body={"top_k": 20})
MESSAGES: tuple[Message, ...] = ({"role": "user", "content": "What is 2 + 2?"},)


def key_of(config: ModelConfig, messages: tuple[Message, ...] = MESSAGES, attempt: int = 0) -> str:
    request = prepare(config, messages, "What is 2 + 2?", attempt)
    return cache_key(scope_of(config.model_id, config.endpoint, config.protocol), request.body, attempt)


@pytest.mark.parametrize("change", [
    {"model_id": "other"}, {"url": "http://127.0.0.1:8001/v1"}, {"url": "http://127.0.0.1:8000/v2"},
    {"protocol": "completions"}, {"temperature": 0.6}, {"top_p": 0.8}, {"max_tokens": 65}, {"seed": 2},
    {"stop": ("###", "END")}, {"frequency_penalty": 0.0}, {"presence_penalty": 0.0}, {"extra_body": {"top_k": 21}},
    {"system_prompt": "Be brief."},
])
def test_every_setting_that_decides_the_answer_changes_the_key(change: dict[str, Any]) -> None:
    assert key_of(dataclasses.replace(BASE, **change)) != key_of(BASE)


def test_the_messages_and_the_attempt_change_the_key() -> None:
    assert key_of(BASE, ({"role": "user", "content": "What is 2 + 3?"},)) != key_of(BASE)
    assert key_of(BASE, attempt=1) != key_of(BASE)


def test_tools_in_the_body_change_the_key() -> None:
    scope = scope_of("m", BASE.endpoint, "chat_completions")
    assert cache_key(scope, b'{"messages":[],"tools":[{"name":"bash"}]}', 0) != cache_key(scope, b'{"messages":[]}', 0)


def test_the_api_key_and_credentials_in_the_url_leave_the_key_alone() -> None:
    assert key_of(dataclasses.replace(BASE, api_key="sk-secret-one-abcdef")) == key_of(BASE)
    keyed = dataclasses.replace(BASE, url="http://127.0.0.1:8000/v1?api_key=sk-live-abcdefgh")
    other = dataclasses.replace(BASE, url="http://127.0.0.1:8000/v1?api_key=sk-live-zyxwvuts")
    assert key_of(keyed) == key_of(other)


def test_spellings_of_one_endpoint_normalise_to_one_url() -> None:
    assert normalise_url("HTTP://LocalHost:80/v1/chat/completions/") == "http://localhost/v1/chat/completions"
    assert normalise_url("https://api.example.com:443/v1") == normalise_url("https://api.example.com/v1")
    assert normalise_url("http://user:pw@host:8000/v1") == "http://host:8000/v1"
    assert normalise_url("http://host:8000/v1") != normalise_url("http://host:8001/v1")
