"""A harness's sampling settings as a run's identity, in nel's own names.

A native run's identity names its sampling parameters ``temperature``, ``top_p``, ``max_tokens``, ``seed``,
``stop``... (``ModelConfig.identity``), and the exporters (MLflow/W&B parameters, inspect's ``GenerateConfig``) read
them from there: an import writes the harness's settings under the same names, so an exported import carries them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from workbench.gym.importer import scrub

OTHER = "generate_other"
"""The identity key of the harness's settings that change answers but have no nel name (``top_k``, ``do_sample``)."""


def sampling_identity(settings: Any, names: Mapping[str, str], *, lists: Collection[str] = (),
                      ignore: Collection[str] = ()) -> dict[str, Any]:
    """``settings`` (credentials scrubbed) as identity fields: those in ``names`` under nel's name (a string where
    a field in ``lists`` holds a list: a stop sequence), the rest but ``ignore`` under ``generate_other``; unset
    ones left out, so a setting the harness did not record changes nothing."""
    out: dict[str, Any] = {}
    other: dict[str, Any] = {}
    for key, value in sorted(scrub(dict(settings) if isinstance(settings, Mapping) else {}).items()):
        if value is None or key in ignore:
            continue
        if key in names:
            out[names[key]] = [value] if key in lists and isinstance(value, str) else value
        else:
            other[key] = value
    return {**out, **({OTHER: other} if other else {})}
