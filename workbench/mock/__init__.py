"""The built-in OpenAI-compatible mock model: a labelled demo and test double, not a real model.

It answers the built-in benchmarks' prompts correctly with a per-task
probability from a seeded skill profile, deterministically per
(task, request seed, attempt), and can inject latency and faults.
``mock_model()`` runs it as a subprocess; ``python -m workbench.mock``
serves it from the command line.
"""

from workbench.mock.config import MockConfig
from workbench.mock.process import MockHandle, mock_model

__all__ = ["MockConfig", "MockHandle", "mock_model"]
