"""Secret values never leave the process: not into the store, an export, a log line or the terminal.

Two mechanisms, because secrets reach text two ways:

* **The registry.** A secret is registered where it enters the process (``ModelConfig``: its API key
  and the credentials of its URL; a config's ``api_key:``; ``nel serve``'s token; the well-known
  environment variables, read when this module is first imported). Any later text that contains a
  registered value, wherever it came from (a model that echoes its request headers, a server error
  that quotes the URL), has it replaced by ``<redacted>``. This is what catches a key in a place no
  rule could predict.
* **Pattern rules** for the shapes credentials take in text even when nobody registered them: URL
  userinfo (``scheme://user:pass@``), key-like query parameters (``?api_key=``, ``&token=``,
  ``&sig=`` ...), ``Authorization: Bearer xxx`` / ``Bearer xxx`` and ``x-api-key: xxx``.

Values shorter than ``MIN_SECRET_LEN`` are not registered: placeholders such as ``EMPTY``, ``dummy``
or ``none`` (what local servers are given as a key) and short words like ``default`` occur in
ordinary prompts and answers, and replacing every occurrence would corrupt the very data the store
is for. Real API keys are 20 characters or more, so nothing real is lost.

What cannot be caught: a secret shorter than the threshold, and a secret the other side transformed
(base64, reversed, split across lines): text is compared, not meaning.

The module imports only the standard library, so every layer may use it; ``has_secrets`` and
``secret_needles`` let the hot path (the store's writer) skip all work when nothing is registered.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

MIN_SECRET_LEN = 8
"""Shorter values are not registered (see the module docstring for why)."""
REDACTED = "<redacted>"
_REDACTED_BYTES = REDACTED.encode()
SECRET_ENV_VARS = ("NEMO_API_KEY", "OPENAI_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "WANDB_API_KEY",
                   "NEL_SERVE_TOKEN")
"""Environment variables that hold credentials nel (or a library it drives) reads."""

_KEY_PARAM = (r"(?:api[_-]?key|apikey|key|x-api-key|token|access[_-]?token|auth[_-]?token|id[_-]?token"
              r"|refresh[_-]?token|session[_-]?token|security[_-]?token|x-amz-security-token|client[_-]?secret"
              r"|secret|password|passwd|pwd|sig|signature|x-amz-signature)")
"""Query parameter names whose value is a credential (``?api_key=``, Azure SAS ``&sig=``, S3 presigned ...)."""
_KEY_PARAM_NAME = re.compile(_KEY_PARAM, re.IGNORECASE)

_Rule = tuple[tuple[str, ...], re.Pattern[str], str | Callable[[re.Match[str]], str]]
# Each rule: words one of which the lowercased text must hold before its pattern is tried (a regex scan of a
# long answer costs tens of microseconds, and most texts hold none of the words), the pattern, its replacement.
_RULES: tuple[_Rule, ...] = (
    # scheme://user:pass@host -> scheme://<redacted>@host
    (("@",), re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^\s/@?#\"'<>]+@"), rf"\1{REDACTED}@"),
    # ?api_key=... &token=... ;sig=...
    (("=",), re.compile(rf"(?i)([?&;]{_KEY_PARAM}=)[^&#\s\"'<>]+"), rf"\1{REDACTED}"),
    # Authorization: Bearer xxx / "authorization": "Basic xxx" (the scheme is kept: it says what was there)
    (("authorization",),
     re.compile(r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)(?>(?:(basic|bearer|token|digest)\s+)?)"
                r"[^\s\"',;<>]+"),
     lambda m: f"{m[1]}{m[2] + ' ' if m[2] else ''}{REDACTED}"),
    # a bare "Bearer xxx" (a token is at least 8 characters: "bearer of" is prose)
    (("bearer",), re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/\-]{8,}=*"), rf"\1{REDACTED}"),
    # x-api-key: xxx, "api_key": "xxx", access_token=xxx, password: xxx (not nel's own message about the key:
    # "services.main.api_key: environment variable MY_KEY is not set")
    (("key", "token", "secret", "password"),
     re.compile(r"(?i)\b((?:x-)?api[_-]?key|access[_-]?token|refresh[_-]?token|auth[_-]?token|client[_-]?secret"
                r"|password)([\"']?\s*[:=]\s*[\"']?)(?!(?:environment|expected|unknown|missing|must|not) )"
                r"[^\s\"',;&<>]+"),
     rf"\1\2{REDACTED}"),
)

_SECRET_KEY = re.compile(
    r"(?i)^(?:(?:x-)?api[_-]?key|(?:proxy-)?authorization|auth|password|passwd|secret|cookie|set-cookie|.*_secret"
    r"|(?!(?:eos|bos|pad|unk|sep|cls|mask|stop|max|min|start|end)_token$).*_token)$"
)
"""Mapping keys whose value is a credential, whatever it looks like (tokenizer keys such as ``eos_token`` are not)."""

_lock = threading.Lock()
_values: set[str] = set()
_needles: tuple[bytes, ...] = ()
_registered: re.Pattern[str] | None = None
_registered_bytes: re.Pattern[bytes] | None = None
_log_redaction_installed = False


def register_secret(value: str | None) -> str | None:
    """Remember ``value`` as a secret (ignored when ``None`` or shorter than ``MIN_SECRET_LEN``); returns it,
    so a secret can be registered where it is read: ``key = register_secret(os.environ.get(...))``."""
    if value is None:
        return value
    text = str(value).strip()
    if len(text) < MIN_SECRET_LEN or text in _values:
        return value
    _add({text})
    return value


def register_url_secrets(url: str | None) -> str | None:
    """Register the credentials a URL carries: its userinfo and the values of key-like query parameters.
    Returns ``url`` unchanged."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    found: set[str] = set()
    if "@" in parts.netloc:
        userinfo = parts.netloc.rsplit("@", 1)[0]
        for piece in (userinfo, *userinfo.split(":", 1)):
            found.update((piece, unquote(piece)))
    for name, value in parse_qsl(parts.query, keep_blank_values=False):
        if _KEY_PARAM_NAME.fullmatch(name):
            found.add(value)
    for raw in parts.query.split("&"):  # the value as written too (percent-encoded), as a server would echo it
        name, _, value = raw.partition("=")
        if _KEY_PARAM_NAME.fullmatch(unquote(name)):
            found.add(value)
    for value in found:
        register_secret(value)
    return url


