"""``gym://`` as a benchmark URI scheme: how ``workbench.environments`` finds the remote Gym environments.

Registered through the ``nel_workbench.schemes`` entry point (pyproject.toml) and, for an editable install
made before that entry point existed, ``workbench.environments.schemes.BUILTIN_SCHEMES``. The registry
imports this module only when a benchmark name starts with ``gym://``.
"""

from __future__ import annotations

from workbench.environments.base import EvalEnvironment
from workbench.environments.schemes import Scheme
from workbench.gym.url import parse_gym_url


def _build(uri: str) -> EvalEnvironment:
    from workbench.gym.remote import remote_environment  # httpx and the tool code: only when a run builds it

    return remote_environment(uri)


def _check(uri: str) -> None:
    parse_gym_url(uri)


GYM_SCHEME = Scheme(build=_build, check=_check)
"""The ``gym://`` scheme: ``check`` parses the URL (see ``workbench.gym.url``), ``build`` makes the environment."""
