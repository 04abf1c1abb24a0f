"""Reading a YAML config with the line of every key, expanding ``${ENV}``, applying ``-O``.

The result is a plain tree (dicts, lists, scalars) plus a map from dot-path
(``benchmarks.0.repeats``) to where it came from (``config.yaml:12`` or ``-O``),
so every later error can name the file, line and dot-path of the offending key.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from workbench.errors import UsageError

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


@dataclass(slots=True)
class Located:
    """A config tree and where each of its dot-paths was written."""

    tree: dict[str, Any]
    file: Path
    lines: dict[str, int] = field(default_factory=dict)
    overridden: set[str] = field(default_factory=set)

    def where(self, path: str) -> str:
        """``file:line: path`` for the nearest located ancestor of ``path``."""
        probe = path
        while True:
            if probe in self.overridden:
                return f"-O {probe}"
            if probe in self.lines:
                return f"{self.file}:{self.lines[probe]}: {path}"
            if "." not in probe:
                return f"{self.file}: {path}"
            probe = probe.rsplit(".", 1)[0]

    def error(self, path: str, message: str) -> UsageError:
        return UsageError(f"{self.where(path)}: {message}")


def _join(prefix: str, key: str | int) -> str:
    return f"{prefix}.{key}" if prefix else str(key)


def _convert(loader: yaml.SafeLoader, node: yaml.Node, path: str, out: Located) -> Any:
    out.lines.setdefault(path, node.start_mark.line + 1)  # a key keeps its own line
    if isinstance(node, yaml.MappingNode):
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            child = _join(path, str(key))
            if not isinstance(key, str):
                raise UsageError(f"{out.file}:{key_node.start_mark.line + 1}: {child}: keys must be strings")
            if key in result:
                raise UsageError(f"{out.file}:{key_node.start_mark.line + 1}: {child}: duplicate key")
            out.lines[child] = key_node.start_mark.line + 1
            result[key] = _convert(loader, value_node, child, out)
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_convert(loader, item, _join(path, i), out) for i, item in enumerate(node.value)]
    value = loader.construct_object(node, deep=True)
    if isinstance(value, str):
        value = _expand_env(value, lambda msg: UsageError(f"{out.file}:{out.lines[path]}: {path}: {msg}"))
    return value


def _expand_env(text: str, error: Any, env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env

    def substitute(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        raise error(f"environment variable {name} is not set (write ${{{name}:-default}} for a default)")

    return _ENV.sub(substitute, text)


def load_config_tree(path: Path) -> Located:
    """Parse ``path`` into a located tree; YAML errors name the file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: cannot read config: {exc.strerror}") from None
    loader = yaml.SafeLoader(text)
    located = Located(tree={}, file=path)
    try:
        node = loader.get_single_node()
        if node is None:
            raise UsageError(f"{path}: the config is empty")
        if not isinstance(node, yaml.MappingNode):
            raise UsageError(f"{path}:{node.start_mark.line + 1}: the config must be a mapping of sections")
        located.tree = _convert(loader, node, "", located)
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else 0
        raise UsageError(f"{path}:{line}: invalid YAML: {exc.problem}") from None
    finally:
        loader.dispose()
    located.lines.pop("", None)
    return located


def apply_overrides(located: Located, overrides: Sequence[str]) -> None:
    """Apply ``-O dot.path=value`` overrides (values are parsed as YAML scalars or lists)."""
    for item in overrides:
        if "=" not in item:
            raise UsageError(f"-O {item}: expected dot.path=value")
        path, raw = item.split("=", 1)
        parts = path.split(".")
        if not path or any(not p for p in parts):
            raise UsageError(f"-O {item}: expected dot.path=value")
        try:
            value = yaml.safe_load(raw) if raw else ""
        except yaml.YAMLError:
            value = raw
        if isinstance(value, str):
            value = _expand_env(value, lambda msg, p=path: UsageError(f"-O {p}: {msg}"))
        node: Any = located.tree
        for depth, part in enumerate(parts[:-1]):
            node = _step(node, part, ".".join(parts[: depth + 1]), create=True)
        last = parts[-1]
        if isinstance(node, list):
            index = _index(node, last, path)
            node[index] = value
        elif isinstance(node, dict):
            node[last] = value
        else:
            raise UsageError(f"-O {path}: {'.'.join(parts[:-1])} is not a mapping or a list")
        located.overridden.add(path)


def _index(node: list[Any], part: str, path: str) -> int:
    if not part.isdigit() or int(part) >= len(node):
        raise UsageError(f"-O {path}: {part!r} is not an index of a list of {len(node)}")
    return int(part)


def _step(node: Any, part: str, path: str, create: bool) -> Any:
    if isinstance(node, list):
        return node[_index(node, part, path)]
    if isinstance(node, dict):
        if part not in node and create:
            node[part] = {}
        return node[part]
    raise UsageError(f"-O {path}: cannot descend into a {type(node).__name__}")
