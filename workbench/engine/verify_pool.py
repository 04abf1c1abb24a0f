"""Where a benchmark's ``verify`` runs, off the event loop the other attempts share.

Scoring is CPU work (regexes over the response, sympy for maths) or a wait (a user's scorer doing I/O), and
either stalls every other request in flight when it runs on the event loop. An environment declares which
(``Capabilities.scoring``): ``inline`` (a cheap pure function: short responses are scored on the loop, a long
one in a thread), ``thread`` (``ThreadScoring``: may block, or unknown user code), ``process``
(``ProcessScoring``: CPU-heavy, e.g. math-verify). The engine (``workbench.runs``) and ``nel serve`` use the same
classes.

- Processes are started by ``forkserver`` (``spawn`` where there is none), never by forking the running
  program (its event loop and threads). Each builds the environment itself from an ``EnvSource``: the
  benchmark's name and the BYOB files that define it, since a benchmark defined in a user's file does not
  pickle.
- A worker that dies (a segfaulting extension, ``os._exit`` in a scorer, the OOM killer) breaks the whole
  pool: every request waiting on it fails at once. The pool is replaced, and each of those requests is
  scored again alone, in a process of its own: the one that kills that process too is the cause, and only
  it fails (``ScoringCrashed``).
- A worker scores in its main thread, so math-verify's ``signal.alarm`` bound on sympy applies there (in a
  thread it cannot). Workers run at a lower priority than their parent, and exit when it does, even when it
  is killed (they watch a pipe only the parent holds open).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Protocol

import anyio

from workbench.environments.base import EvalEnvironment
from workbench.errors import NelError, RunFailed
from workbench.types import VerifyResult

log = logging.getLogger("workbench.serve")

DEFAULT_VERIFY_THREADS = 64
STOP_GRACE_S = 5.0
"""How long a stopping server waits for scoring in flight before it kills the workers."""
WORKER_NICENESS = 5
"""Scoring workers run this much nicer than the server (``os.nice``), so its event loop is scheduled first."""


class ScoringUnavailable(Exception):
    """The benchmark cannot score here at all (a ``NelError`` from its verify, e.g. code without a sandbox)."""


class ScoringCrashed(Exception):
    """The process scoring this response died; the pool has been replaced."""


class Scoring(Protocol):
    """What the engine and the server await for a verdict; raises ``ScoringUnavailable`` or ``ScoringCrashed``."""

    async def verify(self, text: str, expected: str, kwargs: dict[str, Any]) -> VerifyResult: ...


Verifier = Scoring


def default_verifier(env: EvalEnvironment, threads: int = DEFAULT_VERIFY_THREADS) -> Scoring:
    """As the environment's scoring asks, without a process pool (that needs an ``EnvSource``: the caller's)."""
    if env.capabilities.scoring == "inline":
        return InlineScoring(env, threads)
    return ThreadScoring(env, threads)


@dataclass(frozen=True, slots=True)
class EnvSource:
    """How a worker process builds the served environment: its registered name (or ``gym://`` URL) and
    the BYOB ``.py`` files to load first (their ``@benchmark`` decorators register it)."""

    name: str
    benchmark_files: tuple[str, ...] = ()
    dataset: str | None = None
    """The benchmark's ``dataset:`` (another source for its rows), if the run names one."""

    def build(self) -> EvalEnvironment:
        from workbench.environments import get_environment
        from workbench.environments.byob import load_benchmark_file

        for path in self.benchmark_files:
            load_benchmark_file(path)
        return get_environment(self.name, self.dataset)


def default_workers() -> int:
    """One worker per core this process may run on (a container's CPU set, not the host's), and at least
    two: on one core, a single slow verify would otherwise hold up every other."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(2, cores)


# ---- in a worker process -----------------------------------------------------------------------------
_ENV: EvalEnvironment | None = None


def _init_worker(source: EnvSource, server_alive: Connection) -> None:
    global _ENV
    # Ctrl-C reaches the whole process group: the server decides when its workers stop, not the terminal
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_with_the_server, args=(server_alive,), daemon=True).start()
    # below the server in the scheduler's eyes: with every core busy scoring, the event loop (/health, new
    # requests) still runs the moment it has something to do; scoring takes what is left
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICENESS)
    _ENV = source.build()


def _exit_with_the_server(server_alive: Connection) -> None:
    """Exit once the server is gone, even killed with SIGKILL. A pool's worker never notices that by itself
    (it holds both ends of its own task pipe), and each keeps the forkserver alive: all would be orphans."""
    with contextlib.suppress(EOFError, OSError):
        server_alive.recv()  # nothing is ever sent: this returns (EOFError) when the server's end closes
    os._exit(1)


def _ready() -> int:
    return os.getpid()


def score(env: EvalEnvironment, text: str, expected: str, kwargs: dict[str, Any]) -> VerifyResult:
    """``env.verify``, with a scorer's bug on one odd response made a ``scorer_error`` verdict that says so."""
    from workbench.engine.verdicts import scorer_failed

    try:
        return env.verify(text, expected, **kwargs)
    except NelError as exc:
        raise ScoringUnavailable(str(exc)) from None
    except Exception as exc:
        log.debug("verify raised on %s", env.name, exc_info=True)
        return scorer_failed(exc)


def _score_in_worker(text: str, expected: str, kwargs: dict[str, Any]) -> VerifyResult:
    assert _ENV is not None, "worker not initialised"
    return score(_ENV, text, expected, kwargs)


# ---- in the server (or the engine) -------------------------------------------------------------------
INLINE_MAX_CHARS = 16 * 1024
"""An ``inline`` scorer scores a response up to this long on the event loop (tens of microseconds: a thread hop
would cost more); a longer one goes to a thread."""


class InlineScoring:
    """A cheap, pure ``verify``: on the event loop for a short response, in a thread for a long one."""

    def __init__(self, env: EvalEnvironment, threads: int = DEFAULT_VERIFY_THREADS) -> None:
        self.env = env
        self._threads = ThreadScoring(env, threads)

    async def verify(self, text: str, expected: str, kwargs: dict[str, Any]) -> VerifyResult:
        if len(text) <= INLINE_MAX_CHARS:
            return score(self.env, text, expected, kwargs)
        return await self._threads.verify(text, expected, kwargs)


class ThreadScoring:
    """``verify`` in the server's own threads (at most ``threads`` at once): no isolation from the GIL."""

    def __init__(self, env: EvalEnvironment, threads: int = DEFAULT_VERIFY_THREADS) -> None:
        self.env = env
        self._limiter = anyio.CapacityLimiter(threads)

    async def verify(self, text: str, expected: str, kwargs: dict[str, Any]) -> VerifyResult:
        return await anyio.to_thread.run_sync(score, self.env, text, expected, kwargs, limiter=self._limiter)


class ProcessScoring:
    """``verify`` in a pool of ``workers`` processes, replaced whenever a worker dies."""

    def __init__(self, source: EnvSource, workers: int) -> None:
        self.source = source
        self.workers = workers
        self._context = _context()
        # the server's end is never written: workers watch the other for the end of file its death brings
        self._alive_r, self._alive_w = self._context.Pipe(duplex=False)
        self._pool = self._new_pool(workers)
        self.replaced = 0
        """How many times a dead worker's pool was replaced (for logs and tests)."""

    def _new_pool(self, workers: int) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(workers, mp_context=self._context, initializer=_init_worker,
                                   initargs=(self.source, self._alive_r))

    def start(self) -> None:
        """Start every worker now and wait until each has built the environment (a broken benchmark file
        fails here, at start-up, not on the first request)."""
        pids = [self._pool.submit(_ready) for _ in range(self.workers)]
        try:
            for pid in pids:
                pid.result()
        except BrokenProcessPool:
            self.close()
            raise RunFailed(f"the scoring workers could not start {self.source.name} (see the error above); "
                            "--scoring-workers 0 scores in the server's own threads") from None

    async def verify(self, text: str, expected: str, kwargs: dict[str, Any]) -> VerifyResult:
        pool = self._pool
        try:
            return await _awaited(pool, text, expected, kwargs)
        except BrokenProcessPool:
            self._replace(pool)
        log.warning("a scoring worker died; scoring a response again alone to find the one that killed it")
        return await self._alone(text, expected, kwargs)

    def _replace(self, broken: ProcessPoolExecutor) -> None:
        """Replace the pool once, however many requests saw it break."""
        if self._pool is broken:
            self._pool = self._new_pool(self.workers)
            self.replaced += 1
            broken.shutdown(wait=False, cancel_futures=True)

    async def _alone(self, text: str, expected: str, kwargs: dict[str, Any]) -> VerifyResult:
        solo = self._new_pool(1)
        try:
            return await _awaited(solo, text, expected, kwargs)
        except BrokenProcessPool:
            raise ScoringCrashed("the process scoring this response died (a crash in the benchmark's scorer, "
                                 "or out of memory); the other requests were scored") from None
        finally:
            await asyncio.to_thread(solo.shutdown, True)

    def close(self) -> None:
        """Stop the workers: scoring in flight gets ``STOP_GRACE_S`` to finish, then the workers are killed."""
        pool = self._pool
        # the executor keeps its processes private; they are needed to bound the wait and kill stragglers
        procs = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + STOP_GRACE_S
        for proc in procs:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(1.0)
        self._alive_w.close()
        self._alive_r.close()


def _context() -> multiprocessing.context.BaseContext:
    """forkserver where it exists (workers fork from a small clean process, quickly), else spawn: never a
    fork of the running server, whose event loop and threads a child must not inherit."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["workbench.engine.verify_pool", "workbench.environments"])
        return context
    return multiprocessing.get_context("spawn")


async def _awaited(pool: ProcessPoolExecutor, text: str, expected: str, kwargs: dict[str, Any]) -> VerifyResult:
    try:
        future: Future[VerifyResult] = pool.submit(_score_in_worker, text, expected, kwargs)
    except BrokenProcessPool:
        raise
    except RuntimeError as exc:  # "cannot schedule new futures after shutdown": the server is stopping
        raise ScoringCrashed(f"scoring stopped: {exc}") from None
    return await asyncio.wrap_future(future)
