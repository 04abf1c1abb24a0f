"""A ``RunSpec`` handed to a worker as JSON, and what a worker reports back.

Workers (local background shards, Ray tasks, SLURM array tasks, Kubernetes pods) get the spec itself — a JSON
file, or the ``NEL_RUN_SPEC`` environment variable — never a command line rebuilt from it. API keys are not in
the JSON: each service's key travels in the worker's environment as ``NEL_API_KEY_<SERVICE>`` (the spec's
``api_key`` field is never serialised), the way a scheduler passes secrets.

A worker reports the runs it works on in a result file (``NEL_RESULT_FILE``), written atomically when each run
starts and when it ends, so a supervisor or a Ray driver reads run ids instead of parsing output.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from workbench.errors import UsageError
from workbench.spec.errors import first_problem
from workbench.spec.models import MAIN, ApiService, RunSpec, ServerService, SpecProblem, redact_args

SPEC_ENV = "NEL_RUN_SPEC"
RESULT_ENV = "NEL_RESULT_FILE"
_KEY_ENV = "NEL_API_KEY_"


_SERVER_ENV = "NEL_SERVER_SECRETS_"
_SERVER_SECRET_FIELDS = ("env", "command", "extra_args")


def spec_json(spec: RunSpec) -> str:
    """The spec as JSON, with no secret in it: an ``api`` service's key is left out, and so are a started
    server's ``env`` and any argument list holding a secret-like flag's value (``--api-key X``); a worker gets
    them through its environment (``secret_env``)."""
    tree = spec.model_dump(mode="json", exclude_none=True)
    for name, service in spec.services.items():
        if isinstance(service, ServerService) and _server_secrets(service):
            dumped = tree["services"][name]
            dumped["env"] = {}
            for field in ("command", "extra_args"):
                if field in dumped:
                    dumped[field] = redact_args(dumped[field])
    return orjson.dumps(tree).decode()


def _server_secrets(service: ServerService) -> dict[str, Any]:
    """What of a started server's settings stays out of the spec's JSON (None of it when nothing is secret)."""
    if not service.env and not service.secrets():
        return {}
    return {"env": service.env, "command": service.command, "extra_args": service.extra_args}


def key_env_name(service: str) -> str:
    """The environment variable a worker reads ``service``'s API key from."""
    return _KEY_ENV + re.sub(r"[^A-Za-z0-9]", "_", service).upper()


def secret_env(spec: RunSpec) -> dict[str, str]:
    """The environment a worker needs for the keys (and started servers' secrets) the JSON leaves out."""
    env = {key_env_name(name): s.api_key for name, s in spec.services.items()
           if isinstance(s, ApiService) and s.api_key}
    for name, service in spec.services.items():
        if isinstance(service, ServerService) and (hidden := _server_secrets(service)):
            env[_SERVER_ENV + re.sub(r"[^A-Za-z0-9]", "_", name).upper()] = orjson.dumps(hidden).decode()
    return env


def read_spec(source: str, env: Mapping[str, str] | None = None) -> RunSpec:
    """The spec a worker was given: ``source`` is a JSON file, or ``env`` for ``$NEL_RUN_SPEC``; the keys come
    from the environment. A spec it cannot read (a newer nel's, a damaged file) is one line naming what."""
    env = os.environ if env is None else env
    if source == "env":
        text = env.get(SPEC_ENV)
        if not text:
            raise UsageError(f"--spec env: ${SPEC_ENV} is not set")
        where = f"${SPEC_ENV}"
    else:
        try:
            text = Path(source).read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"--spec {source}: cannot read it ({exc.strerror or exc})") from None
        where = source
    try:
        tree = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"{where}: not a JSON run specification ({exc})") from None
    if not isinstance(tree, dict):
        raise UsageError(f"{where}: not a JSON run specification (expected an object)")
    try:
        spec = RunSpec.model_validate(_with_keys(tree, env))
    except ValidationError as exc:
        problem = first_problem(exc)
        raise UsageError(f"{where}: {problem.path}: {problem.message}" if problem.path else
                         f"{where}: {problem.message}") from None
    except SpecProblem as exc:
        raise UsageError(f"{where}: {exc.path}: {exc.message}") from None
    return spec


def _with_keys(tree: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    services = tree.get("services")
    if not isinstance(services, dict):
        return tree
    filled = {}
    for name, service in services.items():
        hidden = env.get(_SERVER_ENV + re.sub(r"[^A-Za-z0-9]", "_", name).upper())
        if isinstance(service, dict) and hidden:
            service = {**service, **{k: v for k, v in orjson.loads(hidden).items() if v is not None}}
        if isinstance(service, dict) and service.get("type", "api") == "api" and "api_key" not in service:
            key = env.get(key_env_name(name))
            if key is None and name == MAIN and tree.get("source") is None:  # a run from flags: as the CLI reads it
                key = env.get("NEMO_API_KEY") or env.get("OPENAI_API_KEY")
            service = {**service, "api_key": key} if key else service
        filled[name] = service
    return {**tree, "services": filled}


def write_result(run_ids: list[str], status: str, env: Mapping[str, str] | None = None) -> None:
    """Tell whoever started this worker which runs it works on (``$NEL_RESULT_FILE``; nobody asked: nothing)."""
    target = (os.environ if env is None else env).get(RESULT_ENV)
    if not target:
        return
    path = Path(target)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(orjson.dumps({"run_ids": run_ids, "status": status}))
    os.replace(tmp, path)


def read_result(path: Path) -> dict[str, Any]:
    """A worker's result file (empty when it has written none yet)."""
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}
