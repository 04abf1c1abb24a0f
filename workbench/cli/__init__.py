"""The ``nel`` command: parses arguments and delegates.

Command modules are imported only when their command runs, so ``nel --help``
stays fast. Errors the user can act on (``NelError``) print one line and exit
with their code: 2 for usage and configuration, 1 for a run that failed.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

# httpx imports its own command-line client (click, rich, pygments: 30-60 ms) whenever those are installed; nel
# never runs it, so that import is made to fail fast (httpx then defines a stub that explains itself).
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
# numpy's OpenBLAS starts a thread per core on import (60 ms before a small run does anything); nel's statistics
# are vector sums that one thread does as fast (bench_compare, bench_diagnose: no change). A user's setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

DEFAULT_OUTPUT_DIR = "nel-results"


def _handler(module: str, func: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        import importlib

        return int(getattr(importlib.import_module(f"workbench.cli.{module}"), func)(args))

    return run


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _benchmark_file_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--benchmark-file", action="append", metavar="FILE.py",
                   help="load @benchmark definitions from a Python file (repeatable)")


def _store_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--store",
        default=os.environ.get("NEL_STORE"),
        help=f"store file (default: $NEL_STORE or {DEFAULT_OUTPUT_DIR}/nel.duckdb)",
    )


def _add_eval_run(sub: argparse._SubParsersAction) -> None:
    from workbench.spec.flags import add_spec_flags

    p = sub.add_parser(
        "run",
        help="evaluate a model on a benchmark (flags) or a suite (a YAML config), every step into the store",
        description="Either name one benchmark and model with flags, or give a YAML config in NeMo Evaluator's "
        "schema (services, benchmarks, output) and adjust it with -O dot.path=value. Both describe the same run "
        "specification (`nel config schema` prints it).",
    )
    p.add_argument("config", nargs="?", help="YAML config file (instead of -b/--model-url/--model-id)")
    p.add_argument("-O", "--override", action="append", metavar="DOT.PATH=VALUE",
                   help="override a config value, e.g. -O benchmarks.0.repeats=8 (repeatable)")
    add_spec_flags(p, store_default=os.environ.get("NEL_STORE"))
    p.add_argument("--adapter", metavar="URI",
                   help="the benchmark as an adapter URI (gym://HOST:PORT, lm-eval://TASK): the same as -b URI")
    e = p.add_argument_group("execution")
    e.add_argument("--spec", metavar="FILE.json|env",
                   help="run a JSON run specification (what workers are given; `env`: the one in $NEL_RUN_SPEC) "
                        "instead of a config file or the flags")
    e.add_argument(
        "--resume",
        action="store_true",
        help="continue the latest run of this benchmark in the store (refused, naming each field, "
        "if its configuration differs)",
    )
    e.add_argument("--retry-errors", action="store_true",
                   help="with --resume: attempt again the steps that ended in a transport or server failure "
                        "(429, 5xx, timeouts, dropped connections); the earlier attempts are kept in superseded_steps")
    e.add_argument("--no-progress", action="store_true", help="no live progress bar")
    e.add_argument("--no-cache", action="store_true",
                   help="a service's cache interceptor neither answers from nor adds to its cache this run "
                        "(the same as NEL_NO_CACHE=1)")
    w = p.add_argument_group("workers")
    w.add_argument("--shards", type=_positive_int, metavar="N",
                   help="split the problems over N shard workers (processes, or Ray tasks with --engine ray)")
    w.add_argument("--background", action="store_true",
                   help="start the shard workers in the background and return at once (see nel eval status/stop/"
                        "resume); they outlive the terminal and the run is merged when every shard has finished")
    w.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="where the shards run: local processes (default) or Ray tasks")
    w.add_argument("--ray-address", metavar="ADDRESS",
                   help="Ray cluster to join (e.g. auto, ray://HOST:10001; default: a local cluster)")
    p.set_defaults(func=_handler("eval_run", "cmd_eval_run"))


def _add_eval_merge(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("merge", help="merge shard outputs into the store and recompute metrics")
    p.add_argument("dirs", nargs="+", metavar="DIR", help="output dirs or store files holding shard segments")
    p.add_argument("--store", help="store to merge into (default: the first DIR's)")
    p.add_argument("-n", "--repeats", type=_positive_int, metavar="N",
                   help="the repeats every merged run must have (default: each run's own): one with other "
                        "repeats is named and the merge exits 2")
    p.add_argument("--run", action="append", metavar="RUN",
                   help="answer for this run only (repeatable; default: every run merged now and every sharded run "
                        "of the store): its missing shards and its export")
    p.add_argument("--to", action="append", metavar="TARGET", default=[],
                   help="also export each run the merge completes to inspect, mlflow and/or wandb (repeatable or "
                        "a comma list), as `nel eval export --to` does")
    p.add_argument("--spec", metavar="FILE.json",
                   help="the run specification the shards ran: its output.export and output.export_config apply "
                        "to the runs the merge completes (what a sharded launch's own merge passes)")
    p.set_defaults(func=_handler("eval_merge", "cmd_eval_merge"))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nel",
        description="nel workbench: evaluate LLMs and agents, keep every step in DuckDB.",
    )
    parser.add_argument("--version", action="version", version="nel-workbench 0.1.0")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    ev = sub.add_parser("eval", help="run and merge evaluations")
    ev_sub = ev.add_subparsers(dest="eval_command", metavar="SUBCOMMAND", required=True)
    _add_eval_run(ev_sub)
    _add_eval_merge(ev_sub)
    st_ = ev_sub.add_parser("status", help="progress of background runs, per shard (all of the store's, or RUN)")
    st_.add_argument("run_id", metavar="RUN", nargs="?", help="one run (default: every background run of the store)")
    st_.add_argument("--format", choices=("text", "json"), default="text")
    _store_arg(st_)
    st_.set_defaults(func=_handler("eval_workers", "cmd_eval_status"))
    sp = ev_sub.add_parser("stop", help="stop a background run: its workers keep every completed step")
    sp.add_argument("run_id", metavar="RUN")
    _store_arg(sp)
    sp.set_defaults(func=_handler("eval_workers", "cmd_eval_stop"))
    rs = ev_sub.add_parser("resume", help="restart a background run's dead or stopped shards; no step is lost or "
                           "repeated")
    rs.add_argument("run_id", metavar="RUN")
    _store_arg(rs)
    rs.set_defaults(func=_handler("eval_workers", "cmd_eval_resume"))

    rv = ev_sub.add_parser("reverify", help="score a stored run's responses again (no model calls) into a new run")
    rv.add_argument("run_id", metavar="RUN", help="the run whose responses to re-score")
    rv.add_argument("--scorer", help="score with this scorer instead of the benchmark's own (see workbench.scoring)")
    rv.add_argument("-O", "--override", action="append", metavar="scoring.PARAM=VALUE",
                    help="set a scorer parameter, e.g. -O scoring.tolerance=0.01 (repeatable)")
    _store_arg(rv)
    rv.set_defaults(func=_handler("eval_run", "cmd_eval_reverify"))

    ex = ev_sub.add_parser("export", help="write a run's seed-compatible artifacts (eval-ID.json, results.jsonl, ...)")
    ex.add_argument("run_id", metavar="RUN", help="the run to export")
    ex.add_argument("-o", "--output", metavar="DIR", help="directory to write the artifacts into (with --to: "
                    "default the run's directory beside the store)")
    ex.add_argument("--to", action="append", metavar="TARGET", help="export to inspect, mlflow or wandb instead "
                    "(repeatable or a comma list; docs/exports.md)")
    _store_arg(ex)
    ex.set_defaults(func=_handler("eval_export", "cmd_eval_export"))

    rp = ev_sub.add_parser("report", help="render a run (or an exported artifacts dir) as a report")
    rp.add_argument("source", metavar="RUN_OR_DIR", help="a run id in the store, or a directory of exported artifacts")
    rp.add_argument("-f", "--format", choices=("markdown", "html", "csv", "json", "latex"), default="markdown")
    rp.add_argument("--all-formats", action="store_true", help="write every format (needs -o DIR)")
    rp.add_argument("-o", "--output", metavar="PATH", help="file to write (a directory with --all-formats); "
                    "default: standard output")
    _store_arg(rp)
    rp.set_defaults(func=_handler("eval_export", "cmd_eval_report"))

    st = ev_sub.add_parser("stats", help="a run's statistics: pass@k, mean reward, intervals, slices, variance split")
    st.add_argument("source", metavar="RUN_OR_DIR", help="a run id in the store, or an exported results directory")
    st.add_argument("--metric", help="score this metric (default: the run's primary metric)")
    st.add_argument("--by", action="append", metavar="COLUMN", help="also per slice of this metadata column "
                    "(e.g. category; repeatable)")
    st.add_argument("--cluster", metavar="COLUMN", help="cluster standard errors by this metadata column "
                    "(tasks sharing a passage or category)")
    st.add_argument("--bootstrap", type=int, default=10_000, metavar="N", help="bootstrap resamples (default 10000; "
                    "0: none)")
    st.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    st.add_argument("--format", choices=("text", "json"), default="text")
    _store_arg(st)
    st.set_defaults(func=_handler("stats_cmd", "cmd_eval_stats"))

    cmp = sub.add_parser("compare", aliases=["regression"],  # NeMo Evaluator's name for the same comparison
                         help="paired comparison of two runs: deltas, intervals, p-values, flips, verdict")
    cmp.add_argument("baseline", metavar="BASELINE", help="run id in the store, or a results directory")
    cmp.add_argument("candidate", metavar="CANDIDATE", help="run id in the store, or a results directory")
    cmp.add_argument("--max-drop", "--threshold", type=float, default=0.05, metavar="X",
                     help="largest tolerated drop of the metric (absolute, default 0.05)")
    cmp.add_argument("--metric", help="compare this metric (default: each run's primary metric)")
    cmp.add_argument("--strict", action="store_true", help="exit 1 on BLOCK, 2 on WARN or INCONCLUSIVE")
    cmp.add_argument("-o", "--output", metavar="regression.json", help="also write the full comparison as JSON (a "
                     "directory: regression.json in it)")
    cmp.add_argument("--show-flips", action="store_true", help="list every task that flipped")
    cmp.add_argument("--seed", type=int, default=0, help="seed of the bootstrap and permutation test (default 0)")
    _store_arg(cmp)
    cmp.set_defaults(func=_handler("compare_cmd", "cmd_compare"))

    gate = sub.add_parser("gate", help="apply a release policy to two results directories: GO / NO-GO / INCONCLUSIVE")
    gate.add_argument("baseline", metavar="BASELINE_DIR")
    gate.add_argument("candidate", metavar="CANDIDATE_DIR")
    gate.add_argument("--policy", required=True, metavar="policy.yaml")
    gate.add_argument("--format", choices=("text", "json"), default="text")
    gate.add_argument("--strict", action="store_true", help="exit 1 on NO-GO, 2 on INCONCLUSIVE")
    gate.add_argument("--verbose", action="store_true", help="show each benchmark's statistics")
    gate.add_argument("-o", "--output", metavar="gate.json", help="also write the gate's report as JSON (a "
                      "directory: gate.json in it)")
    gate.add_argument("--seed", type=int, default=0)
    gate.set_defaults(func=_handler("compare_cmd", "cmd_gate"))

    dg = sub.add_parser("diagnose", help="why did the score change? an evidence-backed markdown report on one run, "
                        "or on a baseline and a candidate (BLADE's sections)")
    dg.add_argument("baseline", metavar="BASELINE", help="run id in the store, or a results directory")
    dg.add_argument("candidate", metavar="CANDIDATE", nargs="?", help="run id or results directory to compare with")
    dg.add_argument("-o", "--output", metavar="report.md", help="write the report here (default: standard output)")
    dg.add_argument("--metric", help="diagnose this metric (default: the baseline's primary metric)")
    dg.add_argument("--slice", action="append", metavar="COLUMN", dest="slices",
                    help="profile and split by this metadata column (repeatable; default: every column with "
                         "few distinct values, e.g. category)")
    dg.add_argument("--top", type=_positive_int, default=5, metavar="N",
                    help="tasks shown per deep dive and per direction of the shift (default 5)")
    dg.add_argument("--format", choices=("markdown", "json"), default="markdown",
                    help="markdown report (default), or the whole diagnosis as JSON")
    _store_arg(dg)
    dg.set_defaults(func=_handler("diagnose_cmd", "cmd_diagnose"))

    serve = sub.add_parser("serve", help="serve a benchmark over HTTP: NeMo Gym's resources-server protocol "
                           "(/health, /seed_session, /verify)")
    serve.add_argument("-b", "--bench", required=True, metavar="NAME",
                       help="benchmark name (see `nel list`) or a BYOB .py file")
    serve.add_argument("--benchmark-file", action="append", metavar="FILE.py",
                       help="also register the benchmarks defined in this file (repeatable)")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1, loopback only)")
    serve.add_argument("--port", type=int, default=9090, help="port to listen on (default 9090; 0 picks a free one)")
    serve.add_argument("--allow-remote", action="store_true",
                       help="allow binding to a non-loopback address (requires an auth token)")
    serve.add_argument("--auth-token", metavar="TOKEN",
                       help="bearer token every request must carry (prefer $NEL_SERVE_TOKEN: never logged)")
    serve.add_argument("--gym-compat", action="store_true",
                       help="answer exactly as a NeMo Gym resources server does (field names, echoed row fields)")
    serve.add_argument("--export-data", metavar="DIR",
                       help="write the benchmark as the JSONL that NeMo Gym's rollout collection reads into DIR, "
                            "then exit (with --and-serve: then serve)")
    serve.add_argument("--and-serve", action="store_true",
                       help="with --export-data: keep serving after writing the rows")
    serve.add_argument("--max-body-bytes", type=_positive_int, default=8 * 1024 * 1024, metavar="N",
                       help="largest request body accepted (default 8 MiB; larger gets 413)")
    serve.add_argument("--sandbox", choices=("docker", "local"),
                       help="verify each response in a sandbox of its own (benchmarks that run code: humaneval)")
    serve.add_argument("--sandbox-concurrency", type=_positive_int, default=4, metavar="N",
                       help="sandboxes running at once (default 4; more /verify requests wait their turn)")
    serve.add_argument("--max-response-chars", type=_positive_int, metavar="N",
                       help="longest response scored; a longer one gets reward 0 and the reason (default: the "
                            "benchmark's own, 524288 for most)")
    serve.add_argument("--scoring-workers", type=int, metavar="N",
                       help="processes scoring responses (default: one per core; 0: in the server's threads, "
                            "for verifies that wait rather than compute)")
    serve.add_argument("--header-timeout", type=float, default=30.0, metavar="SECONDS",
                       help="time a client has to send its request line and headers (default 30; then 408)")
    serve.add_argument("--body-timeout", type=float, default=60.0, metavar="SECONDS",
                       help="time a client has to send its request body once the headers are in (default 60)")
    serve.set_defaults(func=_handler("serve_cmd", "cmd_serve"))

    imp = sub.add_parser("import", help="bring results made elsewhere into the store")
    imp_sub = imp.add_subparsers(dest="import_command", metavar="SOURCE", required=True)
    gym = imp_sub.add_parser("gym", help="NeMo Gym rollout files (ng_collect_rollouts output) as a run in the store")
    gym.add_argument("rollouts", metavar="ROLLOUTS.jsonl", help="the rollouts file")
    gym.add_argument("--inputs", metavar="MATERIALIZED_INPUTS.jsonl",
                     help="the materialized inputs: tasks with no rollout are counted as missing")
    gym.add_argument("--failures", metavar="FAILURES.jsonl", help="failed rollouts, kept as failures")
    gym.add_argument("--run-id", help="name the imported run (default: derived from the file's content)")
    gym.add_argument("--benchmark", metavar="NAME", help="benchmark name to record (default: from the rows)")
    gym.add_argument("--model-id", metavar="NAME", help="model name to record (default: from the rows)")
    _store_arg(gym)
    gym.set_defaults(func=_handler("import_gym", "cmd_import_gym"))
    lme = imp_sub.add_parser("lm-eval", help="lm-evaluation-harness --log_samples output as runs (one per task)")
    lme.add_argument("dir", metavar="DIR", help="lm_eval's --output_path, or the model directory in it")
    lme.add_argument("--run-id", help="name the run (several tasks: RUN_ID-TASK; default: from the content)")
    lme.add_argument("--benchmark", metavar="NAME", help="the nel benchmark the documents are problems of (pairing)")
    _store_arg(lme)
    lme.set_defaults(func=_handler("import_lmeval", "cmd_import_lmeval"))
    ins = imp_sub.add_parser("inspect", help="inspect_ai .eval/.json logs as runs (one per log; samples x epochs)")
    ins.add_argument("log", metavar="LOG|DIR", help="an inspect_ai log, or a directory of them (recursively)")
    ins.add_argument("--run-id", help="name the run (several logs: RUN_ID-FILE; default: from the content)")
    ins.add_argument("--benchmark", metavar="NAME", help="the nel benchmark the samples are problems of (pairing)")
    _store_arg(ins)
    ins.set_defaults(func=_handler("import_inspect", "cmd_import_inspect"))

    cfg = sub.add_parser("config", help="the run specification (its JSON Schema, a config file checked) and the "
                         "persistent user defaults (show, set, unset)")
    cfg_sub = cfg.add_subparsers(dest="config_command", metavar="SUBCOMMAND", required=True)
    schema = cfg_sub.add_parser("schema", help="print the JSON Schema of a config file (point your editor at it)")
    schema.set_defaults(func=_handler("config_cmd", "cmd_config_schema"))
    check = cfg_sub.add_parser("check", help="validate a config file (and -O overrides) without running it")
    check.add_argument("config", metavar="CONFIG.yaml")
    check.add_argument("-O", "--override", action="append", metavar="DOT.PATH=VALUE")
    check.add_argument("--json", action="store_true", help="print the resolved specification as JSON (no secret)")
    check.set_defaults(func=_handler("config_cmd", "cmd_config_check"))
    show = cfg_sub.add_parser("show", help="the user defaults (model URL and id, store, output dir) and their file")
    show.add_argument("--json", action="store_true", help="machine-readable output")
    show.set_defaults(func=_handler("config_cmd", "cmd_config_show"))
    cset = cfg_sub.add_parser("set", help="set a user default, used by every command whose flag is not given")
    cset.add_argument("key", metavar="KEY", help="model_url, model_id, store or output_dir")
    cset.add_argument("value", metavar="VALUE")
    cset.set_defaults(func=_handler("config_cmd", "cmd_config_set"))
    unset = cfg_sub.add_parser("unset", help="remove a user default")
    unset.add_argument("key", metavar="KEY")
    unset.set_defaults(func=_handler("config_cmd", "cmd_config_unset"))

    tui = sub.add_parser("tui", help="the terminal UI: runs, live progress, sometimes-pass tasks, trajectory diffs")
    _store_arg(tui)
    tui.set_defaults(func=_handler("tui_cmd", "cmd_tui"))

    demo = sub.add_parser("demo", help="run GSM8K against the built-in mock model end to end")
    demo.add_argument("--problems", type=_positive_int, default=200)
    demo.add_argument("--repeats", type=_positive_int, default=4)
    demo.add_argument("--output-dir", default="nel-demo")
    demo.add_argument("--no-progress", action="store_true")
    demo.set_defaults(func=_handler("demo", "cmd_demo"))

    model = sub.add_parser("model", help="model utilities")
    model_sub = model.add_subparsers(dest="model_command", metavar="SUBCOMMAND", required=True)
    mock = model_sub.add_parser(
        "mock", help="serve the built-in OpenAI-compatible mock model (for demos and tests)"
    )
    from workbench.mock.cli import add_arguments

    add_arguments(mock)
    mock.set_defaults(func=_handler("misc", "cmd_model_mock"))

    sb = sub.add_parser("sandbox", help="the sandbox that code and agents run in (see docs/sandbox.md)")
    sb_sub = sb.add_subparsers(dest="sandbox_command", required=True, metavar="COMMAND")
    img = sb_sub.add_parser("image", help="build the sandbox image locally (debootstrap; root; nothing is pulled)")
    img.add_argument("--image", default="nel-sandbox:bookworm", help="image name (default nel-sandbox:bookworm)")
    img.add_argument("--force", action="store_true", help="rebuild even when it exists")
    img.set_defaults(func=_handler("sandbox_cmd", "cmd_sandbox_image"))
    cl = sb_sub.add_parser("clean", help="remove sandbox containers left by a killed run (-9)")
    cl.add_argument("--all", action="store_true", help="every sandbox container, live runs' included")
    cl.set_defaults(func=_handler("sandbox_cmd", "cmd_sandbox_clean"))
    eng = sb_sub.add_parser("engine", help="the Docker engine that --sandbox docker needs")
    eng_sub = eng.add_subparsers(dest="engine_command", required=True, metavar="COMMAND")
    es = eng_sub.add_parser("start", help="start dockerd in the background when no engine answers (root; the "
                            "code the test suite uses); it keeps running after nel exits")
    es.add_argument("--log", default="/var/log/nel-dockerd.log",
                    help="dockerd's log (default /var/log/nel-dockerd.log)")
    es.set_defaults(func=_handler("sandbox_cmd", "cmd_sandbox_engine_start"))

    doc = sub.add_parser("doctor", help="what this machine can run: Docker, bubblewrap, SLURM, Ray, NeMo Gym, the "
                         "store, disk space, extras; one line per check with its fix")
    _store_arg(doc)
    doc.add_argument("--format", choices=("text", "json"), default="text")
    doc.set_defaults(func=_handler("doctor", "cmd_doctor"))

    sql = sub.add_parser("sql", help="run SQL over the store (live runs included)")
    sql.add_argument("query", nargs="?", help="SQL text (or use --named)")
    sql.add_argument("--named", metavar="NAME", help="run a named query from store/queries/")
    sql.add_argument("--ide", action="store_true", help="open the store in harlequin, a SQL IDE in the terminal "
                     "(schema browser, completion, history, results export; read-only, live runs included)")
    _store_arg(sql)
    sql.add_argument("--format", choices=("table", "csv", "json"), default="table")
    sql.set_defaults(func=_handler("misc", "cmd_sql"))

    ls = sub.add_parser("list", help="list benchmarks: domain, size, repeats, scorer, source, data present")
    ls.add_argument("--json", action="store_true", help="machine-readable output")
    ls.add_argument("--search", metavar="TEXT", help="only benchmarks of a domain (math, code, knowledge, safety, "
                    "agent) or whose name or description contain TEXT")
    ls.add_argument("--source", metavar="TEXT", help="only benchmarks from this source: builtin (shipped with "
                    "nel), hf (a Hugging Face dataset), byob (a --benchmark-file's), lm-eval (lm-evaluation-harness "
                    "tasks), or text its SOURCE column contains")
    _benchmark_file_arg(ls)
    ls.set_defaults(func=_handler("misc", "cmd_list"))

    bm = sub.add_parser("benchmarks", help="the built-in benchmarks' data (docs/datasets.md)")
    bm_sub = bm.add_subparsers(dest="benchmarks_cmd", required=True)
    pull = bm_sub.add_parser("pull", help="fetch hub benchmarks' data at their pinned revision and freeze it "
                             "(where the hub is reachable; idempotent)")
    pull.add_argument("names", nargs="*", metavar="NAME", help="benchmarks to pull (see `nel list`)")
    pull.add_argument("--all", action="store_true", help="every hub-backed built-in benchmark")
    pull.set_defaults(func=_handler("benchmarks_cmd", "cmd_benchmarks_pull"))

    pkg = sub.add_parser("package", help="(not in nel) containerize a BYOB benchmark: says what to use instead")
    pkg.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    pkg.set_defaults(func=_handler("misc", "cmd_package"))

    val = sub.add_parser("validate", help="seed a benchmark and check its answer key scores 1.0; with a model, run "
                         "seed -> model -> verify on a few problems and show each verdict")
    val.add_argument("-b", "--bench", required=True, metavar="NAME", help="benchmark name or a BYOB .py file")
    _benchmark_file_arg(val)
    val.add_argument("--samples", type=_positive_int, default=10, help="problems to check (default 10)")
    val.add_argument("--model-url", metavar="URL", help="run the problems against this model (default: the user "
                     "default model_url, if set with its model_id)")
    val.add_argument("--model-id", metavar="NAME", help="model name sent in each request")
    val.add_argument("--no-model", action="store_true", help="only check the answer key, even with a default model")
    val.set_defaults(func=_handler("validate_cmd", "cmd_validate"))
    return parser


class _ClosedPipeGuard:
    """Standard output that outlives its reader: ``nel eval run ... | head -2`` closes the pipe after two lines,
    and the next write must not cancel the run's remaining work (its artifacts) nor change its exit code. Once
    the reader is gone, output goes to /dev/null."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._gone = False

    def write(self, text: str) -> int:
        if not self._gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._divert()
        return len(text)

    def flush(self) -> None:
        if not self._gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._divert()

    def _divert(self) -> None:
        self._gone = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._stream.fileno())  # what is still buffered is flushed there at exit
        finally:
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


