"""What the engine needs to know to talk to a model, and how that maps to HTTP.

``ModelConfig.identity()`` is the part that changes answers (it decides a run's
identity for ``--resume``); the API key is kept out of it, out of ``repr`` and
out of everything that is stored.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit, urlunsplit

from workbench import secrets
from workbench.errors import UsageError

if TYPE_CHECKING:
    from workbench.model.interceptors.base import InterceptorChain

Protocol = Literal["chat_completions", "completions", "responses"]
PROTOCOLS: tuple[Protocol, ...] = ("chat_completions", "completions", "responses")
_PATHS: dict[Protocol, str] = {
    "chat_completions": "/chat/completions",
    "completions": "/completions",
    "responses": "/responses",
}


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """An OpenAI-compatible endpoint plus the sampling parameters of a run."""

    url: str
    model_id: str
    protocol: Protocol = "chat_completions"
    api_key: str | None = field(default=None, repr=False)
    system_prompt: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    stop: tuple[str, ...] | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    extra_body: Mapping[str, Any] | None = None
    """JSON merged into every request body (a server's own parameters, e.g. vLLM's ``top_k``)."""
    image_detail: str | None = None
    """``auto``, ``low`` or ``high``: the detail every image of a prompt is sent at (``None``: as the data says)."""
    served: Mapping[str, Any] | None = None
    """A server nel started for the run (``services.NAME.type: vllm | ... | command``): what it serves stands
    for the URL in the identity, whose port is picked afresh each time."""
    request_timeout: float = 120.0
    max_retries: int = 5
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    interceptors: InterceptorChain | None = field(default=None, repr=False, compare=False)
    """The service's interceptors (``workbench.model.interceptors``); in the identity only those that can change
    answers (``turn_counter``, a user's), so a cached or logged run is the run it repeats."""

    def __post_init__(self) -> None:
        # Where a model's credentials enter the process: from here on no text the process stores,
        # exports, logs or prints holds them (``workbench.secrets``).
        secrets.register_secret(self.api_key)
        secrets.register_url_secrets(self.url)
        if self.protocol not in PROTOCOLS:
            raise UsageError(f"--protocol: unknown protocol {self.protocol!r}; use one of {', '.join(PROTOCOLS)}")
        if self.protocol == "responses" and self.stop:
            raise UsageError("--stop: the responses protocol has no stop sequences; drop --stop or change --protocol")
        if self.temperature is not None and not 0 <= self.temperature <= 2:
            raise UsageError(f"--temperature: {self.temperature} is outside [0, 2]")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise UsageError(f"--top-p: {self.top_p} is outside (0, 1]")
        for name in ("frequency_penalty", "presence_penalty"):
            value = getattr(self, name)
            if value is not None and not -2 <= value <= 2:
                raise UsageError(f"{name}: {value} is outside [-2, 2]")
            if value is not None and self.protocol == "responses":
                raise UsageError(f"{name}: the responses protocol has no {name}; drop it or change the protocol")
        if self.image_detail is not None and self.image_detail not in ("auto", "low", "high"):
            raise UsageError(f"image_detail: expected auto, low or high, got {self.image_detail!r}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise UsageError(f"--max-tokens: must be at least 1, got {self.max_tokens}")
        if self.max_retries < 0:
            raise UsageError(f"--max-retries: must be >= 0, got {self.max_retries}")
        if self.request_timeout <= 0:
            raise UsageError(f"--request-timeout: must be > 0, got {self.request_timeout}")
        if not self.model_id:
            raise UsageError("--model-id: must not be empty")

    @property
    def endpoint(self) -> str:
        return resolve_endpoint(self.url, self.protocol)

    @property
    def answer_source(self) -> str:
        """Where answers come from, as a later run of the same model sees it: the endpoint (credentials removed),
        or for a server nel started, its endpoint with the port written ``PORT`` and what it serves (the port is
        picked afresh each run, so it cannot tell two runs' servers apart). The request cache keys on this."""
        if self.served is None:
            return redact_url(self.endpoint)
        served = json.dumps(dict(self.served), sort_keys=True, separators=(",", ":"), default=str)
        return f"{_portless(self.endpoint)}#{served}"

    def identity(self) -> dict[str, Any]:
        """Everything about the model side that changes answers (no secrets)."""
        return {
            "model_id": self.model_id,
            "model_url": redact_url(self.endpoint) if self.served is None else _portless(self.endpoint),
            "protocol": self.protocol,
            "system_prompt": self.system_prompt,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "stop": list(self.stop) if self.stop else None,
            "frequency_penalty": self.frequency_penalty,
            "presence_penalty": self.presence_penalty,
            # Only when set: a run without it keeps the identity (and so the resume key) it always had.
            **({"extra_body": dict(self.extra_body)} if self.extra_body else {}),
            **({"image_detail": self.image_detail} if self.image_detail else {}),
            **({"served": dict(self.served)} if self.served is not None else {}),
            **({"interceptors": shaping} if self.interceptors and (shaping := self.interceptors.identity()) else {}),
        }


def _portless(url: str) -> str:
    """A started server's endpoint with its (freshly picked) port written ``PORT``."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, f"{parts.hostname}:PORT", parts.path, "", ""))


def infer_protocol(url: str) -> Protocol | None:
    """The protocol a full endpoint URL names, if it names one."""
    path = urlsplit(url).path.rstrip("/")
    for protocol in ("chat_completions", "responses", "completions"):
        if path.endswith(_PATHS[protocol]):
            return protocol
    return None


@functools.lru_cache(maxsize=256)
def resolve_endpoint(url: str, protocol: Protocol) -> str:
    """Accept a base URL (``http://host:8000`` or ``…/v1``) or a full endpoint URL. Cached: every request's hash
    names its endpoint (``prepare``), and parsing the URL each time was a tenth of a cache hit's cost."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"--model-url: {url!r} is not an http(s) URL")
    named = infer_protocol(url)
    if named is not None:
        if named != protocol:
            raise UsageError(f"--model-url names the {named} endpoint but --protocol is {protocol}")
        return url.rstrip("/")
    path = parts.path.rstrip("/")
    if not path.endswith("/v1"):
        path += "/v1"
    return urlunsplit((parts.scheme, parts.netloc, path + _PATHS[protocol], parts.query, ""))


def redact_url(url: str) -> str:
    """Drop credentials from a URL before it is shown or stored (it is part of a run's identity: the
    redacted form is what the identity hashes, so a key that changes leaves the identity as it was)."""
    return secrets.redact_url(url)
