"""What every test folder shares: the hypothesis profiles (``profiles.py``) and how the suite is split between
xdist workers.

``make test`` runs ``pytest -n 2`` with ``--dist loadgroup`` (``addopts``): each module is one group, so its
module-scoped fixtures (a mock server, a store, a cluster) start once, in one worker; modules that share
something machine-wide are one group together (``SHARED``), so two workers never race for it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import profiles  # noqa: F401  (registers the hypothesis profiles before `--hypothesis-profile` is read)
import pytest

SHARED: dict[str, tuple[str, ...]] = {
    # One Docker engine: the first of these to need it starts dockerd (a second dockerd would fail on its pid
    # file), the sandbox and nel images are built once, `nel doctor` reports whether the engine answers, and
    # the sandbox tests count the machine's sandbox containers.
    "docker": ("functional/test_docker.py", "functional/test_sandbox_docker.py",
               "functional/test_sandboxed_docker_runs.py", "functional/test_code_exec.py",
               "functional/test_doctor.py"),
}
FIRST = ("docker", "functional/test_eval_ray.py", "functional/test_slurm.py", "functional/test_store_kills.py")
"""Groups handed out first: the longest (the docker group builds two images on a fresh machine), so no worker
is left with one of them at the end while the other waits."""

_TESTS = Path(__file__).parent

# `nel config set` keeps a user's defaults under $XDG_CONFIG_HOME/nel; the developer's own must never steer a test
# (every `nel` the suite starts inherits this environment). Tests of `nel config` point it elsewhere themselves.
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="nel-test-xdg-")


def group_of(item: pytest.Item) -> str:
    """The xdist group of a test: its ``SHARED`` group, else its module."""
    module = item.path.relative_to(_TESTS).as_posix() if item.path.is_relative_to(_TESTS) else str(item.path)
    return next((name for name, modules in SHARED.items() if module in modules), module)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(pytest.mark.xdist_group(group_of(item)))
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the order work is handed out in; a serial run keeps its order
        items.sort(key=lambda item: FIRST.index(g) if (g := group_of(item)) in FIRST else len(FIRST))
