"""NeMo Evaluator's Python surface, on nel's engine, store and statistics (``docs/python-api.md``).

What its API reference has users type works with ``nemo_evaluator`` changed to ``workbench``:
``ModelClient`` and ``ChatResponse`` (``client``), ``run_evaluation`` (``evaluation``), ``write_all``
(``artifacts``), ``compare_runs`` and ``write_regression`` (``compare``), ``generate_app`` (``serving``). The
environment side (``EvalEnvironment``, ``SeedResult``, ``register``, async ``seed``/``verify``) is
``workbench.environments``'s own. ``workbench`` exports them all lazily: ``import workbench`` stays light.
"""

from workbench.api.artifacts import write_all
from workbench.api.client import ChatResponse, ModelClient
from workbench.api.compare import compare_runs, write_regression
from workbench.api.evaluation import run_evaluation
from workbench.api.serving import generate_app

__all__ = ["ChatResponse", "ModelClient", "compare_runs", "generate_app", "run_evaluation", "write_all",
           "write_regression"]
