"""The request and response bodies of ``nel serve``, as pydantic models (they are also its OpenAPI schema).

The models are deliberately loose where NeMo Gym's rows are open: ``/seed_session`` and ``/verify``
accept any extra row fields (``uuid``, ``eval_type``, ``agent_ref``, ...) and ``response`` is
checked by ``gym_format`` rather than pydantic, so that an error names the exact field
(``response.output[2].type``) instead of a pydantic union branch.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt

PROTOCOL = "nemo-gym-resources-server"

_RESPONSE_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "string", "description": "the model's answer as plain text (evaluator format)"},
        {"type": "object", "description": "a Responses-API response (with output) or a chat completion (with choices)",
         "additionalProperties": True},
    ]
}


class ErrorDetail(BaseModel):
    """Which field was wrong and why."""

    type: str
    field: str
    message: str


class ErrorBody(BaseModel):
    """Every 4xx answer: one error naming the field, so a client can fix its request without reading logs."""

    error: ErrorDetail


class HealthResponse(BaseModel):
    status: str
    benchmark: str
    dataset_size: int
    protocol: str = PROTOCOL
    gym_compat: bool = False
    data_hash: str = ""


class SeedSessionRequest(BaseModel):
    """Which problem to seed: ``idx`` (0-based), or a Gym row whose ``metadata.idx`` says it."""

    model_config = ConfigDict(extra="allow")

    idx: StrictInt | None = Field(default=None, description="problem index, 0-based")
    metadata: dict[str, Any] | None = None


class SeedSessionResponse(BaseModel):
    model_config = ConfigDict(extra="allow")

    idx: int
    task_id: str
    prompt: str
    messages: list[dict[str, Any]]
    expected_answer: str
    metadata: dict[str, Any]
    responses_create_params: dict[str, Any]


class VerifyRequest(BaseModel):
    """Either the evaluator format ``{response, expected, metadata}`` or a Gym row with its ``response``.

    ``expected`` and ``expected_answer`` are synonyms; when both are missing the benchmark's own
    answer for ``idx`` (or ``metadata.idx``) is used.
    """

    model_config = ConfigDict(extra="allow")

    response: Annotated[Any, Field(json_schema_extra=_RESPONSE_SCHEMA)]
    expected: str | None = None
    expected_answer: str | None = None
    idx: StrictInt | None = None
    metadata: dict[str, Any] | None = None
    responses_create_params: dict[str, Any] | None = None


class VerifyResponse(BaseModel):
    """The verdict; Gym clients also get their row's fields back (all of them under ``--gym-compat``)."""

    model_config = ConfigDict(extra="allow")

    reward: float
    extracted_answer: str | None
    scoring_details: dict[str, Any]
    expected_answer: str
    metadata: dict[str, Any]


class AggregateMetricsRequest(BaseModel):
    """NeMo Gym's end-of-collection body: every verify response of the run (``reward``, ``_ng_task_index``,
    ``_ng_rollout_index``, ``extracted_answer``, ``response.usage``; other fields are kept or ignored)."""

    model_config = ConfigDict(extra="allow")

    verify_responses: list[dict[str, Any]]


class AggregateMetricsResponse(BaseModel):
    """NeMo Gym's ``AggregateMetrics``: per task, over the run (``agent_metrics``), the headline subset, per repeat."""

    group_level_metrics: list[dict[str, Any]]
    agent_metrics: dict[str, Any]
    key_metrics: dict[str, Any]
    repeat_level_metrics: list[dict[str, Any]]
