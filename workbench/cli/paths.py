"""Where a command's store is: a light module, so commands that only read the store do not import the engine."""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.cli import DEFAULT_OUTPUT_DIR
from workbench.cli.user_defaults import load_defaults
from workbench.store.layout import resolve_store_path


def store_path(args: argparse.Namespace) -> Path:
    """``--store`` (or $NEL_STORE) when given, else ``nel.duckdb`` in ``--output-dir``; without either, the user's
    defaults (``nel config set store|output_dir``), else ``nel-results/nel.duckdb``."""
    if getattr(args, "store", None):
        return resolve_store_path(args.store)
    output_dir = getattr(args, "output_dir", None)
    if output_dir:
        return Path(output_dir) / "nel.duckdb"
    user = load_defaults()
    if "store" in user:
        return resolve_store_path(user["store"])
    return Path(user.get("output_dir") or DEFAULT_OUTPUT_DIR) / "nel.duckdb"