def register_env_secrets(environ: Mapping[str, str] | None = None) -> None:
    """Register the values of ``SECRET_ENV_VARS`` that are set."""
    env = os.environ if environ is None else environ
    for name in SECRET_ENV_VARS:
        register_secret(env.get(name))


def has_secrets() -> bool:
    return bool(_values)


def secret_needles() -> tuple[bytes, ...]:
    """Every registered value as UTF-8 bytes, raw and as it appears inside a JSON string (once and twice
    escaped, for JSON nested in JSON): a writer tests its serialized bytes against these before doing
    any redaction work. Empty when nothing is registered."""
    return _needles


def clear_secrets() -> None:
    """Forget every registered value (for tests that need a process with none)."""
    global _values, _needles, _registered, _registered_bytes
    with _lock:
        _values, _needles, _registered, _registered_bytes = set(), (), None, None


def redact_text(text: str) -> str:
    """``text`` with every registered value and every credential-shaped pattern replaced by ``<redacted>``."""
    if not text:
        return text
    registered = _registered
    if registered is not None:
        text = registered.sub(REDACTED, text)
    lower = text.lower()
    for words, pattern, replacement in _RULES:
        if any(word in lower for word in words):
            text = pattern.sub(replacement, text)
    return text


def redact_bytes(data: bytes) -> bytes:
    """UTF-8 ``data`` (serialized JSON, say) with every registered value replaced, in each form
    ``secret_needles`` lists: one regex pass, for the writer's rare row that holds a secret. Pattern rules
    are not applied (they need text). A value holding a quote or a backslash may leave invalid JSON: parse
    the result, and fall back to ``redact_value`` when it fails."""
    pattern = _registered_bytes
    return data if pattern is None else pattern.sub(_REDACTED_BYTES, data)


