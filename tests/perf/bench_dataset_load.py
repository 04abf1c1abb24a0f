"""Benchmark: loading hub data into a run (issue 16). A script, not a test:
`python tests/perf/bench_dataset_load.py [--runs N]`.

An MMLU-sized split (14,042 rows, cais/mmlu's upstream Parquet schema) is placed in a Hugging Face cache in its
real layout, behind a ``[hub]`` benchmark.toml with an MMLU-style converter. Each figure is the median over N
fresh processes (HF_HUB_OFFLINE=1) of building the benchmark's environment, timed inside the process:
  1. the first load: read the cached Parquet, convert every row, write the frozen form (target: none; once);
  2. a load from the frozen form, as every run after the first does (target <= 1 s);
and the peak RSS (VmHWM) of a process that loads 14,042 rows against one that loads 1,404, to show memory grows with the
rows themselves (one copy, prompts rendered when seeded), not with more.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1]))  # tests/: hub_cache

from hub_cache import parquet_bytes, place_dataset  # noqa: E402

SUBJECTS = ["abstract_algebra", "anatomy", "astronomy", "business_ethics", "college_biology", "world_religions"]
CONVERTER = '''
LETTERS = "ABCD"

def convert(row):
    choices = "\\n".join(f"{LETTERS[i]}. {c}" for i, c in enumerate(row["choices"]))
    return {"question": row["question"], "choices_text": choices, "answer": LETTERS[row["answer"]],
            "subject": row["subject"]}
'''
TOML = '''
name = "{name}"
description = "MMLU-sized multiple choice (bench)"
domain = "knowledge"
prompt = "{{question}}\\n\\n{{choices_text}}\\nAnswer:"
input_field = "question"
target_field = "answer"
metadata_fields = {{ category = "subject" }}
scorer = "multiple_choice"
[hub]
repo = "bench/{name}"
subset = "all"
split = "test"
convert = "nel_bench_mmlu:convert"
'''
CHILD = '''
import sys, time
from pathlib import Path
from workbench.environments import registry
folder = Path(sys.argv[1]); registry.benchmarks_dir = lambda: folder
start = time.perf_counter()
env = registry.get_environment(sys.argv[2])
took = time.perf_counter() - start
assert len(env) == int(sys.argv[3]), len(env)
peak = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))  # ru_maxrss survives exec
print(took, peak.split()[1])
'''


def upstream_rows(n: int) -> list[dict[str, object]]:
    return [{"question": f"Question {i}: which of these is the {i % 97}-th option of its kind? " + "x" * (i % 200),
             "subject": SUBJECTS[i % len(SUBJECTS)], "choices": [f"choice {i}-{k} " + "y" * (k * 7) for k in range(4)],
             "answer": i % 4} for i in range(n)]


def schema():  # cais/mmlu's: question string, subject string, choices list<string>, answer int64 (a ClassLabel)
    import pyarrow as pa

    return pa.schema([("question", pa.string()), ("subject", pa.string()), ("choices", pa.list_(pa.string())),
                      ("answer", pa.int64())])


def child(root: Path, name: str, rows: int) -> tuple[float, int]:
    env = {**os.environ, "HF_HOME": str(root / "hf"), "NEL_DATA_DIR": str(root / "nel"), "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(root / "modules"), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", CHILD, str(root / "benchmarks"), name, str(rows)], env=env,
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.exit(out.stderr)
    took, rss_kb = out.stdout.split()
    return float(took), int(rss_kb)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="nel-bench-load-"))
    try:
        (root / "modules").mkdir()
        (root / "modules" / "nel_bench_mmlu.py").write_text(CONVERTER)
        for name, n in (("mmlu_full", 14_042), ("mmlu_tenth", 1_404)):
            (root / "benchmarks" / name).mkdir(parents=True)
            (root / "benchmarks" / name / "benchmark.toml").write_text(TOML.format(name=name))
            place_dataset(root / "hf", f"bench/{name}",
                          {"all/test-00000-of-00001.parquet": parquet_bytes(upstream_rows(n), schema())})
        first, frozen, rss_full, rss_tenth = [], [], [], []
        for _ in range(args.runs):
            shutil.rmtree(root / "nel", ignore_errors=True)
            took, _ = child(root, "mmlu_full", 14_042)
            first.append(took)
            took, rss = child(root, "mmlu_full", 14_042)
            frozen.append(took)
            rss_full.append(rss)
            if not (root / "nel" / "benchmarks" / "mmlu_tenth").exists():
                child(root, "mmlu_tenth", 1_404)  # freeze it first: both figures are of frozen loads
            rss_tenth.append(child(root, "mmlu_tenth", 1_404)[1])
        size = sum(p.stat().st_size for p in (root / "nel" / "benchmarks" / "mmlu_full").rglob("data.jsonl"))
        print(f"MMLU-sized split, 14,042 rows (frozen form {size / 1e6:.1f} MB), median of {args.runs} processes:")
        print(f"  first load from the HF cache (read Parquet, convert, freeze): {statistics.median(first):.3f} s")
        print(f"  load from the frozen form (every later run; target <= 1 s): {statistics.median(frozen):.3f} s")
        full, tenth = statistics.median(rss_full) / 1024, statistics.median(rss_tenth) / 1024
        print(f"  peak RSS of the loading process: {full:.0f} MB for 14,042 rows vs {tenth:.0f} MB for 1,404 "
              f"({(full - tenth) * 1024 / (14_042 - 1_404):.1f} KB per extra row)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
