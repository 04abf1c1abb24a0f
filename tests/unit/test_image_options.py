"""The image options of a run: ``--image-detail`` / ``solver.image_detail`` reach the model config and the run's
identity; the visual schemes nel cannot serve here say why, in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.environments.registry import resolve_benchmark
from workbench.errors import UsageError
from workbench.spec.load import load_spec
from workbench.spec.models import RunSpec
from workbench.spec.resolve import model_config

SUITE = """
services:
  main: {type: api, url: "http://127.0.0.1:8000/v1", model: m}
benchmarks:
  - name: shape_count
    solver: {type: simple, image_detail: %s}
"""


def _load(tmp_path: Path, detail: str) -> RunSpec:
    path = tmp_path / "suite.yaml"
    path.write_text(SUITE % detail)
    return load_spec(path)[0]


def test_solver_image_detail_reaches_the_model_config_and_its_identity(tmp_path: Path):
    spec = _load(tmp_path, "high")
    config = model_config(spec, spec.benchmarks[0])
    assert config.image_detail == "high" and config.identity()["image_detail"] == "high"


def test_an_unknown_image_detail_names_the_key(tmp_path: Path):
    with pytest.raises(UsageError, match=r"benchmarks\.0\.solver\.image_detail"):
        _load(tmp_path, "huge")


@pytest.mark.parametrize(("uri", "instead"), [("vlmevalkit://MMBench_DEV_EN", "shape_count"),
                                              ("skills://aime24", "lm-eval://")])
def test_vlmevalkit_and_skills_are_refused_with_why_and_what_to_use(uri: str, instead: str):
    with pytest.raises(UsageError) as caught:
        resolve_benchmark(uri)
    message = str(caught.value)
    assert "\n" not in message and "does not integrate" in message and instead in message and uri in message
