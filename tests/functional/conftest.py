"""Fixtures of the functional tests (helpers live in ``nel_helpers``)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator

import pytest
from nel_helpers import NEL, clean_env, stop

from workbench.mock import MockHandle, mock_model
from workbench.sandbox.daemon import DockerdMissing, ensure_dockerd
from workbench.sandbox.image import DEFAULT_IMAGE, ensure_image


@pytest.fixture(scope="module")
def mock() -> Iterator[MockHandle]:
    """The mock model, answering at once, shared by a test module."""
    with mock_model(latency_ms=0) as handle:
        yield handle


@pytest.fixture(scope="session")
def docker_image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A running Docker engine (started here if installed but down; a skip only when it is not installed,
    a failure with its log when it will not start) with the sandbox image built (about a minute, once)."""
    try:
        started = ensure_dockerd(tmp_path_factory.mktemp("dockerd") / "dockerd.log")
    except DockerdMissing as exc:
        pytest.skip(str(exc))
    ensure_image(DEFAULT_IMAGE)
    yield DEFAULT_IMAGE
    if started is not None:
        started.terminate()
        started.wait(30)


@pytest.fixture(scope="module")
def nel_serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`nel serve -b gsm8k` on a free loopback port: its gym:// URL."""
    cwd = tmp_path_factory.mktemp("serve")
    proc = subprocess.Popen([NEL, "serve", "-b", "gsm8k", "--port", "0"], cwd=cwd, env=clean_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r" at http://([\d.]+:\d+)", line)
        assert match, f"no ready line from nel serve: {line!r}"
        yield f"gym://{match.group(1)}"
    finally:
        stop(proc)
