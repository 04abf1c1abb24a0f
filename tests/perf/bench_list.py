"""Benchmark: `nel list` over the whole catalogue (issue 16). A script, not a test:
`python tests/perf/bench_list.py [--runs N]`.

`nel list` describes every benchmark from its benchmark.toml and, for a hub one, its manifest: no dataset is
read. Prints the median wall time of N fresh processes of:
  1. `nel --help` (the floor: interpreter and the CLI's parser);
  2. `nel list` on the shipped catalogue;
  3. `nel list` with 15 more hub-backed definitions (the size of the standard catalogue), 8 of them pulled (a
     frozen form and manifest of 14,042 rows each) and 7 not present (target <= 0.3 s);
taking turns, so a loaded machine slows all three alike.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # as pip installs: bytecode kept
RUNNER = ("import sys; from pathlib import Path; from workbench.environments import registry; "
          "folder = Path(sys.argv.pop(1)); registry.benchmarks_dir = lambda: folder; "
          "from workbench.cli import entry; sys.argv[0] = 'nel'; entry()")
TOML = '''
name = "{name}"
description = "hub benchmark {i} for the listing benchmark"
domain = "{domain}"
prompt = "{{question}}"
input_field = "question"
target_field = "answer"
scorer = "exact"
default_repeats = 4
license = "MIT"
[hub]
repo = "bench/{name}"
split = "test"
revision = "{sha}"
'''


def catalogue(root: Path) -> Path:
    """The shipped benchmarks plus 15 hub-backed ones, 8 of them with a frozen form and manifest."""
    from workbench.datasources.frozen import Manifest, UpstreamFile
    from workbench.resources import benchmarks_dir

    folder = root / "benchmarks"
    shutil.copytree(benchmarks_dir(), folder)
    rows = b"".join(orjson.dumps({"question": f"q{i}", "answer": "a"}) + b"\n" for i in range(14_042))
    for i in range(15):
        name, sha = f"hub_bench_{i:02d}", f"{i:040x}"
        (folder / name).mkdir()
        domain = ("math", "code", "knowledge", "safety", "agentic")[i % 5]
        (folder / name / "benchmark.toml").write_text(TOML.format(name=name, i=i, domain=domain, sha=sha))
        if i % 2:
            continue
        frozen = root / "nel" / "benchmarks" / name / sha
        frozen.mkdir(parents=True)
        (frozen / "data.jsonl").write_bytes(rows)
        manifest = Manifest(benchmark=name, repo=f"bench/{name}", split="test", subset=None, requested_revision=sha,
                            revision=sha, files=(UpstreamFile("test.parquet", 1, "0" * 64),), rows=14_042,
                            size=len(rows), sha256="0" * 64, license="MIT", converter="", frozen_at="")
        (frozen / "manifest.json").write_bytes(manifest.to_json())
    return folder


def wall(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="nel-bench-list-"))
    try:
        folder = catalogue(root)
        env = {**ENV, "NEL_DATA_DIR": str(root / "nel"), "HF_HOME": str(root / "hf"), "HF_HUB_OFFLINE": "1"}
        out = subprocess.run([sys.executable, "-c", RUNNER, str(folder), "list"], env=env, capture_output=True,
                             text=True, check=True).stdout
        n = len(out.splitlines()) - 1
        present = sum(" yes" in line for line in out.splitlines())
        cmds = {"nel --help": [sys.executable, "-m", "workbench.cli", "--help"],
                "nel list (shipped catalogue)": [sys.executable, "-m", "workbench.cli", "list"],
                f"nel list ({n} benchmarks, {present} pulled)": [sys.executable, "-c", RUNNER, str(folder), "list"]}
        for cmd in cmds.values():  # warm-up: bytecode written, page cache filled
            wall(cmd, env)
        times: dict[str, list[float]] = {label: [] for label in cmds}
        for _ in range(args.runs):
            for label, cmd in cmds.items():
                times[label].append(wall(cmd, env))
        print(f"median wall time of {args.runs} processes (load average {os.getloadavg()[0]:.2f}):")
        for label, got in times.items():
            print(f"  {label:<40} {statistics.median(got):.3f} s")
        print("  target: nel list <= 0.3 s for the whole catalogue (no dataset is read)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