def redact_value(value: Any) -> Any:
    """``value`` with every string redacted (recursively through dicts, lists and tuples) and the value of
    every mapping key that names a credential (``api_key``, ``Authorization``, ``hf_token`` ...) replaced."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: REDACTED if v is not None and isinstance(k, str) and _names_a_credential(k) else redact_value(v)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(v) for v in value]
    return value


def url_has_credentials(url: str) -> bool:
    """Whether ``url`` carries userinfo (``user:pass@``) or a non-empty key-like query parameter."""
    parts = urlsplit(url)
    if "@" in parts.netloc:
        return True
    return any(_KEY_PARAM_NAME.fullmatch(name) for name, _ in parse_qsl(parts.query))


@functools.lru_cache(maxsize=4096)
def _names_a_credential(key: str) -> bool:
    """Cached: the same few dozen keys (a step's columns) come back row after row."""
    return _SECRET_KEY.match(key) is not None


def redact_url(url: str, marker: str = "REDACTED") -> str:
    """A URL without its credentials: the userinfo dropped, key-like query values replaced by ``marker``.

    Structural (the URL is parsed), for URLs that become part of a run's identity: the default marker is
    the one identities have always held, so the identity of a run made before stays the same.
    """
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    params = []
    for raw in parts.query.split("&") if parts.query else ():
        name, sep, value = raw.partition("=")
        params.append(f"{name}={marker}" if sep and value and _KEY_PARAM_NAME.fullmatch(unquote(name)) else raw)
    return urlunsplit((parts.scheme, netloc, parts.path, "&".join(params), parts.fragment))


# ---- registry internals ----------------------------------------------------------------------------
def _escaped(value: str) -> Iterable[str]:
    """``value`` and its forms inside a JSON string, and inside a JSON string inside a JSON string."""
    once = json.dumps(value, ensure_ascii=False)[1:-1]
    twice = json.dumps(once, ensure_ascii=False)[1:-1]
    ascii_once = json.dumps(value)[1:-1]
    return {value, once, twice, ascii_once}


def _add(values: set[str]) -> None:
    global _values, _needles, _registered, _registered_bytes
    with _lock:
        new = _values | values
        forms = {form for v in new for form in _escaped(v)}
        ordered = sorted(forms, key=len, reverse=True)  # the longest first: a key that contains another
        _registered = re.compile("|".join(map(re.escape, ordered)))
        _registered_bytes = re.compile(b"|".join(re.escape(f.encode()) for f in ordered))
        _needles = tuple(sorted({f.encode() for f in forms}, key=len))
        _values = new
    _install_log_redaction()


def _install_log_redaction() -> None:
    """From the first registered secret on, every log record and every uncaught traceback of the process is
    redacted (uvicorn's, httpx's and our own loggers alike): installed once, costs nothing before."""
    global _log_redaction_installed
    if _log_redaction_installed:
        return
    _log_redaction_installed = True
    make_record = logging.getLogRecordFactory()

    def redacting_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make_record(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: logging reports it itself, later
            return record
        clean = redact_text(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact_text(logging.Formatter().formatException(record.exc_info))
        return record

    logging.setLogRecordFactory(redacting_record)
    if sys.excepthook is not sys.__excepthook__:
        return  # someone else (IPython, rich) renders tracebacks: theirs stays

    def redacting_hook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        import traceback

        sys.stderr.write(redact_text("".join(traceback.format_exception(kind, exc, tb))))

    sys.excepthook = redacting_hook


register_env_secrets()
