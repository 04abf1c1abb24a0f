"""Interceptors between solver and model: the chain's order, turn_counter, request_log's redaction, the cache's
exact replay, and how a config names them."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from workbench import secrets
from workbench.errors import UsageError
from workbench.model.client import ModelResponse
from workbench.model.interceptors import (
    InterceptorContext,
    ModelCall,
    attempt_scope,
    build_chain,
    cache_store,
    current_attempt,
)
from workbench.model.interceptors.base import InterceptorChain
from workbench.model.interceptors.cache import CacheInterceptor


def context(tmp_path: Path) -> InterceptorContext:
    return InterceptorContext(store_dir=tmp_path, base_dir=tmp_path)


def call(body: dict[str, Any] | None = None, attempt: int = 0) -> ModelCall:
    data = orjson.dumps(body or {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                        option=orjson.OPT_SORT_KEYS)
    return ModelCall("http://127.0.0.1:9/v1/chat/completions", "chat_completions", "m", attempt, data,
                     current_attempt())


class Model:
    """A stand-in for the endpoint: counts what is sent and answers with a full response."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    async def __call__(self, body: bytes) -> ModelResponse:
        self.sent.append(body)
        return ModelResponse(text="The answer is 4.", finish_reason="stop", prompt_tokens=11, completion_tokens=5,
                             total_tokens=16, reasoning_tokens=2, response_id=f"r{len(self.sent)}",
                             tool_calls=[{"id": "c1", "type": "function",
                                          "function": {"name": "bash", "arguments": "{\"cmd\": \"ls\"}"}}],
                             reasoning="2 + 2", latency_ms=40.0, http_status=200)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


class TestTurnCounter:
    """At most max_turns model calls per attempt; the next is refused as max_turns_exhausted."""

    def test_the_call_past_max_turns_is_not_sent_and_ends_the_attempt(self, tmp_path: Path) -> None:
        chain, model = build_chain([("turn_counter", {"max_turns": 2})], context(tmp_path)), Model()

        async def attempt() -> list[ModelResponse]:
            with attempt_scope("task", 0):
                return [await chain.run(call(), model) for _ in range(3)]

        first, second, third = run(attempt())
        assert first.failure is None and second.failure is None
        assert third.failure == "max_turns_exhausted" and "2 model calls" in (third.error or "")
        assert len(model.sent) == 2

    def test_each_attempt_has_its_own_count(self, tmp_path: Path) -> None:
        chain, model = build_chain([("turn_counter", {"max_turns": 1})], context(tmp_path)), Model()

        async def attempts() -> list[Any]:
            out = []
            for repeat in range(3):
                with attempt_scope("task", repeat):
                    out.append((await chain.run(call(), model)).failure)
            return out

        assert run(attempts()) == [None, None, None]

    def test_it_changes_the_run_identity_and_the_log_and_cache_do_not(self, tmp_path: Path) -> None:
        chain = build_chain([("request_log", {"path": "log.jsonl"}), ("cache", {}),
                             ("turn_counter", {"max_turns": 3})], context(tmp_path))
        assert chain.identity() == [{"name": "turn_counter", "config": {"max_turns": 3}}]


class TestRequestLog:
    def test_every_exchange_is_a_json_line_without_secrets(self, tmp_path: Path) -> None:
        secrets.register_secret("sk-registered-abcdef123")
        chain, model = build_chain([("request_log", {"path": "logs/req.jsonl"})], context(tmp_path)), Model()
        body = {"model": "m", "api_key": "plain-value-here", "messages": [
            {"role": "user", "content": "my key is sk-registered-abcdef123, Authorization: Bearer abcdefghijkl"}]}
        response = run(chain.run(call(body), model))
        chain.opened()
        chain.closed()
        lines = (tmp_path / "logs" / "req.jsonl").read_text().splitlines()
        assert len(lines) == 1
        record = orjson.loads(lines[0])
        text = lines[0]
        assert "sk-registered-abcdef123" not in text and "plain-value-here" not in text and "abcdefghijkl" not in text
        assert record["request"]["api_key"] == "<redacted>"
        assert record["response"]["text"] == response.text and record["response"]["finish_reason"] == "stop"

    def test_include_responses_false_keeps_only_the_requests(self, tmp_path: Path) -> None:
        chain = build_chain([("request_log", {"path": "r.jsonl", "include_responses": False})], context(tmp_path))
        run(chain.run(call(), Model()))
        assert "response" not in orjson.loads((tmp_path / "r.jsonl").read_text())


