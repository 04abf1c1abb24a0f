"""Where a command's store is: a light module, so commands that only read the store do not import the engine."""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.cli import DEFAULT_OUTPUT_DIR
from workbench.store.layout import resolve_store_path


def store_path(args: argparse.Namespace) -> Path:
    """``--store`` (or $NEL_STORE) when given, else ``nel.duckdb`` in the output directory."""
    if getattr(args, "store", None):
        return resolve_store_path(args.store)
    return Path(getattr(args, "output_dir", None) or DEFAULT_OUTPUT_DIR) / "nel.duckdb"
