"""Fuzz ``nel serve`` from its own OpenAPI schema (schemathesis, in-process ASGI): no request gets a 5xx."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from profiles import examples

from workbench.environments import get_environment
from workbench.serve import create_app

TOKEN = "fuzz-token"
APP = create_app(get_environment("gsm8k"), auth_token=TOKEN, max_body_bytes=64 * 1024)
GYM_APP = create_app(get_environment("gsm8k"), gym_compat=True, max_body_bytes=64 * 1024)
schema = schemathesis.openapi.from_asgi("/openapi.json", APP, headers={"Authorization": f"Bearer {TOKEN}"})
gym_schema = schemathesis.openapi.from_asgi("/openapi.json", GYM_APP)
# Derandomized: the same examples on every run, so CI is stable (the fuzz found the 64-bit echo bug; to explore
# further, run it locally without derandomize).
FUZZ = settings(max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


def _no_server_error(case: Any) -> None:
    response = case.call()
    assert response.status_code < 500, f"{case.method} {case.path} -> {response.status_code}: {response.text}"
    if response.status_code >= 400:
        assert set(response.json()["error"]) == {"type", "field", "message"}


@schema.parametrize()
@FUZZ
def test_no_5xx_with_token(case: Any) -> None:
    _no_server_error(case)


@gym_schema.parametrize()
@FUZZ
def test_no_5xx_gym_compat(case: Any) -> None:
    _no_server_error(case)


@pytest.mark.parametrize("body", [b"", b"null", b"[]", b'"x"', b"1e999", b'{"response": {"output": [null]}}',
                                  b'{"response": {"choices": [{}]}, "expected": 1}', b'{"idx": 1e300}',
                                  b'{"response": "x", "metadata": {"idx": "0"}}', b"\xff\xfe"])
@pytest.mark.asyncio
async def test_hand_picked_bodies_are_4xx(body: bytes) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}", "content-type": "application/json"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(APP), base_url="http://t", headers=headers) as c:
        for path in ("/verify", "/seed_session"):
            reply = await c.post(path, content=body)
            assert 400 <= reply.status_code < 500, (path, body, reply.text)
            assert "field" in reply.json()["error"]
