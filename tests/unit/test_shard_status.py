"""How `nel eval status` names a background shard from its worker's pid and exit code."""

from __future__ import annotations

import signal

import pytest

from workbench.cli.eval_workers import _shard_status


@pytest.mark.parametrize(("exit_code", "launch", "status"), [
    (0, "complete", "done"),
    (130, "stopped", "stopped"),  # it took SIGTERM as Ctrl-C: interrupted, its steps kept
    # `nel eval stop` reached it while it still started up (a loaded machine), before it could take SIGTERM
    # as Ctrl-C: stopped, as asked, not dead
    (-signal.SIGTERM, "stopped", "stopped"),
    (-signal.SIGTERM, "stopping", "stopped"),
    (-signal.SIGTERM, "running", "dead"),  # nobody asked it to stop
    (-signal.SIGKILL, "stopped", "dead"),
    (2, "failed", "failed"),
])
def test_a_finished_worker(exit_code: int, launch: str, status: str) -> None:
    assert _shard_status(12345, exit_code, launch)[0] == status
