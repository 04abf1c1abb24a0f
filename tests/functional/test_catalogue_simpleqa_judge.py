"""SimpleQA's judge through the engine's judge metric, against the mock model serving as the judge over HTTP."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from catalogue_fixtures import frozen_environment

from workbench.engine.metrics import JUDGE, MetricSpec, MetricSuite
from workbench.mock import MockHandle
from workbench.model.client import ModelResponse
from workbench.model.config import ModelConfig
from workbench.solvers.base import SolverOutput

pytestmark = pytest.mark.timeout(60)


def test_the_judge_metric_asks_with_simple_evals_template_and_stores_the_grade(mock: MockHandle,
                                                                               tmp_path: Path) -> None:
    env = frozen_environment("simpleqa", tmp_path)
    suite = MetricSuite(env, [MetricSpec("grade", JUDGE, judge=ModelConfig(url=mock.base_url, model_id="judge"))])
    seed = env.seed(0)

    async def score(response: str) -> tuple[float, str | None, dict[str, object]]:
        async with suite.worker() as worker:
            out = SolverOutput(response, [], ModelResponse(text=response))
            verdict, scores = await worker.score(seed, out)
            assert scores["grade"]["reward"] == verdict.reward
            return verdict.reward, verdict.extracted_answer, dict(verdict.scoring_details)

    right, wrong, declined, empty = (asyncio.run(score(r)) for r in ("Michio Sugeno", "Geoffrey Hinton",
                                                                      "I don't know.", ""))
    assert right[:2] == (1.0, "CORRECT") and wrong[:2] == (0.0, "INCORRECT") and declined[:2] == (0.0, "NOT_ATTEMPTED")
    details = right[2]
    assert details["grader"] == "simpleqa_grader" and details["judge_response"] == "A"
    assert "Gold target: Michio Sugeno\nPredicted answer: Michio Sugeno" in str(details["judge_prompt"])
    assert empty[:2] == (0.0, None) and "not sent to the judge" in str(empty[2]["reason"])
