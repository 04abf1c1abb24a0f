"""``nel config schema`` and ``nel config check``: the run specification for editors and for a dry check."""

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
