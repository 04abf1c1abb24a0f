"""The run loop: seed → model → verify, with repeats, concurrency, resume and shards."""

from workbench.engine.plan import RunPlan
from workbench.engine.progress import RunProgress, StepListener
from workbench.engine.run import RunResult, run_evaluation
from workbench.engine.sharding import Shard, shard_from_env

__all__ = ["RunPlan", "RunProgress", "RunResult", "Shard", "StepListener", "run_evaluation", "shard_from_env"]
