"""Persistent user defaults (``nel config show|set|unset``): the model, the store and the output directory a user
types on every command, kept once in ``$XDG_CONFIG_HOME/nel/config.toml`` (``~/.config/nel/config.toml``).

They fill only what the command line leaves out: a flag wins, and so does a config file's own value. Secrets never
go in the file (it is plain text in a home directory): keys that name one are refused, and so is a URL carrying
credentials; an API key stays in $NEMO_API_KEY / $OPENAI_API_KEY.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from workbench.errors import UsageError
from workbench.secrets import url_has_credentials


def _url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"expected an http(s) URL such as http://localhost:8000/v1, got {value!r}")
    if url_has_credentials(value):
        raise ValueError("the URL carries credentials; secrets never go in the config file (use $NEMO_API_KEY)")
    return value


def _text(value: str) -> str:
    if not value.strip():
        raise ValueError("expected a non-empty value")
    return value


@dataclass(frozen=True, slots=True)
class Key:
    """One user default: the flag it stands in for and how its value is checked."""

    name: str
    flag: str
    help: str
    check: Callable[[str], str]


KEYS: dict[str, Key] = {k.name: k for k in (
    Key("model_url", "--model-url", "OpenAI-compatible base URL of the model", _url),
    Key("model_id", "--model-id", "model name sent in each request", _text),
    Key("store", "--store", "store file every command reads and writes", _text),
    Key("output_dir", "--output-dir", "where runs and artifacts go", _text),
)}
"""The keys ``nel config set`` knows, by name."""

_SECRET = re.compile(r"key|token|secret|password|passwd|credential|auth", re.I)


def config_file() -> Path:
    """``$XDG_CONFIG_HOME/nel/config.toml``, or ``~/.config/nel/config.toml`` without it (the XDG default)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "nel" / "config.toml"


def check_key(name: str) -> Key:
    """The key ``name`` stands for; a secret-looking or unknown one is one line naming the known keys."""
    if name in KEYS:
        return KEYS[name]
    if _SECRET.search(name):
        raise UsageError(f"{name!r} looks like a secret, and nel never writes secrets to the config file "
                         f"{config_file()}; keep an API key in $NEMO_API_KEY or $OPENAI_API_KEY")
    raise UsageError(f"{name}: unknown key; known keys: {', '.join(KEYS)}")


def load_defaults(path: Path | None = None) -> dict[str, str]:
    """The user defaults in ``path`` (default: ``config_file()``); none when it does not exist. A file that is not
    TOML, holds an unknown key or a bad value is one line naming the file (exit 2)."""
    path = path or config_file()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read the nel config file: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML ({exc}); fix it or remove it (nel config unset KEY)") from None
    values: dict[str, str] = {}
    for name, value in data.items():
        if name not in KEYS:
            raise UsageError(f"{path}: {name}: unknown key; known keys: {', '.join(KEYS)}")
        if not isinstance(value, str):
            raise UsageError(f"{path}: {name}: expected a string, got {type(value).__name__}")
        try:
            values[name] = KEYS[name].check(value)
        except ValueError as exc:
            raise UsageError(f"{path}: {name}: {exc}") from None
    return values


def save_defaults(values: Mapping[str, str], path: Path | None = None) -> Path:
    """Write ``values`` as TOML (one ``key = "value"`` a line, in ``KEYS``' order), atomically."""
    path = path or config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# nel user defaults: `nel config show|set|unset`; flags and config files override them"]
    lines += [f"{name} = {json.dumps(values[name])}" for name in KEYS if name in values]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def set_default(name: str, value: str) -> Path:
    """Check and store one default; the file's other values are kept."""
    key = check_key(name)
    try:
        checked = key.check(value)
    except ValueError as exc:
        raise UsageError(f"{name}: {exc}") from None
    values = load_defaults()
    values[name] = checked
    return save_defaults(values)


def unset_default(name: str) -> bool:
    """Remove one default; whether it was set."""
    check_key(name)
    values = load_defaults()
    if name not in values:
        return False
    del values[name]
    save_defaults(values)
    return True


def default(name: str) -> str | None:
    """The user's default for ``name`` (a key of ``KEYS``), if set."""
    return load_defaults().get(name)


def fill_run_args(args: argparse.Namespace) -> None:
    """``nel eval run``'s arguments with the user defaults put where the command line left a gap: the flags of a
    one-benchmark run, or a config file's ``output`` when the file does not set it (as ``-O`` overrides, so the
    config's own values win). A JSON ``--spec`` is a whole run already: nothing is added."""
    values = load_defaults()
    if not values or getattr(args, "spec", None):
        return
    if args.config:
        output = _config_output(Path(args.config))
        if output is None:
            return
        extra = [f"output.{field}={values[name]}" for name, field in (("output_dir", "dir"), ("store", "store"))
                 if name in values and field not in output and not (field == "store" and "dir" in output)]
        args.override = [*extra, *(args.override or ())]
        return
    output_flag = getattr(args, "output_dir", None)
    if "store" in values and getattr(args, "store", None) is None and output_flag is None:
        args.store = values["store"]  # -o DIR means the store in DIR, as without defaults
    for name in ("model_url", "model_id", "output_dir"):
        if name in values and getattr(args, name, None) is None:
            setattr(args, name, values[name])


def _config_output(path: Path) -> dict[str, object] | None:
    """The ``output`` mapping a config file sets (empty when none); ``None`` when the file cannot be read as a
    mapping: loading it later says why, in its own words."""
    import yaml

    try:
        tree = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    if not isinstance(tree, dict):
        return None
    output = tree.get("output")
    return dict(output) if isinstance(output, dict) else {}
