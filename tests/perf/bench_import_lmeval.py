"""Benchmark: `nel import lm-eval` of a 100,000-document output. A script, not a test: run `make perf`.

Writes lm-evaluation-harness 0.4.x output in its own layout and line format (``OUT/<model>/results_<date>.json``,
``samples_<task>_<date>.jsonl``, one line per document and filter: two filters, so 200,000 lines; GSM8K documents,
the first 1,319 nel's own problems so they pair, the rest made unique), then imports it in a fresh process with
``--benchmark gsm8k`` and prints samples/s, the wall time and the peak RSS (target: at most 300 MB).
Pass --docs N for another size.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from workbench.environments import get_environment
from workbench.environments.dataset import DatasetEnvironment

TASK = "gsm8k"
DATE = "2026-01-01T00-00-00.000000"
_FILTERS = ("strict-match", "flexible-extract")
# Peak RSS read in the child (VmHWM), as bench_export does: a child's ru_maxrss carries the parent's RSS at fork.
_IMPORT = """
import re, sys, time
from pathlib import Path
from workbench.importers.lmeval import import_lmeval
start = time.perf_counter()
(result,) = import_lmeval(Path(sys.argv[1]), Path(sys.argv[2]), benchmark="gsm8k")
print(result.n_steps, result.n_tasks - result.n_unpaired_tasks, time.perf_counter() - start)
print(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1), file=sys.stderr)
"""


def _config() -> dict[str, object]:
    return {"task": TASK, "dataset_path": "openai/gsm8k", "dataset_name": "main", "output_type": "generate_until",
            "doc_to_text": "Question: {{question}}\nAnswer:", "doc_to_target": "{{answer}}", "num_fewshot": 5,
            "metric_list": [{"metric": "exact_match", "aggregation": "mean", "higher_is_better": True}],
            "generation_kwargs": {"until": ["Question:", "</s>", "<|im_end|>"], "do_sample": False,
                                  "temperature": 0.0},
            "repeats": 1, "filter_list": [{"name": f, "filter": [{"function": "take_first"}]} for f in _FILTERS],
            "metadata": {"version": 3.0}}


def write_output(out: Path, n_docs: int) -> Path:
    """``n_docs`` GSM8K-shaped documents as lm-eval writes them; returns the model directory."""
    env = get_environment("gsm8k")
    assert isinstance(env, DatasetEnvironment)
    rows = env.rows
    model_dir = out / "nel-mock"
    model_dir.mkdir(parents=True)
    correct = 0
    with open(model_dir / f"samples_{TASK}_{DATE}.jsonl", "w", encoding="utf-8") as fh:
        for filt in _FILTERS:
            for doc_id in range(n_docs):
                base = rows[doc_id % len(rows)]
                doc = base if doc_id < len(rows) else {**base, "question": f"{base['question']} (variant {doc_id})"}
                answer = base["answer"].rsplit("#### ", 1)[-1]
                right = doc_id % 3 != 0
                correct += right and filt == _FILTERS[0]
                reply = f"Let me think.\nThe answer is: {answer if right else '0'}"
                chat = json.dumps([{"role": "user", "content": f"Question: {doc['question']}\nAnswer:"}],
                                  ensure_ascii=False)
                sample = {"doc_id": doc_id, "doc": doc, "target": doc["answer"],
                          "arguments": {"gen_args_0": {"arg_0": chat, "arg_1": _config()["generation_kwargs"]}},
                          "resps": [[reply]], "filtered_resps": [answer if right else "0"], "filter": filt,
                          "metrics": ["exact_match"],
                          "doc_hash": hashlib.sha256(json.dumps(doc).encode()).hexdigest(),
                          "prompt_hash": hashlib.sha256(chat.encode()).hexdigest(),
                          "target_hash": hashlib.sha256(doc["answer"].encode()).hexdigest(),
                          "exact_match": 1.0 if right else 0.0}
                fh.write(json.dumps(sample, ensure_ascii=False) + "\n")
    accuracy = correct / n_docs
    results = {"results": {TASK: {"alias": TASK, **{f"exact_match,{f}": accuracy for f in _FILTERS}}},
               "configs": {TASK: _config()}, "versions": {TASK: 3.0}, "n-shot": {TASK: 5},
               "config": {"model": "local-chat-completions", "model_args": "model=nel-mock"},
               "model_name": "nel-mock", "model_name_sanitized": "nel-mock", "lm_eval_version": "0.4.13"}
    (model_dir / f"results_{DATE}.json").write_text(json.dumps(results), encoding="utf-8")
    return model_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nel-bench-lmeval-") as tmp:
        out = Path(tmp) / "out"
        start = time.perf_counter()
        model_dir = write_output(out, args.docs)
        size = sum(p.stat().st_size for p in model_dir.iterdir())
        print(f"wrote {args.docs:,} documents x {len(_FILTERS)} filters ({size / 1e6:.0f} MB) "
              f"in {time.perf_counter() - start:.1f} s")
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", _IMPORT, str(Path(tmp) / "nel.duckdb"), str(out)],
                              capture_output=True, text=True)
        wall = time.perf_counter() - start
        if proc.returncode != 0:  # the one line that says why, not the traceback
            sys.exit(f"import lm-eval of {args.docs:,} documents failed: {proc.stderr.strip().splitlines()[-1]}")
        n_steps, n_paired, seconds = proc.stdout.split()
        rss_kib = int(re.findall(r"^(\d+)$", proc.stderr, re.M)[-1])
        print(f"import lm-eval: {int(n_steps):,} samples in {float(seconds):.1f} s = "
              f"{int(n_steps) / float(seconds):,.0f} samples/s ({wall:.1f} s for the whole process); "
              f"{int(n_paired):,} paired with nel's gsm8k; peak RSS {rss_kib / 1024:.0f} MB (target <= 300 MB)")


if __name__ == "__main__":
    main()
