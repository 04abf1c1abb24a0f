"""``nel import lm-eval``: lm-evaluation-harness ``--log_samples`` output as runs in the store (one per task)."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from workbench.cli.paths import store_path


def cmd_import_lmeval(args: argparse.Namespace) -> int:
    """Import, then say per task what came in, what lm-eval reported, and what to run next."""
    from workbench.importers.lmeval import import_lmeval

    store = store_path(args)
    store.parent.mkdir(parents=True, exist_ok=True)
    results = import_lmeval(store, Path(args.dir), run_id=args.run_id, benchmark=args.benchmark)
    quoted = shlex.quote(str(store))
    for r in results:
        verb = "already imported (nothing written)" if r.already_imported else "imported"
        print(f"run {r.run_id}: {verb}")
        print(f"  task       {r.task}   benchmark {r.benchmark}   model {r.model_id or '-'}")
        print(f"  documents  {r.n_tasks}, {r.n_repeats} repeat(s) each" +
              ("" if r.already_imported else f", {r.n_steps} steps written"))
        reported = "-" if r.reported is None else f"{r.reported:.6g}"
        print(f"  metric     {r.metric} = lm-eval's {r.lm_eval_metric} (lm-eval reported {reported})")
        paired = r.n_tasks - r.n_unpaired_tasks
        print(f"  paired     {paired} of {r.n_tasks} documents carry nel's task ids (they pair with native runs)")
        if r.n_unpaired_tasks:
            print(f"  unpaired   {r.n_unpaired_tasks} documents, kept under lmeval-<hash> ids"
                  + (f": {r.unpaired_reason}" if r.unpaired_reason else ": not problems of the benchmark"))
        if r.n_skipped:
            print(f"  skipped    {r.n_skipped} damaged lines:")
            for where in r.skipped:
                print(f"    {where}")
            if r.n_skipped > len(r.skipped):
                print(f"    ... and {r.n_skipped - len(r.skipped)} more")
    print("next:")
    print(f"  nel eval stats {results[0].run_id} --store {quoted}")
    print(f"  nel compare NATIVE_RUN {results[0].run_id} --store {quoted}")
    print(f"  nel tui --store {quoted}")
    return 0
