"""``nel diagnose``: thin; ``workbench.analysis.diagnosis`` computes, rules and renders, this module loads the
sides (as ``nel compare`` does), picks their evidence sources and writes the report.

Exit codes: 0 when the report was written; 2 for a usage error (an unknown run, a directory without an
export, an unknown ``--slice`` column, a metric the candidate lacks), said in one line.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from workbench.analysis.sources import RunData
from workbench.cli.compare_cmd import load_side
from workbench.cli.paths import store_path

if TYPE_CHECKING:
    from workbench.analysis.diagnosis.evidence import EvidenceSource

STORE_PREFIX = "store:"


def cmd_diagnose(args: argparse.Namespace) -> int:
    from workbench.analysis.diagnosis.api import diagnose  # polars-heavy: imported when the command runs
    from workbench.analysis.diagnosis.report import diagnosis_json, render_markdown

    store = store_path(args)
    baseline = load_side(args.baseline, store, args.metric)
    candidate = load_side(args.candidate, store, baseline.metric) if args.candidate else None
    diagnosis = diagnose(
        baseline, candidate, evidence_baseline=_evidence(baseline), slices=args.slices, top=args.top,
        evidence_candidate=_evidence(candidate) if candidate is not None else None,
    )
    command = rerun_command(args, baseline, candidate, store)
    if args.format == "json":
        data = orjson.dumps(diagnosis_json(diagnosis, command=command), option=orjson.OPT_INDENT_2) + b"\n"
    else:
        data = render_markdown(diagnosis, command=command).encode()
    if not args.output:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return 0
    from workbench.export.artifacts import atomic_open  # a reader never sees half a report

    out = Path(args.output)
    if out.is_dir() or args.output.endswith(("/", os.sep)):
        out = out / ("diagnosis.json" if args.format == "json" else "diagnosis.md")
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(out) as fh:
        fh.write(data)
    print(f"wrote {out}")
    return 0


def _evidence(run: RunData) -> EvidenceSource:
    """The attempt texts of ``run``, read from where its numbers came from (the same store or export)."""
    from workbench.analysis.diagnosis.evidence import evidence_for

    if run.source.startswith(STORE_PREFIX):
        store_file = run.source.removeprefix(STORE_PREFIX).removesuffix(f"#{run.run_id}")
        return evidence_for(run.run_id, Path(store_file), metric=run.metric)
    return evidence_for(run.source, None, metric=run.metric)


def rerun_command(args: argparse.Namespace, baseline: RunData, candidate: RunData | None, store: Path) -> str:
    """The ``nel diagnose`` line that rebuilds this report: the inputs as given, the metric that was used."""
    argv = ["nel", "diagnose", args.baseline, *([args.candidate] if args.candidate else []),
            "--metric", baseline.metric]
    for column in args.slices or ():
        argv += ["--slice", column]
    argv += ["--top", str(args.top)]
    if args.format != "markdown":
        argv += ["--format", args.format]
    if args.output:
        argv += ["-o", args.output]
    if any(r.source.startswith(STORE_PREFIX) for r in (baseline, candidate) if r is not None):
        argv += ["--store", str(store)]
    return shlex.join(argv)
