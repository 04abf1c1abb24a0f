"""Joining a Ray cluster (``workbench.workers.ray_engine.connect``): what Ray Client does transiently on a loaded
host is tried again; anything else is one line naming the cluster."""

from __future__ import annotations

from typing import Any

import pytest

from workbench.errors import UsageError
from workbench.workers import ray_engine


class FakeRay:
    """``ray`` whose ``init`` raises ``errors`` in turn, then joins."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    def is_initialized(self) -> bool:
        return False

    def init(self, **kwargs: Any) -> None:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ray_engine, "probe", lambda address: None)
    monkeypatch.setattr(ray_engine.time, "sleep", lambda seconds: None)


@pytest.mark.parametrize("error", [
    RuntimeError("Starting Ray client server failed. See ray_client_server_23000.err for detailed logs."),
    RuntimeError("psutil.ZombieProcess: process still exists but it's a zombie (pid=7)"),
])
def test_a_transient_ray_client_failure_is_tried_again(error: Exception) -> None:
    ray = FakeRay(error, error)
    assert ray_engine.connect(ray, "ray://127.0.0.1:10001") is True
    assert ray.calls == 3


def test_it_gives_up_after_three_attempts_in_one_line() -> None:
    error = RuntimeError("Starting Ray client server failed. See ray_client_server_23000.err for detailed logs.")
    with pytest.raises(UsageError, match=r"cannot reach the Ray cluster at ray://127.0.0.1:10001: .*failed"):
        ray_engine.connect(FakeRay(error, error, error), "ray://127.0.0.1:10001")


def test_any_other_failure_is_not_tried_again() -> None:
    ray = FakeRay(ConnectionError("version mismatch: the cluster runs Ray 2.9"))
    with pytest.raises(UsageError, match="version mismatch"):
        ray_engine.connect(ray, "127.0.0.1:6379")
    assert ray.calls == 1
