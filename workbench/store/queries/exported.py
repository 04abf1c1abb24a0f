"""An exported run directory read back: the bundle (``eval-*.json``) and the names of the files beside it.

``workbench.export`` writes these files; the readers (``load_run``, the evidence of a diagnosis, ``nel gate``)
live below it and find them here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from workbench.errors import UsageError

BUNDLE_FORMAT = "nel-eval-bundle"
BUNDLE_VERSION = 1
RESULTS = "results.jsonl"
TRAJECTORIES = "trajectories.jsonl"
MAX_LINE = 1 << 28  # a trajectory line holds a whole transcript


def bundle_path(path: Path) -> Path:
    """``path`` if it is a file, else the one ``eval-*.json`` in the directory ``path``.

    Raises:
        UsageError: no bundle there, or several.
    """
    if path.is_file():
        return path
    found = sorted(path.glob("eval-*.json"))
    if not found:
        raise UsageError(f"{path}: no eval-*.json here (write one with `nel eval export RUN -o {path}`)")
    if len(found) > 1:
        raise UsageError(f"{path}: {len(found)} eval-*.json files here; name one of them")
    return found[0]


def read_bundle(path: Path) -> dict[str, Any]:
    """An exported ``eval-*.json`` read back.

    Raises:
        UsageError: when the file cannot be read or is not a nel eval bundle.
    """
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise UsageError(f"{path}: cannot read an eval bundle ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict) or data.get("format") != BUNDLE_FORMAT:
        raise UsageError(f"{path}: not a nel eval bundle (no \"format\": \"{BUNDLE_FORMAT}\")")
    return data
