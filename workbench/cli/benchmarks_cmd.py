"""``nel benchmarks pull NAME…|--all``: fetch hub benchmarks' data at their pinned revision and freeze it.

Like NeMo Gym's ``prepare_script``: once, where the hub is reachable; then runs (and ``nel list``) use the frozen
form offline. Progress goes to stderr; one line per benchmark on stdout says what was frozen.
"""

from __future__ import annotations

import argparse
import sys

from workbench.errors import RunFailed, UsageError


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _names(args: argparse.Namespace) -> list[str]:
    from workbench.environments.registry import UnknownBenchmark, benchmark_names, builtin_definition

    if args.all == bool(args.names):
        raise UsageError("nel benchmarks pull: name benchmarks or give --all (not both)")
    if args.all:
        return [n for n in benchmark_names() if (d := builtin_definition(n)) is not None and d.hub is not None]
    for name in args.names:
        definition = builtin_definition(name)
        if definition is None and name not in benchmark_names():
            raise UnknownBenchmark(name, benchmark_names())
        if definition is None or definition.hub is None:
            raise UsageError(f"nel benchmarks pull: {name!r} has no hub data to pull (its data ships with nel)")
    return list(args.names)


def cmd_benchmarks_pull(args: argparse.Namespace) -> int:
    from workbench.datasources import pull
    from workbench.environments.dataset import import_target
    from workbench.environments.registry import builtin_definition
    from workbench.extras import require

    names = _names(args)
    require("hub", "pull")
    for name in names:
        d = builtin_definition(name)
        assert d is not None and d.hub is not None
        ref = d.hub
        print(f"nel benchmarks pull: {name}: {ref.repo} ({ref.subset or 'default'}, {ref.split}) at {ref.revision} …",
              file=sys.stderr, flush=True)
        convert = None if d.convert is None else import_target(d.convert, f"benchmark {name!r}: [hub] convert")
        pulled = pull(name, ref, convert=convert, converter=d.converter_id, license=d.license)
        _pull_extras(name, d.convert)
        m = pulled.manifest
        print(f"{name}  revision {m.revision}  {m.rows} rows  {_size(m.size)}  sha256 {m.sha256}  "
              f"licence {m.license or '?'}  {'pulled' if pulled.fresh else 'up to date'}", flush=True)
    return 0


def _pull_extras(name: str, convert: str | None) -> None:
    """A converter module's ``pull_extras()`` (what its scoring needs besides the rows, e.g. nltk data)."""
    if convert is None:
        return
    import importlib

    extras = getattr(importlib.import_module(convert.partition(":")[0]), "pull_extras", None)
    if extras is None:
        return
    try:
        extras()
    except Exception as exc:  # whatever it fetches and however it fails: one line naming the benchmark
        raise RunFailed(f"benchmark {name!r}: fetching what its scoring needs failed: {type(exc).__name__}: "
                        f"{' '.join(str(exc).split())}") from None
