"""The HTTP app of ``nel serve``: NeMo Gym's resources-server protocol over one ``EvalEnvironment``.

``/seed_session`` and ``/verify`` call the environment's own ``seed`` and ``verify`` (the code the
engine runs), so a reward served here is the reward a ``nel eval run`` would record. ``verify``
runs off the event loop (``workbench.engine.verify_pool``: in worker processes under ``nel serve``), so
``/health`` and other requests are answered while responses are scored; a response longer than the
benchmark's ``max_response_chars`` is not scored at all (reward 0, and the reason). A benchmark scored
by running code (HumanEval) is served with sandboxes: each ``/verify`` runs in a fresh one, awaited, so
other requests go on while the code runs.

Every refusal is a 4xx whose JSON body names the field (see ``guard.error_json``); the fuzz
tests hold the app to "no 5xx" from its own OpenAPI schema.
"""

from __future__ import annotations

import gc
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from workbench.engine.verify_pool import (
    DEFAULT_VERIFY_THREADS,
    Scoring,
    ScoringCrashed,
    ScoringUnavailable,
    ThreadScoring,
)
from workbench.environments.base import EvalEnvironment, too_long
from workbench.errors import NelError
from workbench.serve.aggregate import AggregateError, aggregate, read_rollouts
from workbench.serve.guard import Guard, error_json
from workbench.serve.gym_format import FormatError, ParsedResponse, parse_response
from workbench.serve.models import (
    PROTOCOL,
    AggregateMetricsRequest,
    AggregateMetricsResponse,
    ErrorBody,
    HealthResponse,
    SeedSessionRequest,
    SeedSessionResponse,
    VerifyRequest,
    VerifyResponse,
)
from workbench.types import SeedResult, VerifyResult

if TYPE_CHECKING:
    from workbench.sandbox.base import Sandboxes

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
AGGREGATE_MAX_BODY_BYTES = 1024 * 1024 * 1024
"""``/aggregate_metrics`` carries a whole run's verify responses in one body (Gym's protocol)."""
SESSION_COOKIE = "nel_serve_session"
GYM_ECHO_FIELDS = ("responses_create_params", "uuid", "eval_type", "task_id", "agent_ref")
"""Row fields echoed by ``/verify`` in the default mode (``--gym-compat`` echoes every field)."""
_RESERVED_KWARGS = frozenset({"self", "response", "expected"})
_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": why}
    for status, why in ((400, "malformed JSON"), (401, "missing or wrong bearer token"), (413, "body too large"),
                        (415, "not application/json"), (422, "a field is missing or invalid"),
                        (503, "the process scoring this response died"))
}


