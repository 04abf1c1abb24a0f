"""Benchmark: exporting a 100,000-step run to inspect_ai, MLflow and W&B. A script, not a test: run `make perf`.

Makes a GSM8K 1,319 x 76 run (100,244 steps) against the built-in mock model (zero latency), writes nel's own
artifacts once (MLflow and W&B keep them), then exports the run to each target in a fresh process and prints, per
target: the wall time of the export inside the process, the whole process's time, the bytes it wrote and its peak
RSS; then the load average (the machine is shared: a loaded one is slower). W&B runs offline, MLflow into a local
sqlite store. Pass --repeats N for another size.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_export import make_run  # the same 100k-step run as the artifacts' benchmark

from workbench.mock import mock_model

_PEAK = "print(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1), file=sys.stderr)"
_EXPORT = f"""
import re, sys, time
from pathlib import Path
from workbench.export.targets import export_targets
start = time.perf_counter()
lines = export_targets(sys.argv[1], sys.argv[2], Path(sys.argv[3]), [sys.argv[4]])
print(time.perf_counter() - start)
{_PEAK}
"""
_ARTIFACTS = f"""
import re, sys
from workbench.export.artifacts import export_run
export_run(sys.argv[1], sys.argv[2], sys.argv[3])
{_PEAK}
"""


def size_of(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def child(code: str, *args: str, env: dict[str, str]) -> tuple[float, int, str]:
    """``python -c code args``: (wall seconds, peak RSS in KiB, stdout)."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{args} failed:\n{proc.stdout}\n{proc.stderr}")
    return wall, int(proc.stderr.strip().splitlines()[-1]), proc.stdout


def main() -> None:
    repeats = int(sys.argv[sys.argv.index("--repeats") + 1]) if "--repeats" in sys.argv else 76
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = root / "nel.duckdb"
        with mock_model() as mock:
            run_id = make_run(mock.base_url, store, repeats)
        env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
        env.update(WANDB_MODE="offline", WANDB_CONFIG_DIR=str(root / "wb-config"), WANDB_CACHE_DIR=str(root / "wb"),
                   WANDB_DATA_DIR=str(root / "wb-data"))
        print(f"run {run_id}: GSM8K 1,319 x {repeats} against the mock")
        for target in ("inspect", "mlflow", "wandb"):
            out = root / f"out-{target}"
            if target != "inspect":  # nel's artifacts, which a tracker keeps: written once, not timed here
                child(_ARTIFACTS, str(store), run_id, str(out), env=env)
            before = size_of(out) if out.exists() else 0
            wall, rss_kib, text = child(_EXPORT, str(store), run_id, str(out), target, env=env)
            inside = float(text.split()[0])
            written = (size_of(out) - before) / 1e6
            print(f"  {target:<8} {inside:6.1f} s inside the export ({wall:5.1f} s for the process); "
                  f"{written:7.1f} MB written; peak RSS {rss_kib / 1024:.0f} MB")
        load = os.getloadavg()
        print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
