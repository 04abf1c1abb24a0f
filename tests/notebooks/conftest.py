"""Fixtures of the notebook tests: a small store with the two runs ``notebooks/diagnose.ipynb`` diagnoses, and
a way to execute a notebook top to bottom in a kernel running this venv's Python."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient

from workbench.engine import run_evaluation
from workbench.environments import get_environment
from workbench.mock import mock_model
from workbench.model.config import ModelConfig
from workbench.solvers import SimpleSolver

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
BASELINE, CANDIDATE = "mock-skill-1", "mock-skill-2"  # the run ids diagnose.ipynb looks for
PROBLEMS, REPEATS = 30, 4
KERNEL = "nel-test-python"
_KEY = re.compile(r"^(\w+)=(\S*)$")


def make_runs(store: Path, problems: int = PROBLEMS, repeats: int = REPEATS) -> None:
    """The two runs, as the notebook would make them: the mock model with skill seeds 1 and 2."""
    for run_id, seed in ((BASELINE, 1), (CANDIDATE, 2)):
        with mock_model(latency_ms=0, skill_seed=seed) as mock:
            solver = SimpleSolver(ModelConfig(url=mock.base_url, model_id=f"nel-mock-skill-{seed}", max_retries=0))
            asyncio.run(run_evaluation(get_environment("gsm8k"), solver, store=store, run_id=run_id,
                                       n_repeats=repeats, max_problems=problems, max_concurrent=16))


@pytest.fixture(scope="session")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("notebook-store") / "nel.duckdb"
    make_runs(path)
    return path


@pytest.fixture(scope="session")
def kernel_specs(tmp_path_factory: pytest.TempPathFactory) -> KernelSpecManager:
    """A kernel spec running ``sys.executable`` (this venv), whatever kernels the machine has installed."""
    from ipykernel.kernelspec import write_kernel_spec

    root = tmp_path_factory.mktemp("kernels")
    write_kernel_spec(root / KERNEL)
    return KernelSpecManager(kernel_dirs=[str(root)], ensure_native_kernel=False)


def execute(kernel_specs: KernelSpecManager, name: str, cwd: Path,
            **env: str) -> tuple[nbformat.NotebookNode, dict[str, str], str]:
    """Execute ``notebooks/<name>`` in ``cwd`` with ``env`` set: the executed notebook, its printed ``key=value``
    words (later ones win) and all its printed text."""
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)  # the kernel inherits this process' environment
        km = AsyncKernelManager(kernel_name=KERNEL, kernel_spec_manager=kernel_specs)
        NotebookClient(nb, km=km, timeout=120, resources={"metadata": {"path": str(cwd)}}).execute()
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                   if o.get("output_type") == "stream")
    keys = {m[1]: m[2] for line in text.splitlines() for word in line.split() if (m := _KEY.match(word))}
    return nb, keys, text
