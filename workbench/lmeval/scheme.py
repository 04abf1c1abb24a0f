"""``lm-eval://`` as a benchmark URI scheme (the ``[lm-eval]`` extra).

Registered through the ``nel_workbench.schemes`` entry point and ``workbench.environments.schemes.BUILTIN_SCHEMES``;
importing this module imports no part of ``lm_eval`` (``check`` parses the grammar only), ``build`` does.
"""

from __future__ import annotations

from workbench.environments.base import EvalEnvironment
from workbench.environments.schemes import Scheme
from workbench.lmeval.uri import parse_lmeval_uri


def _build(uri: str) -> EvalEnvironment:
    from workbench.lmeval.environment import LmEvalEnvironment  # lm_eval itself: only when a run builds it

    return LmEvalEnvironment(parse_lmeval_uri(uri), uri)


def _check(uri: str) -> None:
    parse_lmeval_uri(uri)


LMEVAL_SCHEME = Scheme(build=_build, check=_check)
"""The ``lm-eval://`` scheme: ``check`` parses the URI (``workbench.lmeval.uri``), ``build`` loads the task."""
