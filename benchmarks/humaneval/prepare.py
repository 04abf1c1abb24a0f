"""Write ``data.jsonl``: the 164 HumanEval problems, decompressed from the upstream file unchanged.

Run ``python benchmarks/humaneval/prepare.py [--source PATH]`` (no network). ``PATH`` defaults to
``shared/data/humaneval/HumanEval.jsonl.gz`` beside the repository. The output is the decompressed
file byte for byte, so anyone can check it against upstream: only the gzip wrapper is removed, because
CI runs on a clean clone where the shared data does not exist, and a diffable text file reviews better.

Before writing, the source's sha256 must match the one recorded in ``SOURCE.md`` and every row must be
a JSON object with the HumanEval fields; anything else is refused rather than shipped.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "data.jsonl"
DEFAULT_SOURCE = HERE.parents[2] / "shared" / "data" / "humaneval" / "HumanEval.jsonl.gz"
SOURCE_SHA256 = "b796127e635a67f93fb35c04f4cb03cf06f38c8072ee7cee8833d7bee06979ef"
N_PROBLEMS = 164
FIELDS = ("task_id", "prompt", "entry_point", "canonical_solution", "test")


def render(source: bytes) -> bytes:
    """The contents of ``data.jsonl`` for the gzip file ``source``; ``ValueError`` if it is not HumanEval."""
    digest = hashlib.sha256(source).hexdigest()
    if digest != SOURCE_SHA256:
        raise ValueError(f"source sha256 is {digest}, expected {SOURCE_SHA256} (see SOURCE.md)")
    data = gzip.decompress(source)
    rows = [json.loads(line) for line in data.splitlines() if line.strip()]
    if len(rows) != N_PROBLEMS:
        raise ValueError(f"source has {len(rows)} rows, expected {N_PROBLEMS}")
    for i, row in enumerate(rows):
        missing = [f for f in FIELDS if not isinstance(row.get(f), str)]
        if missing:
            raise ValueError(f"row {i + 1} has no text field {missing[0]!r}")
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="HumanEval.jsonl.gz (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        OUT.write_bytes(render(args.source.read_bytes()))
    except (OSError, ValueError) as exc:
        print(f"prepare.py: {args.source}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