class ApiError(Exception):
    """A refusal with its status and the field at fault."""

    def __init__(self, status: int, kind: str, field: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.field, self.message = status, kind, field, message


class JsonResponse(Response):
    """orjson, because ``/verify`` is on the hot path of RL training loops; unknown types become strings."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        try:
            return orjson.dumps(content, default=str, option=orjson.OPT_NON_STR_KEYS)
        except TypeError:  # an echoed integer beyond 64 bits (JSON allows it, orjson does not): the slow path
            return json.dumps(content, default=str, ensure_ascii=False, separators=(",", ":")).encode()


@dataclass
class _Service:
    """The environment and the settings the routes share."""

    env: EvalEnvironment
    gym_compat: bool
    limiter: anyio.CapacityLimiter
    scoring: Scoring
    max_response_chars: int | None
    sandboxes: Sandboxes | None = None
    _task_ids: frozenset[str] | None = None

    def task_ids(self) -> frozenset[str]:
        """Every problem's task id (computed once, on the first rollout that names one)."""
        if self._task_ids is None:
            self._task_ids = frozenset(self.env.seed(i).task_id for i in range(len(self.env)))
        return self._task_ids

    def aggregate(self, raw: bytes) -> dict[str, Any]:
        """``/aggregate_metrics`` of a raw body: parsed here, not by pydantic, and off the event loop (a run's
        body holds 100,000 rows and must aggregate within a second while ``/health`` keeps answering)."""
        with gc_paused():  # millions of small dicts, all freed below: the cyclic GC would scan them again and again
            try:
                body = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise ApiError(400, "invalid_json", "body", f"malformed JSON: {exc}") from None
            if not isinstance(body, dict) or "verify_responses" not in body:
                raise ApiError(422, "missing_field", "verify_responses",
                               "field required: the run's verify responses, as NeMo Gym's collection sends them")
            try:
                rollouts = read_rollouts(body["verify_responses"], self.env.name, self.task_ids)
            except AggregateError as exc:
                raise ApiError(422, "invalid_field", exc.field, exc.message) from None
            del body  # freed by reference counting before the GC is back on
        return aggregate(rollouts)

    def index(self, value: Any, field: str) -> int:
        """A problem index, checked here: some environments would read ``-1`` as the last problem."""
        size = len(self.env)
        if type(value) is not int:
            raise ApiError(422, "invalid_field", field, f"expected an integer problem index, got {value!r}")
        if not 0 <= value < size:
            raise ApiError(422, "out_of_range", field, f"problem index {value} is out of range 0..{size - 1}")
        return value

    def request_index(self, idx: int | None, metadata: dict[str, Any] | None) -> int | None:
        """``idx``, else the Gym row's ``metadata.idx`` (what ``--export-data`` writes), else ``None``."""
        if idx is not None:
            return self.index(idx, "idx")
        if metadata is not None and "idx" in metadata:
            return self.index(metadata["idx"], "metadata.idx")
        return None

    async def seed(self, idx: int) -> SeedResult:
        return await anyio.to_thread.run_sync(self.env.seed, idx, limiter=self.limiter)

    async def verify(self, text: str, expected: str, metadata: dict[str, Any]) -> VerifyResult:
        limit = self.max_response_chars
        if limit is not None and len(text) > limit:
            return too_long(len(text), limit)
        if self.sandboxes is not None:
            return await self._verify_in_sandbox(text, expected, metadata)
        kwargs = {k: v for k, v in metadata.items() if k not in _RESERVED_KWARGS}
        try:
            return await self.scoring.verify(text, expected, kwargs)
        except ScoringUnavailable as exc:  # the benchmark cannot score here at all (e.g. code without a sandbox)
            raise ApiError(501, "verify_unavailable", "response", str(exc)) from None
        except ScoringCrashed as exc:
            raise ApiError(503, "scoring_crashed", "response", str(exc)) from None

    async def _verify_in_sandbox(self, text: str, expected: str, metadata: dict[str, Any]) -> VerifyResult:
        """The code runs in a fresh sandbox of its own; the sandbox goes whatever happens."""
        assert self.sandboxes is not None
        if "idx" not in metadata:
            raise ApiError(422, "missing_field", "idx", f"{self.env.name} runs the problem's own tests: send its idx "
                                                        "(or metadata.idx, as --export-data rows carry it)")
        seed = SeedResult(prompt="", messages=(), expected_answer=expected, task_id="", metadata=metadata)
        try:
            async with self.sandboxes.session() as box:
                verdict: VerifyResult = await self.env.verify_in_sandbox(  # type: ignore[attr-defined]
                    box, text, seed, self.sandboxes.spec.timeout)
        except NelError as exc:  # the sandbox cannot run here (no image, no engine): the server's own fault
            raise ApiError(503, "sandbox_unavailable", "response", str(exc)) from None
        return VerifyResult(verdict.reward, verdict.extracted_answer,
                            {**verdict.scoring_details, "sandbox": box.backend}, verdict.metadata)


def create_app(
    env: EvalEnvironment,
    *,
    gym_compat: bool = False,
    auth_token: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    verify_threads: int = DEFAULT_VERIFY_THREADS,
    sandboxes: Sandboxes | None = None,
    scoring: Scoring | None = None,
    max_response_chars: int | None = None,
) -> FastAPI:
    """The ASGI app serving ``env``; ``auth_token`` (if any) is required on every request; ``sandboxes``
    (for a benchmark scored by running code) are closed, every container removed, when the app stops.

    ``scoring`` runs ``verify`` (default: the server's threads; ``nel serve`` passes a process pool, which
    its caller starts and stops); ``max_response_chars`` replaces the benchmark's own bound."""
    limiter = anyio.CapacityLimiter(verify_threads)
    bound = max_response_chars or env.max_response_chars
    service = _Service(env, gym_compat, limiter, scoring or ThreadScoring(env, verify_threads), bound, sandboxes)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if sandboxes is not None:
                await sandboxes.close()

    app = FastAPI(title=f"nel serve: {env.name}", version="1", default_response_class=JsonResponse,
                  description="NeMo Gym resources-server protocol over a nel benchmark.", lifespan=lifespan)
    app.add_middleware(Guard, auth_token=auth_token, max_body_bytes=max_body_bytes,
                       path_limits={"/aggregate_metrics": max(max_body_bytes, AGGREGATE_MAX_BODY_BYTES)})
    _install_error_handlers(app)

    @app.get("/health", response_model=HealthResponse, responses=_ERRORS)
    async def health() -> JsonResponse:
        """Liveness, and which benchmark is served (clients check it before sending work)."""
        return JsonResponse({"status": "ok", "benchmark": env.name, "dataset_size": len(env), "protocol": PROTOCOL,
                             "gym_compat": gym_compat, "data_hash": env.data_hash})

    @app.post("/seed_session", response_model=SeedSessionResponse, responses=_ERRORS)
    async def seed_session(body: SeedSessionRequest, request: Request) -> JsonResponse:
        """Problem ``idx`` as a prompt, chat messages and expected answer; starts a session cookie."""
        idx = service.request_index(body.idx, body.metadata)
        if idx is None:
            if not gym_compat:
                raise ApiError(422, "missing_field", "idx", "field required: the problem index to seed (0-based)")
            reply = JsonResponse({})  # a Gym agent seeds with its row and needs only the session
        else:
            seed = await service.seed(idx)
            messages = list(seed.messages)
            reply = JsonResponse({"idx": idx, "task_id": seed.task_id, "prompt": seed.prompt, "messages": messages,
                                  "expected_answer": seed.expected_answer, "metadata": seed.metadata,
                                  "responses_create_params": {"input": messages}})
        if SESSION_COOKIE not in request.cookies:
            reply.set_cookie(SESSION_COOKIE, uuid.uuid4().hex, httponly=True, samesite="strict")
        return reply

    @app.post("/verify", response_model=VerifyResponse, responses=_ERRORS)
    async def verify(body: VerifyRequest) -> JsonResponse:
        """Score a response with the benchmark's ``verify``; Gym rows get their fields echoed back."""
        parsed = _parse(body.response)
        idx = service.request_index(body.idx, body.metadata)
        needs_seed = idx is not None and (body.metadata is None or _no_expected(body))
        seed = await service.seed(idx) if needs_seed and idx is not None else None
        expected = body.expected if body.expected is not None else body.expected_answer
        if expected is None:
            if seed is None:
                raise ApiError(422, "missing_field", "expected_answer",
                               "field required: expected (or expected_answer, or idx to score against the "
                               "benchmark's own answer)")
            expected = seed.expected_answer
        metadata = dict(body.metadata) if body.metadata is not None else dict(seed.metadata) if seed else {}
        if idx is not None:
            metadata.setdefault("idx", idx)
        verdict = await service.verify(parsed.text, expected, metadata)
        return JsonResponse(_verify_body(body, parsed, verdict, expected, metadata, gym_compat))

    @app.post("/aggregate_metrics", response_model=AggregateMetricsResponse, responses=_ERRORS,
              openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                  "schema": AggregateMetricsRequest.model_json_schema()}}}})
    async def aggregate_metrics(request: Request) -> JsonResponse:
        """NeMo Gym's end-of-run metrics (its key names: ``mean/reward``, ``pass@k/accuracy``, ...) over the
        run's verify responses, computed by nel's statistics (see ``workbench.serve.aggregate``)."""
        metrics = await anyio.to_thread.run_sync(service.aggregate, await request.body())
        return JsonResponse(metrics)

    return app


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the block (parsing a 40 MB body took 3x longer with it on)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _no_expected(body: VerifyRequest) -> bool:
    return body.expected is None and body.expected_answer is None


