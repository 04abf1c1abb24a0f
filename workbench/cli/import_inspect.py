"""``nel import inspect``: inspect_ai logs as runs in the store (one per log, one step per sample × epoch)."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from workbench.cli.paths import store_path


def cmd_import_inspect(args: argparse.Namespace) -> int:
    """Import, then say per log what came in, what inspect reported, what is unpaired or skipped, and what next."""
    from workbench.importers.inspect_log import import_inspect

    store = store_path(args)
    store.parent.mkdir(parents=True, exist_ok=True)
    results = import_inspect(store, Path(args.log), run_id=args.run_id, benchmark=args.benchmark)
    quoted = shlex.quote(str(store))
    for r in results:
        verb = "already imported (nothing written)" if r.already_imported else "imported"
        print(f"run {r.run_id}: {verb}  ({r.log})")
        print(f"  task       {r.task}   benchmark {r.benchmark}   model {r.model_id or '-'}   log status {r.status}")
        print(f"  samples    {r.n_tasks}, up to {r.n_repeats} epoch(s) each" +
              ("" if r.already_imported else f", {r.n_steps} steps written"))
        reported = "-" if r.reported is None else f"{r.reported:.6g}"
        print(f"  metric     {r.metric} = inspect's {r.scorer or '-'} score (inspect reported {reported})")
        print(f"  paired     {r.n_tasks - r.n_unpaired_tasks} of {r.n_tasks} samples carry nel's task ids "
              "(they pair with native runs)")
        if r.n_unpaired_tasks:
            print(f"  unpaired   {r.n_unpaired_tasks} samples, kept under inspect-<hash> ids:")
            for reason, n in r.unpaired_reasons:
                print(f"    {n}: {reason}")
        if r.n_duplicates:
            print(f"  duplicates {r.n_duplicates} sample entries repeat an id and epoch (the first kept)")
        if r.n_skipped:
            print(f"  skipped    {r.n_skipped} damaged sample entries:")
            for where in r.skipped:
                print(f"    {where}")
            if r.n_skipped > len(r.skipped):
                print(f"    ... and {r.n_skipped - len(r.skipped)} more")
    if results[0].not_logs:
        print(f"skipped {len(results[0].not_logs)} files that are not inspect logs:")
        for line in results[0].not_logs:
            print(f"  {line}")
    print("next:")
    print(f"  nel eval stats {results[0].run_id} --store {quoted}")
    print(f"  nel compare NATIVE_RUN {results[0].run_id} --store {quoted}")
    print(f"  nel tui --store {quoted}")
    return 0
