"""``lm-eval://TASK``: lm-evaluation-harness tasks with nel owning the model call (the ``[lm-eval]`` extra)."""
