"""Benchmark: `nel import inspect` of a 100,000-sample `.eval` log. A script, not a test: run `make perf`.

Writes an inspect_ai log in its own zip layout (``header.json``, ``samples/<id>_epoch_<n>.json``, deflate entries):
25,000 GSM8K samples × 4 epochs, the first 1,319 nel's own problems wrapped in inspect_evals' template (so they
pair, found inside the text), the rest made unique; checks that inspect_ai's reader opens it; then imports it in a
fresh process (the file-format reader, and inspect_ai's reader with --both) and prints samples/s, the wall time,
the peak RSS (target: at most 300 MB) and the machine's load average. Pass --samples N for another size.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import orjson

from workbench.environments import get_environment
from workbench.environments.dataset import DatasetEnvironment

EPOCHS = 4
TEMPLATE = "Solve the following math problem step by step.\n\n{q}\n\nRemember to put your answer on its own line."
# Peak RSS read in the child (VmHWM): a child's ru_maxrss carries the parent's RSS at fork.
_IMPORT = """
import re, sys, time
from pathlib import Path
from workbench.importers.inspect_log import import_inspect
start = time.perf_counter()
(result,) = import_inspect(Path(sys.argv[1]), Path(sys.argv[2]), benchmark="gsm8k", use_reader=sys.argv[3] == "1")
print(result.n_steps, result.n_tasks - result.n_unpaired_tasks, time.perf_counter() - start)
print(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1), file=sys.stderr)
"""


def write_log(path: Path, n_samples: int) -> None:
    env = get_environment("gsm8k")
    assert isinstance(env, DatasetEnvironment)
    rows = env.rows
    n_ids = max(1, n_samples // EPOCHS)
    spec = {"eval_id": "bench", "run_id": "bench", "created": "2026-01-01T00:00:00+00:00", "task": "gsm8k",
            "dataset": {"name": "gsm8k", "samples": n_ids}, "model": "openai/bench", "config": {"epochs": EPOCHS},
            "packages": {"inspect_ai": "0.3.285"}}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for epoch in range(1, EPOCHS + 1):
            for sid in range(n_ids):
                row = rows[sid % len(rows)]
                words = row["question"].split(" ")  # a variant: the sample's number after the first word
                question = row["question"] if sid < len(rows) else " ".join([words[0], str(sid), *words[1:]])
                answer = row["answer"].split("####")[-1].strip()
                reply = f"{row['answer']}\nANSWER: {answer}"
                correct = (sid + epoch) % 3 != 0
                sample = {
                    "id": sid, "epoch": epoch, "input": question, "target": answer,
                    "messages": [{"role": "user", "content": TEMPLATE.format(q=question), "source": "input"},
                                 {"role": "assistant", "content": reply, "source": "generate"}],
                    "output": {"model": "bench", "choices": [{"message": {"role": "assistant", "content": reply},
                                                              "stop_reason": "stop"}], "completion": reply},
                    "scores": {"match": {"value": "C" if correct else "I", "answer": answer, "explanation": reply}},
                    "metadata": {"row": sid}, "store": {}, "events": [],
                    "model_usage": {"openai/bench": {"input_tokens": 120, "output_tokens": 80, "total_tokens": 200}},
                    "total_time": 1.0, "working_time": 0.9, "uuid": f"u{sid}-{epoch}", "attachments": {}}
                zf.writestr(f"samples/{sid}_epoch_{epoch}.json", orjson.dumps(sample))
        zf.writestr("header.json", orjson.dumps({"version": 2, "status": "success", "eval": spec,
                                                 "plan": {"name": "plan", "steps": []}}))


def run_import(store: Path, log: Path, use_reader: bool) -> tuple[int, int, float, float]:
    proc = subprocess.run([sys.executable, "-c", _IMPORT, str(store), str(log), "1" if use_reader else "0"],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    steps, paired, seconds = proc.stdout.split()
    return int(steps), int(paired), float(seconds), int(proc.stderr.split()[-1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--both", action="store_true", help="also import through inspect_ai's reader")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "bench.eval"
        start = time.perf_counter()
        write_log(log, args.samples)
        print(f"wrote {args.samples} samples ({log.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - start:.1f}s")
        from inspect_ai.log import read_eval_log
        header = read_eval_log(str(log), header_only=True)
        print(f"inspect_ai's reader opens it: task {header.eval.task}, status {header.status}")
        for use_reader in ((False, True) if args.both else (False,)):
            store = Path(tmp) / f"nel-{int(use_reader)}.duckdb"
            steps, paired, seconds, rss = run_import(store, log, use_reader)
            name = "inspect_ai's reader" if use_reader else "file format"
            print(f"import ({name}): {steps} steps, {paired} samples paired, {seconds:.1f}s, "
                  f"{steps / seconds:,.0f} samples/s, peak RSS {rss:.0f} MB (target <= 300)")
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