_SUBCOMMAND_DESTS = ("command", "eval_command", "import_command", "config_command", "model_command",
                     "sandbox_command", "engine_command")


def command_name(args: argparse.Namespace) -> str:
    """The command as typed, for a message about it: ``nel tui``, ``nel eval run``, ``nel sandbox engine start``."""
    words = [getattr(args, dest) for dest in _SUBCOMMAND_DESTS if isinstance(getattr(args, dest, None), str)]
    return " ".join(("nel", *words))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from workbench.errors import NelError
    from workbench.extras import MissingExtra

    stdout = sys.stdout
    if not isinstance(stdout, _ClosedPipeGuard):
        sys.stdout = _ClosedPipeGuard(stdout)  # type: ignore[assignment]
    try:
        return args.func(args)
    except MissingExtra as exc:  # before NelError: its line names the command, not "error"
        print(exc.line(command_name(args)), file=sys.stderr)
        return exc.exit_code
    except NelError as exc:
        from workbench.secrets import redact_text  # a server's error may quote the key or a keyed URL

        print(redact_text(f"nel: error: {exc}"), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("nel: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    finally:
        sys.stdout.flush()
        sys.stdout = stdout


def entry() -> None:
    """The ``nel`` command (``python -m workbench.cli`` too): ``main``, then a quick exit."""
    _quick_exit(main())


def _threads_to_wait_for() -> list[str]:
    """The threads an ordinary exit would join: every live non-daemon thread but this one."""
    import threading

    return [t.name for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]


def _quick_exit(code: int) -> None:
    """Exit without the interpreter's teardown, which frees every module one by one (60 ms after a run: a tenth of
    a small run's whole time) though the process is about to end anyway. Only once nothing is left to run: the
    atexit handlers (logging's flush, multiprocessing's, coverage's) run first and the standard streams are
    flushed; with another non-daemon thread alive (the interpreter would wait for it), or ``NEL_NO_QUICK_EXIT``
    set, the usual exit. Daemon threads (tqdm's monitor, a download's workers) are abandoned at exit either way; the
    interpreter's teardown around them is what aborted `nel benchmarks pull` ("terminate called without an active
    exception", exit -6) after it had finished."""
    if _threads_to_wait_for() or os.environ.get("NEL_NO_QUICK_EXIT"):
        sys.exit(code)
    import atexit

    atexit._run_exitfuncs()
    import contextlib

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe (`| head`): what was written is all it takes
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    entry()
