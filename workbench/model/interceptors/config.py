"""Checks for an interceptor's ``config`` mapping: each raises ``ValueError("KEY: why")``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def only_keys(config: Mapping[str, Any], known: Sequence[str], required: Sequence[str] = ()) -> None:
    for key in config:
        if key not in known:
            raise ValueError(f"{key}: unknown key; this interceptor takes {', '.join(known)}")
    for key in required:
        if key not in config:
            raise ValueError(f"{key}: missing required key")


def positive_int(config: Mapping[str, Any], key: str) -> int:
    value = config[key]
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{key}: expected a whole number of at least 1, got {value!r}")
    return value


def text(config: Mapping[str, Any], key: str) -> str | None:
    value = config.get(key)
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ValueError(f"{key}: expected a non-empty string, got {value!r}")
    return value


def flag(config: Mapping[str, Any], key: str, default: bool) -> bool:
    value = config.get(key, default)
    if not isinstance(value, bool):
        raise ValueError(f"{key}: expected true or false, got {value!r}")
    return value
