"""``workbench.secrets``: registered values and credential-shaped text are redacted; ordinary text is not;
the store's writer keeps both out of its journal and its shard file (issue 14, item 11)."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from workbench import secrets
from workbench.model.config import ModelConfig
from workbench.secrets import (
    MIN_SECRET_LEN,
    REDACTED,
    redact_text,
    redact_url,
    redact_value,
    register_secret,
    register_url_secrets,
    url_has_credentials,
)
from workbench.store.writer import ShardWriter

KEY = "sk-unit-SECRET-4242"


@pytest.fixture(autouse=True)
def no_secrets() -> Iterator[None]:
    """Each test starts from a process that knows no secret (the registry is process-wide)."""
    secrets.clear_secrets()
    yield
    secrets.clear_secrets()


class TestPatterns:
    """Credentials in the shapes they take in text, registered or not."""

    @pytest.mark.parametrize(("text", "expected"), [
        ("https://bob:hunter2@host/v1", "https://<redacted>@host/v1"),
        ("connect to postgres://svc@db:5432/x failed", "connect to postgres://<redacted>@db:5432/x failed"),
        ("POST /v1/chat?api_key=abc123&x=1", "POST /v1/chat?api_key=<redacted>&x=1"),
        ("GET /v1?x=1&token=t0k&sig=AbC%2Fz", "GET /v1?x=1&token=<redacted>&sig=<redacted>"),
        ("https://h/v1?access_token=a.b.c#frag", "https://h/v1?access_token=<redacted>#frag"),
        ("https://h/v1?Key=abc", "https://h/v1?Key=<redacted>"),
        ("Authorization: Bearer sk-abcdefgh", "Authorization: Bearer <redacted>"),
        ('{"authorization": "Basic dXNlcjpwYXNz"}', '{"authorization": "Basic <redacted>"}'),
        ("authorization=rawtoken123", "authorization=<redacted>"),
        ("sent Bearer eyJhbGciOiJIUzI1NiJ9.e30.x", "sent Bearer <redacted>"),
        ("x-api-key: abc-123-def", "x-api-key: <redacted>"),
        ('{"api_key": "zzzz"}', '{"api_key": "<redacted>"}'),
        ("password=hunter2", "password=<redacted>"),
    ])
    def test_credential_shapes_are_redacted(self, text: str, expected: str) -> None:
        assert redact_text(text) == expected

    @pytest.mark.parametrize("text", [
        "The answer is 42.",
        "the bearer of bad news",  # a word after "bearer" is prose, a token is 8+ token characters
        "max_tokens=5 and the key points are",
        "see https://example.com/path?page=2&q=key",
        "an email: someone@example.com",
        # nel's own messages about a key name the key's path, not a key
        "suite.yaml:5: services.main.api_key: environment variable MY_KEY is not set",
        "services.judge.api_key: expected a string, got a list",
        "",
    ])
    def test_ordinary_text_is_left_alone(self, text: str) -> None:
        assert redact_text(text) == text

    def test_redacting_twice_changes_nothing_more(self) -> None:
        once = redact_text("Authorization: Bearer sk-abcdefgh, https://u:p@h/?key=1")
        assert redact_text(once) == once


class TestRegistry:
    """A registered value is found wherever it turns up, however it is quoted."""

    def test_a_registered_value_is_redacted_anywhere_in_text(self) -> None:
        register_secret(KEY)
        assert redact_text(f"echo: {KEY}!{KEY}") == f"echo: {REDACTED}!{REDACTED}"

    def test_a_value_shorter_than_the_threshold_is_not_registered(self) -> None:
        short = "x" * (MIN_SECRET_LEN - 1)
        register_secret(short)
        register_secret("EMPTY")
        assert not secrets.has_secrets()
        assert redact_text(f"{short} EMPTY") == f"{short} EMPTY"

    def test_a_secret_inside_json_inside_json_is_found_and_redacted(self) -> None:
        key = 'sk-with"quote\\and-slash'
        register_secret(key)
        nested = orjson.dumps({"messages": orjson.dumps([{"content": key}]).decode()})
        assert any(n in nested for n in secrets.secret_needles())
        assert key not in str(redact_value(orjson.loads(nested)))

    def test_url_credentials_and_key_like_query_values_are_registered(self) -> None:
        register_url_secrets("https://alice:pa%24%24word-99@h/v1?api_key=q%2Fsecret-value&page=200000000")
        text = redact_text("server said: pa$$word-99 / q/secret-value / q%2Fsecret-value / page 200000000")
        assert text == f"server said: {REDACTED} / {REDACTED} / {REDACTED} / page 200000000"

    def test_a_model_config_registers_its_key_and_its_url_credentials(self) -> None:
        ModelConfig(url="http://h/v1?api_key=url-SECRET-1234", model_id="m", api_key=KEY)
        assert redact_text(f"{KEY} url-SECRET-1234") == f"{REDACTED} {REDACTED}"

    def test_well_known_environment_variables_are_registered(self) -> None:
        secrets.register_env_secrets({"HF_TOKEN": "hf_abcdefghijkl", "PATH": "/usr/local/bin:/usr/bin"})
        assert redact_text("hf_abcdefghijkl /usr/local/bin") == f"{REDACTED} /usr/local/bin"

    def test_log_records_are_redacted_once_a_secret_is_registered(self) -> None:
        register_secret(KEY)
        out = io.StringIO()
        handler = logging.StreamHandler(out)
        log = logging.getLogger("test_secrets")
        log.addHandler(handler)
        try:
            log.warning("request to %s failed", f"http://h/?api_key={KEY}")
            try:
                raise ValueError(f"boom {KEY}")
            except ValueError:
                log.exception("verify raised")
        finally:
            log.removeHandler(handler)
        assert KEY not in out.getvalue() and "boom" in out.getvalue()


class TestValues:
    def test_keys_naming_credentials_are_replaced_and_tokenizer_keys_kept(self) -> None:
        data = {"api_key": "s", "Authorization": "Bearer s", "x-api-key": "v", "hf_token": "t", "eos_token": "</s>",
                "nested": [{"client_secret": "c", "model": "m"}], "password": None, "n": 5}
        assert redact_value(data) == {
            "api_key": REDACTED, "Authorization": REDACTED, "x-api-key": REDACTED, "hf_token": REDACTED,
            "eos_token": "</s>", "nested": [{"client_secret": REDACTED, "model": "m"}], "password": None, "n": 5,
        }

    def test_identity_urls_keep_the_marker_they_always_had(self) -> None:
        """A run made before keeps its identity: ``--resume`` still matches it."""
        assert redact_url("https://u:p@h/v1?key=abc&x=1") == "https://h/v1?key=REDACTED&x=1"
        assert redact_url("http://h/v1?apikey=a&sig=b&monkey=c") == "http://h/v1?apikey=REDACTED&sig=REDACTED&monkey=c"

    @pytest.mark.parametrize(("url", "has"), [
        ("http://h/v1?api_key=x", True), ("http://u:p@h/v1", True), ("http://h/v1?page=2", False),
        ("http://h:8000/v1", False),
    ])
    def test_urls_with_credentials_are_recognised(self, url: str, has: bool) -> None:
        assert url_has_credentials(url) is has


class TestShardWriter:
    """The store's one door: a step or a shard error holding a secret is written without it."""

    def _writer(self, tmp_path: Path) -> ShardWriter:
        writer = ShardWriter(tmp_path / "nel.duckdb", "run-1", 0, roll_every=10**6)
        writer.begin({"run_id": "run-1"}, {"shard_idx": 0}, [])
        return writer

    @staticmethod
    def _journal(writer: ShardWriter) -> bytes:
        (journal,) = writer.dir.path.glob("journal-*.jsonl")
        data = journal.read_bytes()
        writer.abandon()
        return data

    def test_a_step_holding_a_registered_key_reaches_the_journal_redacted(self, tmp_path: Path) -> None:
        register_secret(KEY)
        writer = self._writer(tmp_path)
        writer.append({"run_id": "run-1", "task_idx": 0, "response": f"Authorization: Bearer {KEY}",
                       "messages": orjson.dumps([{"role": "assistant", "content": KEY}]).decode(),
                       "error": None, "reward": 0.0})
        journal = self._journal(writer)
        assert KEY.encode() not in journal
        row = orjson.loads(journal.splitlines()[0])
        assert row["response"] == f"Authorization: Bearer {REDACTED}" and row["reward"] == 0.0
        assert orjson.loads(row["messages"]) == [{"role": "assistant", "content": REDACTED}]

    def test_a_key_holding_quotes_and_backslashes_still_leaves_a_readable_line(self, tmp_path: Path) -> None:
        key = 'sk-odd"key\\with-escapes'
        register_secret(key)
        writer = self._writer(tmp_path)
        writer.append({"run_id": "run-1", "response": f"{key}\\n{key}\"",
                       "messages": orjson.dumps([{"content": key}]).decode()})
        journal = self._journal(writer)
        row = orjson.loads(journal.splitlines()[0])
        assert key not in str(row) and not any(n in journal for n in secrets.secret_needles())
        assert row["response"].startswith(REDACTED) and orjson.loads(row["messages"]) == [{"content": REDACTED}]

    def test_a_step_without_secrets_is_written_as_it_was(self, tmp_path: Path) -> None:
        register_secret(KEY)
        writer = self._writer(tmp_path)
        row = {"run_id": "run-1", "task_idx": 0, "response": "api_key=shown-when-not-registered"}
        writer.append(row)
        journal = self._journal(writer)
        assert journal.startswith(orjson.dumps(row)[:-1])

    def test_the_shard_error_is_recorded_redacted(self, tmp_path: Path) -> None:
        register_secret(KEY)
        writer = self._writer(tmp_path)
        writer.finish("failed", f"HTTP 404: Unknown request URL: POST /v1?api_key={KEY}&token=abc")
        shard = orjson.loads(writer.dir.shard_json.read_bytes())
        assert shard["error"] == f"HTTP 404: Unknown request URL: POST /v1?api_key={REDACTED}&token={REDACTED}"
