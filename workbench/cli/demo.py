"""``nel demo``: GSM8K against the built-in mock model, end to end, on defaults."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from workbench.cli.eval_run import run_here
from workbench.spec import MAIN, validate


def _nel_command() -> str:
    """How the user can type ``nel`` again: bare if it is on PATH, else the path they used."""
    invoked = Path(sys.argv[0])
    on_path = shutil.which("nel")
    if invoked.name != "nel" or (on_path and Path(on_path).resolve() == invoked.resolve()):
        return "nel"
    return str(invoked)


def cmd_demo(args: argparse.Namespace) -> int:
    from workbench.mock import mock_model

    output = Path(args.output_dir)
    store = output / "nel.duckdb"
    if store.exists() or store.with_name(store.name + ".segments").exists():
        shutil.rmtree(output / "runs", ignore_errors=True)
        store.unlink(missing_ok=True)
        shutil.rmtree(store.with_name(store.name + ".segments"), ignore_errors=True)
    print("nel demo: starting the built-in mock model (a labelled test model, not a real LLM)", file=sys.stderr)
    with mock_model() as mock:
        print(f"nel demo: mock model at {mock.base_url}", file=sys.stderr)
        spec = validate({"services": {MAIN: {"url": mock.base_url, "model": "nel-mock"}},
                         "benchmarks": [{"name": "gsm8k", "repeats": args.repeats, "max_problems": args.problems}],
                         "output": {"dir": str(output), "store": str(store)}})
        code = run_here(spec, show_progress=not args.no_progress)
    print("nel demo: mock model stopped", file=sys.stderr)
    nel = _nel_command()
    print(
        "\nNext things to try:\n"
        f"  {nel} sql --store {store} \"SELECT * FROM run_metrics\"\n"
        f"  {nel} sql --store {store} --named sometimes_pass\n"
        f"  {nel} sql --store {store} \"SELECT failure_category, count(*) FROM steps GROUP BY ALL\"\n"
        f"  duckdb {store}    # the store is a plain DuckDB file\n"
        f"  {nel} model mock --port 8000 &   then   {nel} eval run -b gsm8k "
        "--model-url http://127.0.0.1:8000/v1 --model-id nel-mock --repeats 4 --max-problems 100"
    )
    return code