class TestCache:
    def new_process(self) -> None:
        """What a second run sees: nothing in memory, only the file."""
        cache_store._FILES.clear()

    def test_a_second_run_is_answered_from_the_file_exactly_without_calling_the_model(self, tmp_path: Path) -> None:
        first, model = build_chain([("cache", {})], context(tmp_path)), Model()
        first.opened()
        sent = run(chain_call(first, model))
        first.closed()  # the run ends: what it learnt is written
        assert sent.cache == "miss" and len(model.sent) == 1
        self.new_process()
        second, again = build_chain([("cache", {})], context(tmp_path)), Model()
        replay = run(chain_call(second, again))
        assert again.sent == []
        for field in ("text", "finish_reason", "prompt_tokens", "completion_tokens", "total_tokens",
                      "reasoning_tokens", "response_id", "tool_calls", "reasoning", "http_status"):
            assert getattr(replay, field) == getattr(sent, field), field
        assert replay.cache == "hit" and replay.n_retries == 0
        assert run(chain_call(second, again)).latency_ms < 40.0  # a dictionary read once the file is loaded
        counts = second.find(CacheInterceptor).counts()
        assert (counts.hits, counts.misses) == (2, 0)
        assert counts.path == str(tmp_path / "nel-cache.duckdb")

    def test_another_attempt_or_body_is_a_miss(self, tmp_path: Path) -> None:
        chain, model = build_chain([("cache", {})], context(tmp_path)), Model()
        run(chain.run(call(attempt=0), model))
        run(chain.run(call(attempt=1), model))
        run(chain.run(call({"model": "m", "messages": [], "temperature": 0.1}), model))
        run(chain.run(call(attempt=0), model))
        assert len(model.sent) == 3

    def test_failed_answers_are_not_kept(self, tmp_path: Path) -> None:
        chain = build_chain([("cache", {})], context(tmp_path))
        sent: list[bytes] = []

        async def failing(body: bytes) -> ModelResponse:
            sent.append(body)
            return ModelResponse(failure="server_error", error="HTTP 503", http_status=503)

        run(chain.run(call(), failing))
        run(chain.run(call(), failing))
        assert len(sent) == 2

    def test_no_cache_neither_reads_nor_writes(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        warm = build_chain([("cache", {})], context(tmp_path))
        warm.opened()
        run(chain_call(warm, Model()))
        warm.closed()
        self.new_process()
        monkeypatch.setenv("NEL_NO_CACHE", "1")
        off, model = build_chain([("cache", {"path": "other.duckdb"})], context(tmp_path)), Model()
        off.opened()
        response = run(chain_call(off, model))
        off.closed()
        assert len(model.sent) == 1 and response.cache is None
        assert not (tmp_path / "other.duckdb").exists()
        assert off.find(CacheInterceptor).counts().enabled is False

    def test_a_cache_before_the_log_hides_hits_from_it(self, tmp_path: Path) -> None:
        chain = build_chain([("cache", {}), ("request_log", {"path": "r.jsonl"})], context(tmp_path))
        run(chain.run(call(), Model()))
        run(chain.run(call(), Model()))
        assert len((tmp_path / "r.jsonl").read_text().splitlines()) == 1


async def chain_call(chain: InterceptorChain, model: Model) -> ModelResponse:
    return await chain.run(call(), model)


class TestUserInterceptors:
    def test_a_dotted_path_names_a_users_class(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        (tmp_path / "my_interceptors.py").write_text(
            "class TopK:\n"
            "    name = 'top_k'\n"
            "    def __init__(self, config, context):\n"
            "        self.k = config['k']\n"
            "    async def before(self, call):\n"
            "        body = call.json(); body['top_k'] = self.k; call.set_json(body)\n"
            "    async def after(self, call, response):\n"
            "        pass\n"
            "    def close(self):\n"
            "        pass\n")
        monkeypatch.syspath_prepend(str(tmp_path))
        chain, model = build_chain([("my_interceptors:TopK", {"k": 7})], context(tmp_path)), Model()
        run(chain.run(call(), model))
        assert orjson.loads(model.sent[0])["top_k"] == 7
        assert chain.identity() == [{"name": "my_interceptors:TopK", "config": {"k": 7}}]
        sys.modules.pop("my_interceptors", None)

    @pytest.mark.parametrize(("name", "config", "message"), [
        ("nosuch_module_xyz:Thing", {}, "interceptors.0.name: cannot import 'nosuch_module_xyz'"),
        ("json:dumps", {}, "interceptors.0.name: json:dumps is not an interceptor class"),
        ("turn_counter", {"max_turns": 0}, "interceptors.0.config.max_turns: expected a whole number"),
        ("cache", {"size": 3}, "interceptors.0.config.size: unknown key"),
        ("request_log", {}, "interceptors.0.config.path: missing required key"),
    ])
    def test_a_bad_entry_is_one_line_naming_it(self, tmp_path: Path, name: str, config: dict[str, Any],
                                               message: str) -> None:
        with pytest.raises(UsageError, match="^" + message.replace("(", r"\(")):
            build_chain([(name, config)], context(tmp_path))


class TestConfig:
    def load(self, tmp_path: Path, interceptors: str) -> Any:
        from workbench.spec import load_config

        path = tmp_path / "c.yaml"
        path.write_text("services:\n  main:\n    type: api\n    url: http://127.0.0.1:9/v1\n    model: m\n"
                        f"    interceptors:\n{interceptors}benchmarks:\n  - name: gsm8k\n")
        return load_config(path)[0]

    def test_interceptors_are_read_in_order(self, tmp_path: Path) -> None:
        spec = self.load(tmp_path, "      - name: turn_counter\n        config: {max_turns: 4}\n      - name: cache\n")
        assert [(i.name, i.config) for i in spec.services["main"].interceptors] == [
            ("turn_counter", {"max_turns": 4}), ("cache", {})]

    @pytest.mark.parametrize(("entry", "where", "message"), [
        ("      - name: caching\n", "services.main.interceptors.0.name", "unknown interceptor 'caching'"),
        ("      - name: turn_counter\n        config: {max_turns: -1}\n",
         "services.main.interceptors.0.config.max_turns", "expected a whole number of at least 1"),
        ("      - name: cache\n      - name: cache\n", "services.main.interceptors.1.name", "listed twice"),
        ("      - name: cache\n        confg: {}\n", "services.main.interceptors.0.confg", "unknown key"),
    ])
    def test_a_mistake_is_one_line_naming_file_line_and_key(self, tmp_path: Path, entry: str, where: str,
                                                            message: str) -> None:
        with pytest.raises(UsageError) as info:
            self.load(tmp_path, entry)
        text = str(info.value)
        assert "\n" not in text and "c.yaml:" in text and where in text and message in text, text


def test_a_secret_the_model_echoes_never_reaches_the_cache_file(tmp_path: Path) -> None:
    secrets.register_secret("sk-echoed-secret-98765")
    chain = build_chain([("cache", {})], context(tmp_path))

    async def echoing(body: bytes) -> ModelResponse:
        return ModelResponse(text="your key is sk-echoed-secret-98765", finish_reason="stop", http_status=200)

    chain.opened()
    run(chain.run(call(), echoing))
    chain.closed()
    import duckdb

    with duckdb.connect(str(tmp_path / "nel-cache.duckdb"), read_only=True) as con:
        (stored,) = con.execute("SELECT response FROM cache_entries").fetchone() or ("",)
    assert "sk-echoed-secret-98765" not in stored and "<redacted>" in stored


def test_a_benchmark_file_may_register_an_interceptor_its_config_names(tmp_path: Path) -> None:
    """BYOB-style: `@interceptor("name")` beside `@benchmark` in a `benchmark_files` entry."""
    from workbench.spec import load_config
    from workbench.spec.resolve import model_config

    (tmp_path / "rows.jsonl").write_text('{"question": "2+2?", "answer": "4"}\n')
    (tmp_path / "house.py").write_text(
        "from workbench.environments.byob import ScorerInput, benchmark, scorer\n"
        "from workbench.model.interceptors import interceptor\n\n"
        "@interceptor('house_seed')\n"
        "class HouseSeed:\n"
        "    def __init__(self, config, context):\n"
        "        self.seed = config.get('seed', 1)\n"
        "    async def before(self, call):\n"
        "        body = call.json(); body['seed'] = self.seed; call.set_json(body)\n"
        "    async def after(self, call, response):\n"
        "        pass\n"
        "    def close(self):\n"
        "        pass\n\n"
        "@benchmark(name='house-add', dataset='rows.jsonl', prompt='Q: {question}', target_field='answer')\n"
        "@scorer\n"
        "def same(sample: ScorerInput) -> float:\n"
        "    return float(sample.target in sample.response)\n")
    path = tmp_path / "c.yaml"
    path.write_text("services:\n  main:\n    url: http://127.0.0.1:9/v1\n    model: m\n"
                    "    interceptors:\n      - name: house_seed\n        config: {seed: 5}\n"
                    "benchmark_files: [house.py]\nbenchmarks:\n  - name: house-add\n")
    spec = load_config(path)[0]
    chain = model_config(spec, spec.benchmarks[0]).interceptors
    assert chain is not None
    model = Model()
    run(chain.run(call(), model))
    assert orjson.loads(model.sent[0])["seed"] == 5


def test_batches_are_written_during_the_run_and_the_rest_at_its_end(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_store, "FLUSH_EVERY", 3)
    chain = build_chain([("cache", {})], context(tmp_path))
    chain.opened()

    async def seven() -> None:
        for attempt in range(7):
            await chain.run(call(attempt=attempt), Model())

    run(seven())
    import duckdb

    def on_disk() -> int:
        with duckdb.connect(str(tmp_path / "nel-cache.duckdb"), read_only=True) as con:
            row = con.execute("SELECT count(*) FROM cache_entries").fetchone()
        return int(row[0]) if row else 0

    assert on_disk() == 6  # two batches of three while it ran
    chain.closed()
    assert on_disk() == 7


def test_a_cached_or_logged_run_keeps_its_identity_and_a_turn_limit_changes_it(tmp_path: Path) -> None:
    from workbench.model.config import ModelConfig

    def identity(*settings: tuple[str, dict[str, Any]]) -> dict[str, Any]:
        chain = build_chain(list(settings), context(tmp_path)) if settings else None
        return ModelConfig(url="http://127.0.0.1:9/v1", model_id="m", interceptors=chain).identity()

    plain = identity()
    assert identity(("cache", {}), ("request_log", {"path": "r.jsonl"})) == plain
    limited = identity(("cache", {}), ("turn_counter", {"max_turns": 3}))
    assert limited == {**plain, "interceptors": [{"name": "turn_counter", "config": {"max_turns": 3}}]}
