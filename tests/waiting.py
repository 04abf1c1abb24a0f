"""Waiting on a condition instead of sleeping a fixed time (importable from every test folder: ``pythonpath``).

A fixed sleep is either too short on a loaded machine (the test fails, or silently tests nothing) or too long
everywhere else. Wait for what the sleep was waiting for: a file, a process, a count, an answer. Keep a sleep
only where the time itself is under test (a slow scorer, a paced client, "nothing happens within X s"), and say
so beside it. The TUI tests wait through the pilot instead (``pilot_helpers.wait_for``), so the app's timers run.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def _failure(what: str | Callable[[], str], timeout: float) -> AssertionError:
    said = what() if callable(what) else what
    return AssertionError(f"timed out after {timeout:g} s waiting for {said or 'the condition'}")


def wait_until(condition: Callable[[], T], timeout: float = 10.0, *, interval: float = 0.05,
               what: str | Callable[[], str] = "") -> T:
    """Poll ``condition`` every ``interval`` s until it returns something true, and return that; after
    ``timeout`` s fail with an ``AssertionError`` naming ``what`` (a string, or a function giving one, called
    only then: the state to show)."""
    deadline = time.monotonic() + timeout
    while True:
        if result := condition():
            return result
        if time.monotonic() > deadline:
            raise _failure(what, timeout)
        time.sleep(interval)


async def wait_until_async(condition: Callable[[], T], timeout: float = 10.0, *, interval: float = 0.05,
                           what: str | Callable[[], str] = "") -> T:
    """``wait_until`` on an event loop: the loop runs between the polls."""
    deadline = time.monotonic() + timeout
    while True:
        if result := condition():
            return result
        if time.monotonic() > deadline:
            raise _failure(what, timeout)
        await asyncio.sleep(interval)
