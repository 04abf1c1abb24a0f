"""The ``gym://`` benchmark URL: where a remote environment lives and how to talk to it.

Grammar (one line, no spaces)::

    gym://HOST:PORT[/PREFIX][?protocol=evaluator|native][&data=ROWS.jsonl][&auth_token_env=VAR]
                             [&tls=true|false][&timeout=SECONDS]

``protocol=evaluator`` (the default) speaks to another ``nel serve``; ``protocol=native`` speaks to a
NeMo Gym resources server and needs ``data``, the Gym rows (JSONL) to seed from (a Gym server scores rows
but does not serve them). ``data`` alone implies ``protocol=native``: only that protocol reads local rows.
The token named by ``auth_token_env`` is read from the environment, never from the URL, so it never
reaches the store.
Every mistake is a one-line ``UsageError`` naming the part that is wrong.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qsl, urlsplit

from workbench.errors import UsageError
from workbench.secrets import register_secret

SCHEME = "gym://"
PROTOCOLS = ("evaluator", "native")
Protocol = Literal["evaluator", "native"]
_KEYS = ("protocol", "data", "auth_token_env", "tls", "timeout")
_BOOLS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}
DEFAULT_TIMEOUT_S = 120.0


def is_gym_url(name: str) -> bool:
    return name.startswith(SCHEME)


@dataclass(frozen=True, slots=True)
class GymURL:
    """A parsed ``gym://`` URL. ``data`` is resolved against the working directory."""

    raw: str
    host: str
    port: int
    prefix: str = ""
    protocol: Protocol = "evaluator"
    data: Path | None = None
    auth_token_env: str | None = None
    tls: bool = False
    timeout_s: float = DEFAULT_TIMEOUT_S

    @property
    def base_url(self) -> str:
        """The server's HTTP address; every endpoint path is appended to it."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}{self.prefix}"

    def headers(self) -> dict[str, str]:
        """Request headers, with the bearer token when ``auth_token_env`` names one."""
        if self.auth_token_env is None:
            return {}
        token = os.environ.get(self.auth_token_env)
        if not token:
            raise UsageError(f"{self.raw}: auth_token_env names ${self.auth_token_env}, which is not set")
        register_secret(token)  # a server that quotes the request back must not put it in the store
        return {"Authorization": f"Bearer {token}"}

    def as_native(self, data: str = "ROWS.jsonl") -> str:
        """This URL speaking Gym's native protocol with ``data`` as its rows: what to write for a Gym server."""
        base, _, query = self.raw.partition("?")
        kept = [f"{k}={v}" for k, v in parse_qsl(query) if k not in ("protocol", "data")]
        return f"{base}?{'&'.join(['protocol=native', f'data={data}', *kept])}"

    def identity(self) -> dict[str, object]:
        """What names this server in a run's identity (the data file counts by its hash, not its path)."""
        return {"url": self.base_url, "protocol": self.protocol}


def _fail(url: str, part: str, why: str) -> UsageError:
    return UsageError(f"bad benchmark URL {url!r}: {part}: {why}")


def _port(url: str, text: str | None) -> int:
    if not text:
        raise _fail(url, "port", "missing; expected gym://HOST:PORT")
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise _fail(url, "port", f"{text!r} is not a port number (1..65535)")
    return int(text)


def _query(url: str, query: str) -> dict[str, str]:
    params: dict[str, str] = {}
    for key, value in parse_qsl(query, keep_blank_values=True, strict_parsing=False):
        if key not in _KEYS:
            raise _fail(url, key, f"unknown parameter; known: {', '.join(_KEYS)}")
        if key in params:
            raise _fail(url, key, "given twice")
        if not value:
            raise _fail(url, key, "empty value")
        params[key] = value
    return params


def parse_gym_url(url: str, *, cwd: Path | None = None) -> GymURL:
    """Parse and check ``url``; ``data`` must exist (relative paths are taken from ``cwd`` or the working dir)."""
    if not is_gym_url(url):
        scheme = url.split("://", 1)[0] if "://" in url else url
        raise _fail(url, "scheme", f"{scheme!r} is not gym://")
    parts = urlsplit("http://" + url[len(SCHEME):])
    if parts.fragment:
        raise _fail(url, "fragment", "gym URLs take no #fragment")
    try:
        host, port_text = parts.hostname, parts.netloc.rsplit(":", 1)[1] if ":" in parts.netloc else None
    except ValueError:
        raise _fail(url, "host", "cannot read it") from None
    if not host:
        raise _fail(url, "host", "missing; expected gym://HOST:PORT")
    if parts.username or parts.password:
        raise _fail(url, "host", "credentials do not go in the URL; use auth_token_env=VAR")
    if port_text is not None and port_text.endswith("]"):
        port_text = None  # an IPv6 literal without a port
    port = _port(url, port_text)
    params = _query(url, parts.query)
    protocol = params.get("protocol", "native" if "data" in params else "evaluator")
    if protocol not in PROTOCOLS:
        raise _fail(url, "protocol", f"{protocol!r} is not one of {', '.join(PROTOCOLS)}")
    data: Path | None = None
    if "data" in params:
        if protocol != "native":
            raise _fail(url, "data", "only protocol=native reads local rows; nel serve seeds its own")
        data = Path(params["data"]).expanduser()
        if not data.is_absolute():
            data = (cwd or Path.cwd()) / data
        if not data.is_file():
            raise _fail(url, "data", f"{params['data']}: no such file")
    elif protocol == "native":
        raise _fail(url, "data", "protocol=native needs data=ROWS.jsonl (the Gym rows to seed from)")
    tls = _BOOLS.get(params.get("tls", "false").lower())
    if tls is None:
        raise _fail(url, "tls", f"{params['tls']!r} is not true or false")
    timeout = params.get("timeout", str(DEFAULT_TIMEOUT_S))
    try:
        timeout_s = float(timeout)
    except ValueError:
        timeout_s = -1.0
    if not timeout_s > 0:
        raise _fail(url, "timeout", f"{timeout!r} is not a positive number of seconds")
    env_var = params.get("auth_token_env")
    if env_var is not None and not env_var.replace("_", "").isalnum():
        raise _fail(url, "auth_token_env", f"{env_var!r} is not an environment variable name")
    return GymURL(
        raw=url, host=host, port=port, prefix=parts.path.rstrip("/"), protocol=protocol,  # type: ignore[arg-type]
        data=data, auth_token_env=env_var, tls=tls, timeout_s=timeout_s,
    )
