"""Interceptors between a solver and its model (docs/interceptors.md): the protocol, the registry, the built-ins
(``turn_counter``, ``request_log``, ``cache``) load on demand."""

from workbench.model.interceptors.base import (
    AttemptScope,
    Interceptor,
    InterceptorChain,
    InterceptorContext,
    ModelCall,
    attempt_scope,
    current_attempt,
    enter_attempt,
    leave_attempt,
)
from workbench.model.interceptors.registry import build_chain, interceptor

__all__ = ["AttemptScope", "Interceptor", "InterceptorChain", "InterceptorContext", "ModelCall", "attempt_scope",
           "build_chain", "current_attempt", "enter_attempt", "interceptor",
           "leave_attempt"]
