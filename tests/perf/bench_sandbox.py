"""Benchmark: HumanEval's 164 canonical solutions scored in each sandbox (issue 9). A script, not a test.

Each problem's canonical program, in a ```python block as a model would answer, goes through
``score_humaneval_response`` exactly as a run will. Prints whether all 164 pass and the
throughput in problems/s for: docker with a container per attempt, docker with a warm pool,
and the local backend with bubblewrap (when it works here) and without. Builds the image if missing.

    .venv/bin/python tests/perf/bench_sandbox.py [--concurrency 4] [--repeats 1] [--only docker-pool]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from workbench.environments.humaneval import complete_function, default_data_path
from workbench.sandbox.base import Sandboxes, open_sandboxes
from workbench.sandbox.image import ensure_image
from workbench.sandbox.local import LocalSandboxes
from workbench.sandbox.spec import SandboxSpec
from workbench.scoring.code_exec import CodeRunResult, score_humaneval_response

SETUPS = {
    "docker-per-attempt": {"type": "docker", "mode": "per_attempt"},
    "docker-pool": {"type": "docker", "mode": "pool"},
    "local": {"type": "local"},  # with bubblewrap when it works here
    "local-plain": {"type": "local"},  # without: rlimits and a temp dir only
}


async def score_all(
    spec: SandboxSpec, rows: list[dict[str, Any]], plain: bool = False
) -> tuple[list[CodeRunResult], float, str]:
    """Score every row's canonical answer; (results, wall seconds, backend label)."""
    provider: Sandboxes = LocalSandboxes(spec, bwrap=False) if plain else open_sandboxes(spec)
    async with provider as sandboxes:

        async def one(row: dict[str, Any]) -> CodeRunResult:
            async with sandboxes.session() as box:
                answer = f"Here you go.\n```python\n{complete_function(row)}\n```\n"
                return await score_humaneval_response(box, answer, row, spec.timeout)

        started = time.perf_counter()
        results = list(await asyncio.gather(*(one(row) for row in rows)))
        return results, time.perf_counter() - started, sandboxes.backend


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=1, help="times through the 164 problems")
    parser.add_argument("--only", choices=sorted(SETUPS), action="append")
    args = parser.parse_args()
    rows = [json.loads(line) for line in default_data_path().read_text(encoding="utf-8").splitlines()]
    rows = rows * args.repeats
    chosen = args.only or list(SETUPS)
    if any(SETUPS[name]["type"] == "docker" for name in chosen):
        ensure_image()
    print(f"HumanEval {len(rows)} canonical answers, concurrency {args.concurrency}")
    for name in chosen:
        spec = SandboxSpec(**SETUPS[name], concurrency=args.concurrency, timeout=10.0)  # type: ignore[arg-type]
        results, wall, backend = asyncio.run(score_all(spec, rows, plain=name == "local-plain"))
        failed = [row["task_id"] for row, result in zip(rows, results, strict=True) if not result.passed]
        verdict = f"all {len(rows)} pass" if not failed else f"{len(failed)} FAIL: {', '.join(failed)}"
        print(f"  {name:<20} {verdict:<14} {len(rows) / wall:6.1f} problems/s  ({wall:.1f} s; {backend})")
        for row, result in zip(rows, results, strict=True):
            if not result.passed:
                print(f"    {row['task_id']}: {result.details}")


if __name__ == "__main__":
    main()
