"""A run's parameters and headline metrics as flat name → value maps: what MLflow and W&B are given.

Both trackers take the same facts, read from the eval bundle (``build_eval_bundle``), so a run looks the same in
either. Names use only the characters MLflow accepts (letters, digits, ``_ - . /``): ``pass_at_1``, not
``pass@1``. The endpoint is reduced to its host: a URL's user, password, path and query never leave the store.
"""

from __future__ import annotations

import math
import re
from typing import Any
from urllib.parse import urlsplit

SAMPLING = ("temperature", "top_p", "max_tokens", "seed", "stop", "frequency_penalty", "presence_penalty")
"""The sampling parameters of a run's identity that become parameters."""


def endpoint_host(url: str | None) -> str | None:
    """``scheme://host[:port]`` of the model endpoint, without credentials, path or query."""
    if not url:
        return None
    parts = urlsplit(url)
    if not parts.hostname:
        return None
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname}{port}"


def run_params(bundle: dict[str, Any]) -> dict[str, str]:
    """Model, endpoint host, protocol, sampling parameters, benchmark, repeats, problem range, identity hash,
    dataset hash, solver and nel version (unknown ones left out), each as text."""
    config = bundle.get("config") or {}
    identity = config.get("identity") or {}
    params: dict[str, Any] = {
        "nel_run_id": bundle["run_id"], "model": bundle.get("model_id"),
        "endpoint": endpoint_host(bundle.get("model_url")),
        "protocol": bundle.get("protocol"), "benchmark": bundle["benchmark"], "repeats": bundle.get("n_repeats"),
        "problem_start": config.get("problem_start"), "problem_end": config.get("problem_end"),
        "identity_hash": config.get("identity_hash"), "data_hash": identity.get("data_hash"),
        "solver": identity.get("solver"), "nel_version": bundle.get("nel_version"),
        "primary_metric": bundle.get("primary_metric"),
    }
    params.update({name: identity.get(name) for name in SAMPLING})
    return {k: str(v) for k, v in params.items() if v is not None}


def _name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_\-./]", "_", text)


def run_metrics(bundle: dict[str, Any]) -> dict[str, float]:
    """pass@k with its interval bounds for every k the run has, mean reward (with bounds) and pass rate per
    metric, the share of steps per failure category, latency p50/p90/p99, tokens and counts. Undefined numbers
    (an interval that cannot be computed) are left out rather than logged as NaN."""
    out: dict[str, Any] = {}
    for k, e in sorted((bundle.get("pass_at_k") or {}).items(), key=lambda kv: int(kv[0])):
        out[f"pass_at_{k}"], out[f"pass_at_{k}_low"], out[f"pass_at_{k}_high"] = e["value"], e["low"], e["high"]
    for metric, s in (bundle.get("scores") or {}).items():
        m = _name(metric)
        out[f"{m}/mean_reward"] = s.get("mean_reward")
        out[f"{m}/mean_reward_low"], out[f"{m}/mean_reward_high"] = s.get("mean_reward_low"), s.get("mean_reward_high")
        out[f"{m}/pass_rate"] = s.get("pass_rate")
    failures = bundle.get("failure_analysis") or {}
    n_steps = bundle.get("n_steps") or 0
    for g in failures.get("categories") or []:
        out[f"failure_rate/{_name(str(g['category']))}"] = g["count"] / n_steps if n_steps else None
    wrong = (failures.get("wrong_answers") or {}).get("count")
    out["failure_rate/wrong_answer"] = wrong / n_steps if n_steps and wrong is not None else None
    rt = bundle.get("runtime_stats") or {}
    for key in ("latency_p50_ms", "latency_p90_ms", "latency_p99_ms", "latency_mean_ms", "prompt_tokens",
                "completion_tokens", "total_tokens", "reasoning_tokens", "wall_time_s", "error_rate"):
        out[key] = rt.get(key)
    for key in ("n_tasks", "n_tasks_attempted", "n_steps", "n_pass", "n_wrong", "n_failed", "n_errors"):
        out[key] = bundle.get(key)
    return {k: float(v) for k, v in out.items()
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)}