def _parse(response: Any) -> ParsedResponse:
    try:
        return parse_response(response)
    except FormatError as exc:
        raise ApiError(422, "invalid_field", exc.field, exc.message) from None


def _verify_body(body: VerifyRequest, parsed: ParsedResponse, verdict: VerifyResult, expected: str,
                 metadata: dict[str, Any], gym_compat: bool) -> dict[str, Any]:
    """Gym's resources servers answer with the request row plus ``reward``: ``--gym-compat`` echoes all of it."""
    if gym_compat:
        out = body.model_dump(exclude_none=True)
    else:
        out = {key: getattr(body, key, None) if key in type(body).model_fields else (body.model_extra or {}).get(key)
               for key in GYM_ECHO_FIELDS}
        out = {k: v for k, v in out.items() if v is not None}
        if parsed.source != "text":
            out["response"] = body.response
    details = {**parsed.details(), **verdict.scoring_details}
    if verdict.metadata:
        details.setdefault("verify_metadata", verdict.metadata)
    out.update(reward=verdict.reward, extracted_answer=verdict.extracted_answer, scoring_details=details,
               expected_answer=expected, metadata=metadata)
    return out


def _install_error_handlers(app: FastAPI) -> None:
    """Every error leaves as ``{"error": {type, field, message}}``, never as FastAPI's default shapes."""

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> Response:
        return Response(error_json(exc.kind, exc.field, exc.message), exc.status, media_type="application/json")

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> Response:
        first = exc.errors()[0] if exc.errors() else {"loc": ("body",), "msg": "invalid request", "type": "invalid"}
        field = _field_path(first.get("loc", ()))
        if first.get("type") == "json_invalid":
            ctx = first.get("ctx")
            why = ctx.get("error") if isinstance(ctx, dict) else None
            return Response(error_json("invalid_json", "body", f"malformed JSON: {why or 'cannot parse'}"),
                            400, media_type="application/json")
        kind = "missing_field" if first.get("type") == "missing" else "invalid_field"
        message = "field required" if kind == "missing_field" else str(first.get("msg", "invalid value"))
        return Response(error_json(kind, field, message), 422, media_type="application/json")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        field, kind = {404: ("path", "not_found"), 405: ("method", "method_not_allowed")}.get(
            exc.status_code, ("body", "bad_request"))
        message = f"{request.method} {request.url.path}: {exc.detail}"
        return Response(error_json(kind, field, message), exc.status_code, media_type="application/json",
                        headers=getattr(exc, "headers", None))


def _field_path(loc: Any) -> str:
    """``("body", "response", "output", 2)`` → ``response.output[2]``; the body itself is ``body``."""
    parts = list(loc)[1:] if loc and loc[0] == "body" else list(loc)
    path = ""
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "body"
