"""``nel config schema`` and ``nel config check``: the run specification for editors and for a dry check; ``nel
config show|set|unset``: the user defaults (``workbench.cli.user_defaults``)."""

from __future__ import annotations

import argparse
from pathlib import Path

import orjson


def cmd_config_schema(args: argparse.Namespace) -> int:
    """Print the JSON Schema of a config file (``RunSpec``): an editor given it completes and checks suite.yaml."""
    from workbench.spec.models import RunSpec

    schema = RunSpec.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "nel workbench run specification (suite.yaml)"
    print(orjson.dumps(schema, option=orjson.OPT_INDENT_2).decode())
    return 0


def cmd_config_check(args: argparse.Namespace) -> int:
    """Validate a config (with ``-O`` overrides) as `nel eval run` would, without running it; with ``--json``,
    print the resolved specification (no secret in it)."""
    from workbench.spec import load_config
    from workbench.spec.io import spec_json

    spec, _ = load_config(Path(args.config), args.override or ())
    if args.json:  # for workers elsewhere (a Kubernetes ConfigMap, another host): no key, no local path in it
        tree = orjson.loads(spec_json(spec))
        tree.pop("source", None)
        print(orjson.dumps(tree, option=orjson.OPT_INDENT_2).decode())
        return 0
    print(f"{args.config}: ok: {len(spec.services)} service(s), {len(spec.benchmarks)} benchmark(s)"
          + ("" if spec.runs_here else f", on SLURM in {spec.cluster.shards if spec.cluster else 1} shards"))
    return 0


def cmd_config_show(args: argparse.Namespace) -> int:
    """Every user default with its value (or that it is unset) and the file they live in."""
    from workbench.cli.user_defaults import KEYS, config_file, load_defaults

    values = load_defaults()
    if args.json:
        print(orjson.dumps({"file": str(config_file()), "values": values}, option=orjson.OPT_INDENT_2).decode())
        return 0
    print(f"# {config_file()}{'' if config_file().exists() else ' (not created yet: nel config set KEY VALUE)'}")
    for name, key in KEYS.items():
        value = values.get(name)
        shown = orjson.dumps(value).decode() if value is not None else "(unset)"
        print(f"{name:<11} = {shown:<40} # {key.flag}: {key.help}")
    return 0


def cmd_config_set(args: argparse.Namespace) -> int:
    """Store one user default; every command that takes its flag uses it when the flag is not given."""
    from workbench.cli.user_defaults import set_default

    path = set_default(args.key, args.value)
    print(f"{args.key} = {orjson.dumps(args.value).decode()}  ({path})")
    return 0


def cmd_config_unset(args: argparse.Namespace) -> int:
    """Remove one user default (saying so when it was not set)."""
    from workbench.cli.user_defaults import config_file, unset_default

    removed = unset_default(args.key)
    print(f"{args.key}: {'removed' if removed else 'was not set'} ({config_file()})")
    return 0
