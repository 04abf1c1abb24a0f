"""``nel eval export`` and ``nel eval report``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from workbench.cli.paths import store_path
from workbench.errors import UsageError
from workbench.export.artifacts import build_eval_bundle, export_run, write_text
from workbench.export.report import EXTENSIONS, FORMATS, render_report
from workbench.export.settle import export_dir
from workbench.export.targets import export_targets, parse_targets
from workbench.store import open_store, segments_root
from workbench.store.queries.exported import read_bundle


def cmd_eval_export(args: argparse.Namespace) -> int:
    """nel's artifacts into ``-o DIR``; with ``--to``, the run to each named target instead (into ``-o DIR``,
    default the run's directory beside the store)."""
    if args.to:
        names = parse_targets(args.to)
        store = store_path(args)
        out = Path(args.output) if args.output else export_dir(Path(store), args.run_id)
        for line in export_targets(store, args.run_id, out, names):
            print(line)
        return 0
    if not args.output:
        raise UsageError("nel eval export: -o DIR is needed (or --to inspect|mlflow|wandb)")
    result = export_run(store_path(args), args.run_id, Path(args.output))
    print(f"exported run {args.run_id}: {result.n_results:,} steps")
    for path in result.paths:
        print(f"  {path}")
    return 0


def cmd_eval_report(args: argparse.Namespace) -> int:
    out = Path(args.output) if args.output else None
    if args.all_formats and out is None:
        raise UsageError("--all-formats needs -o DIR (the directory to write report.md, report.html, ... into)")
    if args.all_formats and out is not None and out.exists() and not out.is_dir():
        raise UsageError(f"{out}: is a file; --all-formats writes several files into a directory")
    bundle = load_bundle(args)
    if args.all_formats:
        assert out is not None
        out.mkdir(parents=True, exist_ok=True)
        for fmt in FORMATS:
            path = write_text(out / f"report.{EXTENSIONS[fmt]}", render_report(bundle, fmt))
            print(f"  {fmt:<9} {path}")
        return 0
    text = render_report(bundle, args.format)
    if out is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return 0
    if out.is_dir():
        out = out / f"report.{EXTENSIONS[args.format]}"
    out.parent.mkdir(parents=True, exist_ok=True)
    print(f"  {args.format:<9} {write_text(out, text)}")
    return 0


def load_bundle(args: argparse.Namespace) -> dict[str, Any]:
    """The eval bundle named by RUN_OR_DIR: an exported directory (or its eval-*.json file), else a run
    id in the store. A directory needs no store."""
    source = Path(args.source)
    if source.is_dir():
        found = sorted(source.glob("eval-*.json"))
        if not found:
            raise UsageError(f"{source}: no eval-*.json here (write one with `nel eval export RUN -o {source}`)")
        if len(found) > 1:
            raise UsageError(f"{source}: {len(found)} eval-*.json files here; name one of them")
        return read_bundle(found[0])
    if source.is_file():
        return read_bundle(source)
    store = store_path(args)
    if not store.exists() and not segments_root(store).is_dir():
        raise UsageError(f"{args.source}: no such directory, and no store at {store} to look up a run in")
    return build_eval_bundle(open_store(store), args.source)
