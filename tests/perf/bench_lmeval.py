"""``nel eval run -b lm-eval://TASK`` against lm-eval's own ``simple_evaluate`` with ``local-chat-completions``:
the same 1,000-document task (GSM8K rows in the fixture task's YAML), the same zero-latency mock, whole processes
timed side by side (imports, task loading, requests, scoring, writing). Target: nel at least 2x lm-eval's
throughput.

    PYTHONPATH=. python tests/perf/bench_lmeval.py [--docs 1000] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GSM8K = Path("/work/shared/data/gsm8k/test.jsonl")
FIXTURE = ROOT / "tests" / "fixtures" / "lmeval" / "nel_gsm8k_mini.yaml"
TASK = "nel_gsm8k_mini"

LM_EVAL = """
import sys
import lm_eval
from lm_eval.tasks import TaskManager
res = lm_eval.simple_evaluate(model="local-chat-completions",
    model_args=f"base_url={sys.argv[1]}/chat/completions,model=nel-mock,num_concurrent={sys.argv[2]},max_retries=1",
    tasks=["nel_gsm8k_mini"], apply_chat_template=True, task_manager=TaskManager(include_path="."), log_samples=False)
print(res["results"]["nel_gsm8k_mini"]["exact_match,final-answer"])
"""


def task_dir(root: Path, docs: int) -> Path:
    """The fixture task over ``docs`` GSM8K rows (and its 10 few-shot rows), in a directory of its own."""
    rows = GSM8K.read_text(encoding="utf-8").splitlines()
    if docs > len(rows) - 10:
        raise SystemExit(f"--docs: at most {len(rows) - 10}")
    (root / f"{TASK}.test.jsonl").write_text("\n".join(rows[:docs]) + "\n", encoding="utf-8")
    (root / f"{TASK}.train.jsonl").write_text("\n".join(rows[-10:]) + "\n", encoding="utf-8")
    (root / f"{TASK}.yaml").write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    return root


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{argv[:4]} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return elapsed, proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    from workbench.mock import mock_model

    print(f"machine: {len(os.sched_getaffinity(0))} cores, load average {os.getloadavg()[0]:.2f} at the start")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "task").mkdir()
        tasks = task_dir(root / "task", args.docs)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TQDM_DISABLE": "1",
               "HF_DATASETS_CACHE": str(root / "hf"),
               "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
        os.environ.update({k: env[k] for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_DATASETS_CACHE")})
        cwd = Path.cwd()
        os.chdir(tasks)  # the mock builds the task too: its data paths are relative
        try:
            mock_cm = mock_model(benchmarks=(f"lm-eval://{TASK}?include_path=.",))
            mock = mock_cm.__enter__()
        finally:
            os.chdir(cwd)
        try:
            # a first, untimed load fills the datasets cache (the JSON files' Arrow form) for both
            timed([sys.executable, "-c", LM_EVAL, mock.base_url, str(args.concurrency)], tasks, env)
            theirs, score_theirs = timed([sys.executable, "-c", LM_EVAL, mock.base_url, str(args.concurrency)],
                                         tasks, env)
            ours, out = timed([sys.executable, "-m", "workbench.cli", "eval", "run", "-b",
                               f"lm-eval://{TASK}?include_path=.", "--model-url", mock.base_url, "--model-id",
                               "nel-mock", "--seed", "1234", "--max-concurrent", str(args.concurrency),
                               "--output-dir", str(root / "out"), "--no-progress"], tasks, env)
        finally:
            mock_cm.__exit__(None, None, None)
    pass_line = next((line.strip() for line in out.splitlines() if line.strip().startswith("pass@1")), "?")
    print(f"lm-eval simple_evaluate (local-chat-completions, num_concurrent={args.concurrency}), whole process: "
          f"{theirs:.2f} s = {args.docs / theirs:,.1f} docs/s (exact_match {float(score_theirs.strip()):.4f})")
    print(f"nel eval run -b lm-eval://{TASK} (--max-concurrent {args.concurrency}), whole process: "
          f"{ours:.2f} s = {args.docs / ours:,.1f} docs/s ({pass_line})")
    print(f"nel is {theirs / ours:.2f}x lm-eval's throughput on {args.docs} documents (target: at least 2x)")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
