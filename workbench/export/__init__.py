"""Files out: a run's exported artifacts (``eval-*.json``, ``results.jsonl``, ``trajectories.jsonl``, ...),
reports rendered from a bundle, and the atomic writers the front ends use for JSON and text files."""
