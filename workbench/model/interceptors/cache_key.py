"""The cache's key: everything that decides a model's answer, and nothing else.

In: the model id, the endpoint URL (normalised: scheme and host lower-cased, the default port and a trailing slash
dropped, credentials removed; for a server nel started, its port-free URL and what it serves), the protocol, the
full request body as sent (messages or prompt, every sampling parameter, ``extra_body``, tools; nel serialises it
with sorted keys, so equal requests are equal bytes) and the attempt number (sent as ``X-Nel-Attempt``: a server may
draw attempt r's sample from it, as the mock does). Out: headers and the API key (a new key gets the same answers),
the run id, the time. Hashed with SHA-256.
"""

from __future__ import annotations

import hashlib
from urllib.parse import urlsplit, urlunsplit

from workbench.secrets import redact_url

_DEFAULT_PORTS = {"http": 80, "https": 443}
VERSION = b"nel-cache/1"


def normalise_url(url: str) -> str:
    """``HTTP://Host:80/v1/chat/completions/`` and ``http://host/v1/chat/completions`` are one endpoint."""
    parts = urlsplit(redact_url(url))
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    netloc = host if parts.port in (None, _DEFAULT_PORTS.get(scheme)) else f"{host}:{parts.port}"
    return urlunsplit((scheme, netloc, parts.path.rstrip("/") or "/", parts.query, ""))


def scope_of(model_id: str, source: str, protocol: str) -> str:
    """What one run's entries share (loaded together in one query): model, answer source, protocol. The source is
    an endpoint URL, or ``ModelConfig.answer_source`` of a server nel started (``http://host:PORT/...#{served}``,
    canonical already: its port changes every run, what it serves does not)."""
    endpoint, mark, served = source.partition("#")
    canonical = f"{endpoint}#{served}" if mark and ":PORT/" in endpoint else normalise_url(source)
    return hashlib.sha256(b"\0".join((VERSION, model_id.encode(), canonical.encode(),
                                      protocol.encode()))).hexdigest()


def cache_key(scope: str, body: bytes, attempt: int) -> str:
    """The entry of one request: its scope, the exact body and the attempt number."""
    return hashlib.sha256(b"\0".join((scope.encode(), str(attempt).encode(), body))).hexdigest()
