"""``nel sql``, ``nel list`` and ``nel model mock``."""

from __future__ import annotations

import argparse
import re
import sys
from typing import TYPE_CHECKING

import orjson

from workbench.errors import UsageError

if TYPE_CHECKING:
    import polars as pl

_CONTROLS = [chr(c) for c in (*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0))]
"""What a terminal acts on instead of showing: C0 controls but tab and newline (ESC opens ANSI colours and OSC
sequences: OSC 52 writes the clipboard, OSC 8 hides a link), DEL, and the C1 controls (0x9b is a one-byte CSI)."""
_UNSAFE = re.compile("[" + re.escape("".join(_CONTROLS)) + "]")


def shown(text: str) -> str:
    """``text`` with every control character a terminal would act on written as ``--format json`` writes it
    (ESC as ``\u001b``): a response or answer in the store is data, and must never drive the terminal."""
    return _UNSAFE.sub(lambda m: f"\\u{ord(m[0]):04x}", text)


def _escaped(frame: pl.DataFrame) -> pl.DataFrame:
    """String columns escaped before the table is laid out, so the columns stay aligned."""
    import polars as pl

    return frame.with_columns(pl.col(pl.String).str.replace_many(_CONTROLS, [shown(c) for c in _CONTROLS]))


def cmd_model_mock(args: argparse.Namespace) -> int:
    from workbench.mock.cli import run as run_mock

    return run_mock(args)


def _named_query(name: str) -> str:
    from workbench.resources import sql_path

    folder = sql_path("queries")
    path = folder / f"{name}.sql"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in folder.glob("*.sql")))
        raise UsageError(f"--named: no query {name!r}; named queries: {known}")
    return path.read_text()


def cmd_sql(args: argparse.Namespace) -> int:
    import duckdb
    import polars as pl

    from workbench.cli.paths import store_path
    from workbench.store import open_store

    if args.ide:
        return _sql_ide(args)
    if bool(args.query) == bool(args.named):
        raise UsageError("give either a SQL query or --named NAME")
    query = _named_query(args.named) if args.named else args.query
    store = open_store(store_path(args))
    try:
        frame = store.sql(query)
    except duckdb.Error as exc:
        raise UsageError(f"SQL error: {' '.join(str(exc).split())}") from None
    # every format is escaped as a whole: column names, and strings inside lists or structs, too
    if args.format == "csv":
        nested = [name for name, dtype in frame.schema.items() if dtype.is_nested()]
        if nested:
            raise UsageError(f"--format csv cannot hold nested columns ({', '.join(map(shown, nested))}); "
                             "use --format json")
        sys.stdout.write(shown(frame.write_csv()))
    elif args.format == "json":  # polars escapes C0 controls but not DEL or C1: the same JSON, escaped
        sys.stdout.write(shown(frame.write_json()) + "\n")
    else:
        with pl.Config(tbl_rows=-1, tbl_cols=-1, fmt_str_lengths=60, tbl_width_chars=200,
                       tbl_hide_dataframe_shape=True, tbl_formatting="ASCII_MARKDOWN",
                       tbl_hide_column_data_types=True, tbl_hide_dtype_separator=True):
            print(shown(str(_escaped(frame))))
        print(f"({frame.height} row{'s' if frame.height != 1 else ''})")
    return 0


def _sql_ide(args: argparse.Namespace) -> int:
    from workbench.cli.paths import store_path
    from workbench.extras import require

    if args.query or args.named:
        raise UsageError("--ide opens the IDE on the store: give no query (type it in the IDE's editor)")
    require("tui", "nel sql --ide")
    from workbench.store import open_store
    from workbench.tui.sql_ide import ide_app

    store = open_store(store_path(args))  # a missing or foreign store is one line here, not inside the IDE
    app = ide_app(store.path)
    app.run()
    return app.return_code or 0


def resolve_bench(bench: str, files: list[str] | None) -> str:
    """Load ``--benchmark-file`` files; a ``-b`` naming a .py file names the benchmark it defines; a
    ``gym://`` URL (a remote environment) is checked here, so a malformed one fails before anything starts."""
    from workbench.environments.registry import resolve_benchmark

    return resolve_benchmark(bench, files or ())


