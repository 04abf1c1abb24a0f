"""Which files of a dataset repository hold a split: the repo card's ``configs:`` if it declares them, else the
layouts hub datasets use (``SUBSET/SPLIT-*.parquet``, ``data/SPLIT-*``, ``SPLIT.jsonl`` …), as ``datasets`` does.

Pure functions over a list of paths in the repo (and the card's text), so the same choice is made online (the
hub's listing) and offline (a cached snapshot).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from typing import Any

from workbench.datasources.rows import FORMATS
from workbench.datasources.uri import HubRef
from workbench.errors import UsageError

_FRONT_MATTER = re.compile(r"\A---\s*\n(.*?)\n---\s*(\n|\Z)", re.DOTALL)


def is_data_file(path: str) -> bool:
    return path.lower().endswith(FORMATS) and not path.rsplit("/", 1)[-1].startswith(".")


def card_configs(readme: str) -> list[dict[str, Any]]:
    """The ``configs:`` of a dataset card's YAML front matter (``[]`` when it declares none)."""
    match = _FRONT_MATTER.match(readme)
    if match is None:
        return []
    import yaml

    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError:
        return []
    configs = meta.get("configs") if isinstance(meta, dict) else None
    return [c for c in configs if isinstance(c, dict)] if isinstance(configs, list) else []


def _split_patterns(config: dict[str, Any]) -> dict[str, list[str]]:
    """split → path globs, from a config's ``data_files`` (a string, a list, or a list of {split, path})."""
    data_files = config.get("data_files")
    if isinstance(data_files, str):
        return {"train": [data_files]}
    out: dict[str, list[str]] = {}
    for item in data_files if isinstance(data_files, list) else []:
        if isinstance(item, str):
            out.setdefault("train", []).append(item)
        elif isinstance(item, dict) and "split" in item:
            paths = item.get("path", [])
            out.setdefault(str(item["split"]), []).extend([paths] if isinstance(paths, str) else list(paths))
    return out


def _matching(files: Sequence[str], patterns: Sequence[str]) -> list[str]:
    return sorted(f for f in files if is_data_file(f) and any(fnmatch.fnmatchcase(f, p) for p in patterns))


def _from_card(ref: HubRef, files: Sequence[str], configs: list[dict[str, Any]]) -> list[str] | None:
    if not configs:
        return None
    wanted = ref.subset
    if wanted is None:
        defaults = [c for c in configs if c.get("default") or c.get("config_name") == "default"]
        chosen = defaults[0] if defaults else configs[0] if len(configs) == 1 else None
        if chosen is None:
            names = ", ".join(str(c.get("config_name")) for c in configs)
            raise UsageError(f"dataset {ref.uri()}: the repo has several subsets ({names}); name one with "
                             "subset=NAME")
    else:
        found = [c for c in configs if c.get("config_name") == wanted]
        if not found:
            names = ", ".join(str(c.get("config_name")) for c in configs)
            raise UsageError(f"dataset {ref.uri()}: no subset {wanted!r}; the repo's subsets: {names}")
        chosen = found[0]
    splits = _split_patterns(chosen)
    if ref.split not in splits:
        raise UsageError(f"dataset {ref.uri()}: no split {ref.split!r} in subset "
                         f"{chosen.get('config_name')!r}; its splits: {', '.join(sorted(splits)) or 'none'}")
    return _matching(files, splits[ref.split])


def _conventional(ref: HubRef, files: Sequence[str]) -> list[str]:
    s = ref.split
    base = f"{ref.path.rstrip('/')}/" if ref.path else ""
    if ref.path and ref.path in files:
        return [ref.path]
    roots = [f"{base}{ref.subset}/"] if ref.subset else []
    roots += [base, f"{base}data/"]
    for root in roots:
        for pattern in (f"{s}.*", f"{s}-*", f"{s}_*", f"{s}/*", f"*-{s}.*", f"*_{s}.*", f"*-{s}-*"):
            nested = pattern == f"{s}/*"  # the hub's parquet layout: SUBSET/SPLIT/0000.parquet
            found = [f for f in _matching(files, [root + pattern]) if f[len(root):].count("/") == int(nested)]
            if found:
                return found
    if ref.path:  # a folder named explicitly: every data file in it
        return _matching(files, [base + "*"])
    return []


def split_files(ref: HubRef, files: Sequence[str], readme: str | None) -> list[str]:
    """The repo files that hold ``ref``'s split, sorted; none is one line listing the data files seen."""
    if ref.files:
        chosen = _matching(files, ref.files)
        if not chosen:
            raise _none_found(ref, files, f"no file matches {', '.join(ref.files)}")
        return chosen
    from_card = None if ref.path else _from_card(ref, files, card_configs(readme or ""))
    chosen = from_card if from_card is not None else _conventional(ref, files)
    if not chosen:
        raise _none_found(ref, files, f"no file holds split {ref.split!r}")
    return chosen


def _none_found(ref: HubRef, files: Sequence[str], why: str) -> UsageError:
    data = [f for f in files if is_data_file(f)]
    seen = ", ".join(data[:12]) + (f", … ({len(data) - 12} more)" if len(data) > 12 else "") if data else "none"
    return UsageError(f"dataset {ref.uri()}: {why}; data files in the repo: {seen}")
