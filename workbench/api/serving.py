"""``generate_app``: an environment served over HTTP as ``nel serve`` serves it (the ``[serve]`` extra)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workbench.environments import EvalEnvironment, get_environment
from workbench.extras import needs_extra

if TYPE_CHECKING:
    from fastapi import FastAPI


def generate_app(env: EvalEnvironment | str, gym_compat: bool = False, **options: Any) -> FastAPI:
    """The FastAPI app of ``nel serve`` for ``env`` (an environment, or a benchmark's name): ``/seed_session``,
    ``/verify``, ``/health`` and, with ``gym_compat``, NeMo Gym's row format. ``options`` are
    ``workbench.serve.app.create_app``'s (``auth_token``, ``max_body_bytes``, ...). Run it with
    ``uvicorn.run(app, port=9090)``. Without the ``[serve]`` extra: one line with the install command."""
    with needs_extra("generate_app"):
        from workbench.serve.app import create_app

    environment = get_environment(env) if isinstance(env, str) else env
    return create_app(environment, gym_compat=gym_compat, **options)
