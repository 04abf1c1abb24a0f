"""A run's identity: everything that changes answers, hashed.

Two invocations with the same identity are the same experiment, so ``--resume``
may continue one with the other; any difference is named field by field.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from typing import Any

import orjson


def identity_hash(identity: dict[str, Any]) -> str:
    return hashlib.sha256(orjson.dumps(identity, option=orjson.OPT_SORT_KEYS)).hexdigest()


def identity_diff(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Human-readable differences, e.g. ``temperature: 0.0 -> 0.7``."""
    diffs = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a != b:
            diffs.append(f"{key}: {a!r} -> {b!r}")
    return diffs


def new_run_id(benchmark: str) -> str:
    """A fresh, sortable, readable run id."""
    return f"{benchmark}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def shared_run_id(benchmark: str, ident_hash: str) -> str:
    """The id every shard of a sharded run computes on its own (no coordination needed)."""
    return f"{benchmark}-{ident_hash[:12]}"
