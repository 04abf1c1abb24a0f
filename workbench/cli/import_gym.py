"""``nel import gym``: NeMo Gym rollout files as a run in the store."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from workbench.cli.paths import store_path


def cmd_import_gym(args: argparse.Namespace) -> int:
    """Import, then say what came in and what to run next (the same id again is a no-op)."""
    from workbench.gym.importer import import_gym

    store = store_path(args)
    store.parent.mkdir(parents=True, exist_ok=True)
    result = import_gym(
        store, Path(args.rollouts),
        inputs=Path(args.inputs) if args.inputs else None,
        failures=Path(args.failures) if args.failures else None,
        run_id=args.run_id, benchmark=args.benchmark, model_id=args.model_id,
    )
    verb = "already imported (nothing written)" if result.already_imported else "imported"
    print(f"run {result.run_id}: {verb}")
    print(f"  benchmark  {result.benchmark}   model {result.model_id or '-'}")
    print(f"  tasks      {result.n_tasks} ({result.n_missing_tasks} missing: no rollout)")
    print(f"  rollouts   {result.n_rollouts} imported, {result.n_repeats} per task at most"
          + (f", {result.n_missing_rollouts} materialized but missing" if result.n_missing_rollouts else ""))
    print(f"  failures   {result.n_failures}")
    if result.n_duplicates:
        print(f"  duplicates {result.n_duplicates} repeated (task, rollout) rows skipped (the first is kept)")
    print(f"  metric     {result.metric}" + ("" if result.metric == "reward" else
                                           f" ({result.benchmark}'s own, as a native run records it)"))
    paired = result.n_tasks - result.n_unpaired_tasks
    print(f"  paired     {paired} of {result.n_tasks} tasks carry nel's task ids (they pair with native runs)")
    if result.unpaired:
        print(f"  unpaired   {result.n_unpaired_tasks} tasks, kept under ids of their own (not guessed):")
        for rows in result.unpaired:
            print(f"    {rows}")
    quoted = shlex.quote(str(store))
    print("next:")
    print(f"  nel eval stats {result.run_id} --store {quoted}")
    print(f"  nel diagnose {result.run_id} --store {quoted}")
    print(f"  nel tui --store {quoted}")
    return 0
