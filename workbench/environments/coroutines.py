"""Coroutine ``seed``/``verify`` methods (NeMo Evaluator's environments are written ``async def``) as plain calls.

The engine seeds in its work generator, ``nel serve`` and the scoring pools call ``verify`` from threads and
worker processes: everything that drives an environment calls it synchronously. Rather than teach each of them
both kinds, ``EvalEnvironment`` turns a coroutine method into a blocking one when the class is defined. The
coroutine runs on one event loop per process, in a thread of its own, so:

- the caller's event loop (the engine's) is never re-entered (``asyncio.run`` there would refuse);
- an environment that opens an ``httpx.AsyncClient`` or a lock once keeps using it on the same loop, call after
  call (a fresh loop per call would break both);
- several scoring threads may await at once: their coroutines interleave on that loop.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_pid: int | None = None


def _environment_loop() -> asyncio.AbstractEventLoop:
    """The process's loop for environments' coroutines, started on first use (again in a child process)."""
    global _loop, _thread, _pid
    with _lock:
        if _loop is None or _pid != os.getpid() or _thread is None or not _thread.is_alive():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="nel-environment-loop", daemon=True)
            thread.start()
            _loop, _thread, _pid = loop, thread, os.getpid()
        return _loop


def run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the environments' loop and wait for its result (its exception, raised here)."""
    loop = _environment_loop()
    if threading.current_thread() is _thread:
        coro.close()
        raise RuntimeError("an environment's async seed/verify called another of its methods synchronously from "
                           "inside its own coroutine; await the coroutine's own helpers instead")
    return asyncio.run_coroutine_threadsafe(coro, loop).result()


def blocking(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` itself when it is a plain function, else a plain function running the coroutine it returns."""
    if not inspect.iscoroutinefunction(method):
        return method

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        return run_blocking(method(*args, **kwargs))

    call.__nel_async__ = True  # type: ignore[attr-defined]
    return call
