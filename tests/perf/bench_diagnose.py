"""Benchmark: the whole diagnosis of two runs (issue 6). A script, not a test: run it with the venv's python.

Builds two synthetic 14,000-task x 8-repeat runs (112,000 attempts each) as ``RunData`` frames with numpy
and polars (a U-shaped per-task skill, the candidate's nudged on 10 % of the tasks, 20 categories, three
difficulties, 1 % transport errors, tokens, latency and response lengths), then times, best of three:
  1. ``run_profile`` of each run;
  2. ``score_shift`` (pairing, contributions, slices, transitions, attempt flips, drivers);
  3. ``diagnose`` as a whole: both profiles, the dives, the shift and the findings (target < 2 s).
Then the same from a store (``bench_compare.make_store``'s runs): ``load_run`` x 2 and ``diagnose`` with the
evidence read from the store (the dives' and drivers' attempts, the never-pass answer agreement).
Pass --tasks N / --repeats R for another size.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

from workbench.analysis.sources import RunData

ERROR_RATE = 0.01


def make_run(run_id: str, n_tasks: int, repeats: int, *, shift: float, seed: int) -> RunData:
    """One run's frames. A task's skill depends only on its index (the same tasks are easy in both runs)."""
    base = np.random.default_rng(12345)
    u, v, s = base.random(n_tasks), base.random(n_tasks), base.random(n_tasks)
    skill = np.where(u < 0.5, v ** 3, 1 - v ** 3) + np.where(s < 0.1, shift * 10, 0.0)
    skill = np.clip(skill, 0.0, 1.0)
    rng = np.random.default_rng(seed)
    idx = np.repeat(np.arange(n_tasks), repeats)
    rep = np.tile(np.arange(repeats), n_tasks)
    draw, err = rng.random(idx.size), rng.random(idx.size)
    error = err < ERROR_RATE
    passed = ~error & (draw < skill[idx])
    wrong_kind = np.where(rng.random(idx.size) < 0.8, None, "format_error")  # type: ignore[call-overload]
    failure = np.where(error, "timeout", np.where(passed, None, wrong_kind))
    tokens = (150 + draw * 100).astype(np.int64)
    category = np.array([f"c{i % 20}" for i in range(n_tasks)])
    difficulty = np.array(["easy", "medium", "hard"])[np.arange(n_tasks) % 3]
    task_ids = np.array([f"t{i}" for i in range(n_tasks)])
    attempts = pl.DataFrame({
        "task_id": task_ids[idx], "task_idx": idx.astype(np.int64), "repeat": rep.astype(np.int64),
        "reward": passed.astype(np.float64), "passed": passed, "error": error,
        "failure_category": pl.Series(failure.tolist(), dtype=pl.Utf8),
        "latency_ms": np.where(error, 30_000.0, 20 + draw * 30), "prompt_tokens": np.full(idx.size, 100),
        "completion_tokens": tokens - 100, "total_tokens": tokens,
        "response_chars": pl.Series(np.where(error, -1, tokens * 4)).replace(-1, None),
        "category": category[idx], "difficulty": difficulty[idx],
    })
    tasks = attempts.group_by("task_idx", maintain_order=True).agg(
        pl.col("task_id").first(), pl.len().cast(pl.Int64).alias("n"),
        pl.col("passed").sum().cast(pl.Int64).alias("n_pass"), pl.col("reward").sum().alias("reward_sum"),
        pl.col("error").sum().cast(pl.Int64).alias("n_error"), pl.col("category").first(),
        pl.col("difficulty").first(),
    ).select("task_id", "task_idx", "n", "n_pass", "reward_sum", "n_error", "category", "difficulty")
    return RunData(run_id=run_id, benchmark="bench", model_id="mock", metric="reward", metrics=("reward",),
                   n_repeats=repeats, attempts=attempts, tasks=tasks, source="bench")


def best_of(n: int, fn):  # type: ignore[no-untyped-def]
    best, result = float("inf"), None
    for _ in range(n):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    n_tasks = int(sys.argv[sys.argv.index("--tasks") + 1]) if "--tasks" in sys.argv else 14_000
    repeats = int(sys.argv[sys.argv.index("--repeats") + 1]) if "--repeats" in sys.argv else 8
    start = time.perf_counter()
    import scipy.stats  # noqa: F401  (run_statistics' intervals)

    from workbench.analysis.diagnosis import diagnose, evidence_for, run_profile, score_shift
    from workbench.analysis.sources import load_run

    imports = time.perf_counter() - start
    a = make_run("base", n_tasks, repeats, shift=0.0, seed=11)
    b = make_run("cand", n_tasks, repeats, shift=-0.004, seed=23)
    print(f"runs: 2 x {n_tasks:,} tasks x {repeats} repeats = {2 * n_tasks * repeats:,} attempts "
          f"(imports incl. scipy.stats: {imports:.2f} s, not counted below); best of 3")
    diagnose(a, b)  # warm-up: first-call costs (polars' string cache, numpy) are not the diagnosis'
    t_profile, (pa, pb) = best_of(3, lambda: (run_profile(a), run_profile(b)))
    t_shift, shift = best_of(3, lambda: score_shift(a, b, pa, pb, top=5))
    t_all, d = best_of(3, lambda: diagnose(a, b, top=5))
    print(f"  run_profile x 2 {t_profile:.3f} s, score_shift {t_shift:.3f} s")
    print(f"  diagnose (profiles, dives, shift, findings) {t_all:.3f} s (target < 2 s)")
    print(f"  pass@1 {shift.pass_at_1_a:.4f} -> {shift.pass_at_1_b:.4f} (delta {shift.delta:+.4f} over "
          f"{shift.n_paired:,} paired tasks), {len(d.findings)} findings, {sum(shift.transitions.values()):,} "
          f"transitions, {shift.attempt_flips.n_pairs:,} attempt pairs")

    from bench_compare import make_store  # a sibling script: its runs, written straight into DuckDB

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_store(root / "base" / "nel.duckdb", "base", n_tasks, repeats, shift=0.0, seed=0.11)
        make_store(root / "cand" / "nel.duckdb", "cand", n_tasks, repeats, shift=-0.004, seed=0.23)
        stores = {"base": root / "base" / "nel.duckdb", "cand": root / "cand" / "nel.duckdb"}
        t_load, (sa, sb) = best_of(3, lambda: (load_run("base", store=stores["base"]),
                                               load_run("cand", store=stores["cand"])))
        t_store, _ = best_of(3, lambda: diagnose(sa, sb, evidence_baseline=evidence_for("base", stores["base"]),
                                                 evidence_candidate=evidence_for("cand", stores["cand"]), top=5))
        print(f"from a store: load_run x 2 {t_load:.3f} s, diagnose with evidence from the store {t_store:.3f} s, "
              f"total {t_load + t_store:.3f} s")


if __name__ == "__main__":
    main()
