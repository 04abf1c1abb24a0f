"""Files in: results other harnesses wrote (lm-evaluation-harness ``--log_samples`` output), as runs in the store.

Each importer writes through the engine's own ``ShardWriter`` and ``ingest``, as ``nel import gym`` does, so every
view (``nel compare``, ``nel diagnose``, the TUI, the notebooks) reads an imported run like a native one.
"""