DOMAINS = ("math", "code", "knowledge", "safety", "agent")
"""The domains ``nel list --search`` knows by name (a benchmark's ``domain`` starts with one: agent → agentic)."""


def _matches(info: dict[str, object], needle: str) -> bool:
    """A domain name matches a benchmark's domain; other text, its name, description, domain or dataset."""
    domain = str(info.get("domain") or "").lower()
    if needle in DOMAINS:
        return domain.startswith(needle)
    return any(needle in str(info.get(k) or "").lower() for k in ("name", "description", "domain", "dataset"))


def _source(info: dict[str, object]) -> str:
    dataset = str(info.get("dataset") or "")
    if dataset.startswith("hf://"):
        repo = dataset[len("hf://"):].split("?", 1)[0]
        revision = info.get("revision")
        return f"hf://{repo}" + (f"@{str(revision)[:8]}" if revision else "")
    return "byob" if info.get("origin") == "byob" else "builtin"  # a BYOB file's own data, or shipped with nel


ORIGINS = ("builtin", "hf", "byob")
"""Where a listed benchmark comes from (``nel list --source``): shipped with nel with its data, shipped with nel
reading a Hugging Face dataset, or defined in a user's --benchmark-file."""
LMEVAL_HINT = ("lm-evaluation-harness tasks are not listed here: run any generate_until task as -b 'lm-eval://TASK' "
               "(the [lm-eval] extra; `lm_eval ls tasks` lists them)")


def _origin(info: dict[str, object], byob: set[str]) -> str:
    if info["name"] in byob:
        return "byob"
    return "hf" if str(info.get("dataset") or "").startswith("hf://") else "builtin"


def _from_source(info: dict[str, object], needle: str) -> bool:
    """``--source``: an origin by name (``ORIGINS``), else text the benchmark's source or dataset contains."""
    if needle in ORIGINS:
        return info["origin"] == needle
    return any(needle in str(info.get(k) or "").lower() for k in ("source", "dataset"))


def cmd_list(args: argparse.Namespace) -> int:
    from workbench.environments import benchmark_names
    from workbench.environments.registry import describe_benchmark

    builtin = set(benchmark_names())
    resolve_bench("", args.benchmark_file)
    byob = set(benchmark_names()) - builtin
    infos = [describe_benchmark(name) for name in benchmark_names()]
    for info in infos:
        info["origin"] = _origin(info, byob)
    if args.search:
        infos = [i for i in infos if _matches(i, args.search.lower())]
    source = (args.source or "").lower()
    if source:
        infos = [i for i in infos if _from_source(i, source)]
    if source in ("lm-eval", "lm_eval", "lmeval"):
        print(f"nel: {LMEVAL_HINT}", file=sys.stderr)
    if args.json:
        sys.stdout.write(orjson.dumps(infos, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    if not infos:
        wanted = " and ".join(f"{flag} {value!r}" for flag, value in (("--search", args.search),
                                                                      ("--source", args.source)) if value)
        print(f"no benchmark matches {wanted}")
        return 0
    header = ("NAME", "DOMAIN", "SIZE", "REPEATS", "SCORER", "SOURCE", "PRESENT")
    rows = [(str(i["name"]), str(i.get("domain") or ""), "?" if i.get("size") is None else str(i["size"]),
             str(i.get("default_repeats", 1)), str(i.get("scorer", "")), _source(i), str(i.get("present", "n/a")))
            for i in infos]
    widths = [max(len(r[c]) for r in (header, *rows)) for c in range(len(header))]
    for row in (header, *rows):
        print(shown("  ".join(cell.rjust(w) if c in (2, 3) else cell.ljust(w)
                              for c, (cell, w) in enumerate(zip(row, widths, strict=True))).rstrip()))
    return 0


def cmd_package(args: argparse.Namespace) -> int:
    """NeMo Evaluator's `nel package` builds an image per BYOB benchmark; nel needs none: one line saying so."""
    raise UsageError("nel package is not part of nel: a BYOB benchmark needs no image of its own. Build the nel "
                     "image once (deploy/build-image.sh) and run the file in it: nel eval run -b ./my_benchmark.py "
                     "(docs/deploy.md)")
