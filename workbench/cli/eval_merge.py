"""``nel eval merge``: ingest shards, then answer for each run (``workbench.export.settle``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.cli.eval_run import read_summary
from workbench.errors import UsageError
from workbench.export.settle import settle
from workbench.spec.models import ExportConfig
from workbench.store import ingest, resolve_store_path
from workbench.store.completeness import RunCompleteness


def cmd_eval_merge(args: argparse.Namespace) -> int:
    """Ingest shards, then answer for the runs (``workbench.export.settle``): an incomplete one is named
    with its missing shards, exit 1, every time the merge is run; a finished one is exported if its export
    is missing or stale."""
    targets, export_config = _exports(args)  # a wrong target or spec: one line before anything is merged
    sources = [resolve_store_path(d) for d in args.dirs]
    for src in sources:
        if not src.exists() and not src.with_name(src.name + ".segments").exists():
            raise UsageError(f"{src}: nothing to merge here (no store and no shard segments)")
    target = resolve_store_path(args.store) if args.store else sources[0]
    report = ingest(target, sources=sources, bulk=True)
    print(f"merged into {target}: {report.steps_added} new steps from {report.shards_ingested} finished shards")
    runs = settle(target, report.runs, runs=args.run, targets=targets, export_config=export_config)
    if args.run:
        unknown = sorted(set(args.run) - {r.run.run_id for r in runs})
        if unknown:
            raise UsageError(f"--run: no run {', '.join(unknown)} in {target}")
    if args.repeats is not None:
        _check_repeats(target, [r.run.run_id for r in runs], args.repeats)
    for settled in runs:
        if settled.settled:
            continue
        run = settled.run
        print(f"  run {run.run_id}: {run.status}{_shard_note(run)}")
        summary = read_summary(target, run.run_id)
        est = summary.pass_at_k.get(1)
        if est is not None:
            print(f"    pass@1 {est.value:.4f}  95% CI [{est.low:.4f}, {est.high:.4f}]  "
                  f"({summary.n_steps}/{summary.n_steps_expected} steps)")
        if settled.export is not None:
            print(f"    export {settled.export}")
        for line in settled.exported:
            print(f"    {line}")
    return 1 if any(r.incomplete for r in runs) else 0


def _exports(args: argparse.Namespace) -> tuple[list[str], ExportConfig | None]:
    """``--to`` and the spec's ``output.export`` (once each, the spec's first), with the spec's options; every
    target's extra is checked now, before the merge writes anything."""
    from workbench.export.targets import TARGETS, parse_targets
    from workbench.extras import require

    targets: list[str] = []
    config: ExportConfig | None = None
    if args.spec:
        from workbench.spec.io import read_spec

        output = read_spec(args.spec).output
        targets, config = [str(t) for t in output.export], output.export_config
    targets += [t for t in parse_targets(args.to) if t not in targets]
    for name in targets:
        require(TARGETS[name].extra, f"export to {name}")
    return targets, config


def _check_repeats(store: Path, run_ids: list[str], repeats: int) -> None:
    """``-n N``: every run the merge answers for was planned with N repeats per problem; one that was not is
    named (exit 2): its pass@k would not be the pass@k a pipeline expecting N reads."""
    if not run_ids:
        return
    from workbench.store import open_store

    marks = ", ".join("?" for _ in run_ids)
    rows = open_store(store).dicts(f"SELECT run_id, n_repeats FROM runs WHERE run_id IN ({marks}) ORDER BY run_id",
                                   run_ids)
    wrong = [f"run {r['run_id']} has {r['n_repeats']}" for r in rows if r["n_repeats"] != repeats]
    if wrong:
        raise UsageError(f"--repeats {repeats}: {'; '.join(wrong)} repeats per problem")


def _shard_note(run: RunCompleteness) -> str:
    notes = []
    if run.missing_shards:
        notes.append(f"missing shards: {', '.join(map(str, run.missing_shards))} (of {run.total_shards}; run them, "
                     "then merge again)")
    for status in ("failed", "interrupted", "running"):
        shards = [i for i, st in sorted(run.unfinished_shards.items()) if st == status]
        if shards:
            notes.append(f"{status} shards: {', '.join(map(str, shards))}")
    return "; " + "; ".join(notes) if notes else ""
