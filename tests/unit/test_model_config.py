"""ModelConfig: endpoint resolution, validation, and keeping secrets out of identity."""

import pytest

from workbench.errors import UsageError
from workbench.model.config import ModelConfig, infer_protocol, redact_url, resolve_endpoint


@pytest.mark.parametrize(
    ("url", "protocol", "expected"),
    [
        ("http://h:8000", "chat_completions", "http://h:8000/v1/chat/completions"),
        ("http://h:8000/v1", "completions", "http://h:8000/v1/completions"),
        ("http://h:8000/v1/", "responses", "http://h:8000/v1/responses"),
        ("https://api.x.com/v1/chat/completions", "chat_completions", "https://api.x.com/v1/chat/completions"),
        ("http://h/openai/v1", "chat_completions", "http://h/openai/v1/chat/completions"),
    ],
)
def test_a_base_url_or_a_full_endpoint_resolves_to_the_protocol_endpoint(url, protocol, expected):
    assert resolve_endpoint(url, protocol) == expected


def test_the_protocol_is_inferred_from_a_full_endpoint_url():
    assert infer_protocol("http://h/v1/chat/completions") == "chat_completions"
    assert infer_protocol("http://h/v1/completions") == "completions"
    assert infer_protocol("http://h/v1/responses") == "responses"
    assert infer_protocol("http://h/v1") is None


def test_a_url_naming_another_protocol_is_refused():
    with pytest.raises(UsageError, match="names the completions endpoint"):
        resolve_endpoint("http://h/v1/completions", "chat_completions")


@pytest.mark.parametrize("url", ["h:8000", "ftp://h/v1", "http://", "not a url"])
def test_a_url_that_is_not_http_is_refused(url):
    with pytest.raises(UsageError, match="--model-url"):
        resolve_endpoint(url, "chat_completions")


@pytest.mark.parametrize(
    ("kwargs", "flag"),
    [
        ({"temperature": 3.0}, "--temperature"),
        ({"top_p": 0.0}, "--top-p"),
        ({"max_tokens": 0}, "--max-tokens"),
        ({"max_retries": -1}, "--max-retries"),
        ({"request_timeout": 0}, "--request-timeout"),
        ({"protocol": "responses", "stop": ("x",)}, "--stop"),
    ],
)
def test_out_of_range_settings_are_refused_naming_the_flag(kwargs, flag):
    with pytest.raises(UsageError, match=flag):
        ModelConfig(url="http://h/v1", model_id="m", **kwargs)


def test_the_api_key_is_never_in_identity_or_repr():
    config = ModelConfig(url="http://user:pw@h/v1?api_key=s3cret", model_id="m", api_key="sk-SECRET")
    assert "sk-SECRET" not in repr(config)
    assert "sk-SECRET" not in str(config.identity())
    assert "s3cret" not in str(config.identity())
    assert "pw" not in config.identity()["model_url"]


def test_redact_url_drops_credentials_and_secret_query_values():
    assert redact_url("https://u:p@h/v1?key=abc&x=1") == "https://h/v1?key=REDACTED&x=1"
