"""The interceptor protocol: code that sits between a solver and its model, one request at a time.

A service's ``interceptors: [{name, config}]`` become an ``InterceptorChain`` held by its ``ModelConfig``; every
``ModelClient.generate`` goes through it. In list order each interceptor's ``before`` sees the request and may
change its body, or answer it itself (the cache replays a stored answer; ``turn_counter`` refuses a call past the
attempt's turns); the first answer stops the walk. Then, in reverse order, the ``after`` of every interceptor that
passed the request on sees the response. Why a chain rather than hooks in the solvers: an interceptor then applies
to every solver (simple, tool-calling, a judge) without the solver knowing.

State that lives for one attempt (the turns it has used) is kept in the ``AttemptScope`` the engine opens around
each attempt (``attempt_scope``); outside an engine run each call is an attempt of its own.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import orjson

if TYPE_CHECKING:  # the client imports this module: the response type is only named here
    from workbench.model.client import ModelResponse


@dataclass(slots=True)
class AttemptScope:
    """One attempt of one task: the per-interceptor state that lives as long as it does."""

    task_id: str | None = None
    repeat: int | None = None
    _state: dict[int, dict[str, Any]] = field(default_factory=dict)

    def state(self, owner: object) -> dict[str, Any]:
        """``owner``'s own mutable state for this attempt (empty at the attempt's first call)."""
        return self._state.setdefault(id(owner), {})


_ATTEMPT: contextvars.ContextVar[AttemptScope | None] = contextvars.ContextVar("nel_attempt", default=None)


AttemptToken = contextvars.Token[AttemptScope | None]


def enter_attempt(task_id: str | None = None, repeat: int | None = None) -> AttemptToken:
    """From here every model call of this asyncio task belongs to one new attempt (each engine worker is its own
    task, so concurrent attempts never share one); ``leave_attempt`` ends it."""
    return _ATTEMPT.set(AttemptScope(task_id, repeat))


def leave_attempt(token: AttemptToken) -> None:
    _ATTEMPT.reset(token)


@contextlib.contextmanager
def attempt_scope(task_id: str | None = None, repeat: int | None = None) -> Iterator[AttemptScope]:
    """``enter_attempt`` and ``leave_attempt`` around a block."""
    token = enter_attempt(task_id, repeat)
    try:
        yield current_attempt()
    finally:
        leave_attempt(token)


def current_attempt() -> AttemptScope:
    """The attempt the running call belongs to (a fresh one outside ``attempt_scope``)."""
    return _ATTEMPT.get() or AttemptScope()


@dataclass(slots=True)
class ModelCall:
    """One request on its way to the model. ``body`` is the exact JSON sent (sorted keys, so canonical); an
    interceptor that changes it sets a new one (``set_json``). Headers are not offered: they carry the API key."""

    endpoint: str
    """The endpoint URL with any credential removed."""
    protocol: str
    model_id: str
    attempt: int
    body: bytes
    scope: AttemptScope
    source: str = ""
    """Where answers come from across runs (``ModelConfig.answer_source``): the endpoint, or for a server nel
    started its port-free endpoint and what it serves; empty means ``endpoint``."""

    def json(self) -> dict[str, Any]:
        value: dict[str, Any] = orjson.loads(self.body)
        return value

    def set_json(self, value: Mapping[str, Any]) -> None:
        self.body = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)

    def state(self, owner: object) -> dict[str, Any]:
        return self.scope.state(owner)


@dataclass(frozen=True, slots=True)
class InterceptorContext:
    """Where an interceptor may keep files: the store's directory (the cache's default home) and the directory a
    relative ``path`` in its config is read against (the config file's)."""

    store_dir: Path
    base_dir: Path

    def path(self, value: str) -> Path:
        p = Path(value).expanduser()
        return p if p.is_absolute() else self.base_dir / p


@runtime_checkable
class Interceptor(Protocol):
    """What an interceptor is. Built as ``cls(config, context)``: check ``config`` there and raise
    ``ValueError("KEY: why")`` for a bad key (nel names the service, the interceptor and the key).

    ``affects_answers``: whether it can change what an attempt ends with (then its name and config are part of
    the run's identity, so ``--resume`` and comparisons see it); a log or a cache does not."""

    name: str
    affects_answers: ClassVar[bool]

    async def before(self, call: ModelCall) -> ModelResponse | None:
        """Change ``call.body``, or answer the call (a ``ModelResponse``, ``failure`` set to deny it); ``None``
        passes it on."""
        ...

    async def after(self, call: ModelCall, response: ModelResponse) -> None:
        """See the response (also one a later interceptor answered with)."""
        ...

    def close(self) -> None:
        """Release files and connections: the run is over (called once, when the last client closes)."""
        ...


Send = Callable[[bytes], Awaitable["ModelResponse"]]


class InterceptorChain:
    """A service's interceptors, in order, shared by every worker's client of a run."""

    def __init__(self, interceptors: Sequence[Interceptor], identity: Sequence[dict[str, Any]] = ()) -> None:
        self.interceptors = tuple(interceptors)
        self._identity = [dict(i) for i in identity]
        self._clients = 0

    def __bool__(self) -> bool:
        return bool(self.interceptors)

    def identity(self) -> list[dict[str, Any]]:
        """``{name, config}`` of each interceptor that can change answers (part of the run's identity)."""
        return [dict(i) for i in self._identity]

    def find(self, kind: type[Any]) -> Any | None:
        """The first interceptor of class ``kind`` (the cache, for its counts), or None."""
        return next((i for i in self.interceptors if isinstance(i, kind)), None)

    async def run(self, call: ModelCall, send: Send) -> ModelResponse:
        passed: list[Interceptor] = []
        response: ModelResponse | None = None
        for interceptor in self.interceptors:
            response = await interceptor.before(call)
            if response is not None:
                break
            passed.append(interceptor)
        if response is None:
            response = await send(call.body)
        for interceptor in reversed(passed):
            await interceptor.after(call, response)
        return response

    def opened(self) -> None:
        self._clients += 1

    def closed(self) -> None:
        """A client closed; the last one closes every interceptor (the cache writes what it learnt)."""
        self._clients -= 1
        if self._clients <= 0:
            self._clients = 0
            for interceptor in self.interceptors:
                interceptor.close()
