"""``nel validate``: is a benchmark sound? Without a model, its answer key is checked (each expected answer must
score 1.0 through the benchmark's own scorer); with one, the real seed → model → verify loop (``workbench.runs``,
the engine every run uses) runs on the first N problems and each verdict is shown."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from workbench.cli.misc import resolve_bench, shown
from workbench.cli.user_defaults import load_defaults
from workbench.errors import UsageError
from workbench.secrets import redact_text


def cmd_validate(args: argparse.Namespace) -> int:
    bench = resolve_bench(args.bench, args.benchmark_file)
    model = None if args.no_model else _model(args)
    if model is None:
        return _check_answer_key(bench, args.samples)
    return _run_samples(args, bench, *model)


def _model(args: argparse.Namespace) -> tuple[str, str] | None:
    """``(url, model id)`` from the flags, else the user defaults; ``None`` when neither names a model."""
    user = load_defaults()
    url = args.model_url or (None if args.model_id else user.get("model_url"))
    model_id = args.model_id or (None if args.model_url else user.get("model_id"))
    if url is None and model_id is None:
        return None
    if url is None or model_id is None:
        missing = "--model-url" if url is None else "--model-id"
        raise UsageError(f"{missing}: needed to run the samples against a model (or `nel config set "
                         f"{missing[2:].replace('-', '_')} VALUE`); --no-model checks the answer key only")
    return url, model_id


def _check_answer_key(bench: str, samples: int) -> int:
    from workbench.environments import get_environment

    env = get_environment(bench)
    n = min(samples, len(env))
    step = max(1, len(env) // n)
    failures = 0
    for idx in range(0, step * n, step):
        seed = env.seed(idx)
        ok, how = env.check_answer_key(idx)
        failures += not ok
        print(f"--- problem {idx} (task {seed.task_id})")
        print(_clip(seed.prompt))
        print(f">>> expected: {_clip(seed.expected_answer)!r}  {how} {'OK' if ok else 'FAIL'}")
    verdict = "pass static checks (scoring needs a sandbox)" if env.requires_sandbox else "score 1.0"
    print(f"{env.name}: {len(env)} problems; {n - failures}/{n} sampled expected answers {verdict}")
    return 1 if failures else 0


def _run_samples(args: argparse.Namespace, bench: str, url: str, model_id: str) -> int:
    """One attempt at each of the first ``--samples`` problems through the engine, into a throwaway store; each
    verdict printed. Exit 1 when the run failed (the model unreachable, too many errors), else 0: wrong answers
    are the model's, not the benchmark's."""
    from workbench.runs import run
    from workbench.spec.flags import spec_from_values
    from workbench.store import open_store

    with tempfile.TemporaryDirectory(prefix="nel-validate-") as tmp:
        values: dict[str, Any] = {
            "bench": bench, "model_url": url, "model_id": model_id, "repeats": 1, "max_problems": args.samples,
            "output_dir": tmp, "benchmark_file": args.benchmark_file,
            "api_key": os.environ.get("NEMO_API_KEY") or os.environ.get("OPENAI_API_KEY"),
        }
        spec = spec_from_values(values, lambda field: field.flag.flag)
        (_, outcome), = run(spec).results
        assert not isinstance(outcome, BaseException)  # from flags, a failing benchmark raises
        result = outcome.result
        steps = open_store(Path(spec.store_path)).dicts(
            "SELECT task_idx, task_id, extracted_answer, expected_answer, reward, passed, failure_category "
            "FROM steps WHERE run_id = ? ORDER BY task_idx", [result.run_id])
    for s in steps:
        verdict = "PASS" if s["passed"] else (s["failure_category"] or "FAIL").upper()
        print(f"problem {s['task_idx']:>5}  task {s['task_id']}  {verdict:<6} reward {_reward(s['reward'])}  "
              f"extracted {_quoted(s['extracted_answer'])}  expected {_quoted(s['expected_answer'])}")
    n_pass = sum(bool(s["passed"]) for s in steps)
    errors = sum(s["failure_category"] is not None and not s["passed"] for s in steps)
    print(redact_text(f"{bench}: {n_pass}/{len(steps)} problems passed against {model_id} at {url} "
          f"({errors} without a verdict or answer); seed -> model -> verify ran end to end"))
    if result.error is not None:
        print(f"nel: validation run failed: {result.error}", file=sys.stderr)
        return 1
    return 0


def _reward(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _quoted(value: str | None, limit: int = 60) -> str:
    return "-" if value is None else repr(_clip(shown(value), limit))


def _clip(text: str, limit: int = 400) -> str:
    return text if len(text) <= limit else text[:limit] + " …"
