"""Benchmark: local shard workers. A script, not a test: run `python tests/perf/bench_shards.py`.

1. Throughput: GSM8K against the built-in mock model answering in 200 ms, `nel eval run --shards N` (the
   supervisor and its shard worker processes) with 1 shard and with 2 shards, each shard with the same
   work and the same concurrency. Steps/s is read from the store (steps over the span from the first step's
   start to the last step's end), so process start-up does not count. Target: 2 shards >= 1.8x 1 shard.
2. Merge: two finished shards of 100,000 steps each (made from a real 2-shard run whose segments are
   multiplied by repeats with DuckDB, so building them takes seconds, not an engine run), then `ingest`
   (what `nel eval merge` does before it exports) timed; merged again to show it is a no-op. Target < 5 s.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import orjson

from workbench.mock import mock_model
from workbench.store import ingest
from workbench.store.columns import sql_string
from workbench.store.ingest import live_steps_sql
from workbench.store.live import scan
from workbench.store.reader import Store

NEL = [sys.executable, "-m", "workbench.cli"]


def nel(*args: str) -> str:
    proc = subprocess.run([*NEL, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"nel {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def sharded_rate(url: str, root: Path, shards: int, problems_per_shard: int, repeats: int,
                 concurrency: int) -> tuple[int, float, float]:
    """Run ``shards`` workers in the foreground; return (steps, steps/s summed over the shards, each over
    its own span of steps, and steps/s over the whole span, which counts one worker starting after another)."""
    store = root / f"shards-{shards}" / "nel.duckdb"
    nel("eval", "run", "-b", "gsm8k", "--model-url", url, "--model-id", "nel-mock", "--repeats", str(repeats),
        "--max-problems", str(problems_per_shard * shards), "--max-concurrent", str(concurrency),
        "--shards", str(shards), "--store", str(store), "--output-dir", str(store.parent), "--no-progress")
    span = "epoch(max(started_at + to_milliseconds(latency_ms))) - epoch(min(started_at))"
    per_shard = Store(store).rows(f"SELECT count(*), {span} FROM steps GROUP BY shard_idx")
    n, whole = Store(store).rows(f"SELECT count(*), {span} FROM steps")[0]
    return int(n), sum(int(k) / float(t) for k, t in per_shard), int(n) / float(whole)


def build_big_shards(url: str, store: Path, steps_per_shard: int) -> None:
    """A real 2-shard run of GSM8K (1 repeat), each shard's steps then multiplied into ``steps_per_shard``
    rows (repeat r of every problem), written as one Parquet segment per shard, headers updated to match."""
    nel("eval", "run", "-b", "gsm8k", "--model-url", url, "--model-id", "nel-mock", "--repeats", "1",
        "--max-concurrent", "64", "--store", str(store), "--output-dir", str(store.parent), "--no-progress",
        "--run-id", "bench-merge", "--background", "--shards", "2")
    deadline = time.monotonic() + 120
    while True:  # wait for both shards to finish (the supervisor's merge is not wanted: stop it before)
        state = scan(store)
        if len(state.shards) == 2 and all(s.status == "complete" for s in state.shards):
            break
        if time.monotonic() > deadline:
            sys.exit("the shards did not finish")
        time.sleep(0.05)
    nel("eval", "stop", "bench-merge", "--store", str(store))
    con = duckdb.connect()
    for shard in scan(store).shards:
        source = f"source_{shard.shard['shard_idx']}"
        con.execute(f"CREATE TABLE {source} AS {live_steps_sql(shard.segments, shard.journals)}")
        row = con.execute(f"SELECT count(*) FROM {source}").fetchone()
        n = int(row[0]) if row else 0
        copies = -(-steps_per_shard // n)
        for old in [*shard.segments, *shard.journals]:
            old.unlink()
        for r in range(copies):  # one segment per repeat: about the 1,024-step segments a worker rolls
            rows = min(n, steps_per_shard - r * n)
            target = shard.dir.path / f"steps-{r + 1:06d}.parquet"
            con.execute(f"COPY (SELECT * REPLACE ({r} AS repeat) FROM {source} LIMIT {rows}) "
                        f"TO {sql_string(target)} (FORMAT parquet)")
        shard.dir.run_json.write_bytes(orjson.dumps(dict(shard.run, n_repeats=copies)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--concurrency", type=int, default=32, help="per shard")
    parser.add_argument("--problems", type=int, default=200, help="per shard")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--merge-steps", type=int, default=100_000, help="per shard")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with mock_model(latency_ms=args.latency_ms) as mock:
            n1, one, one_wall = sharded_rate(mock.base_url, root, 1, args.problems, args.repeats, args.concurrency)
            n2, two, two_wall = sharded_rate(mock.base_url, root, 2, args.problems, args.repeats, args.concurrency)
        print(f"throughput (mock {args.latency_ms:.0f} ms, concurrency {args.concurrency} per shard):")
        print(f"  1 shard   {n1:>7,} steps  {one:8.1f} steps/s  ({one_wall:.1f} over the whole span)")
        print(f"  2 shards  {n2:>7,} steps  {two:8.1f} steps/s  ({two_wall:.1f} over the whole span)  "
              f"ratio {two / one:.2f}x (target >= 1.8x; {two_wall / one_wall:.2f}x over the whole span)")

        store = root / "merge" / "nel.duckdb"
        with mock_model(latency_ms=0) as mock:
            start = time.perf_counter()
            build_big_shards(mock.base_url, store, args.merge_steps)
            built = time.perf_counter() - start
        start = time.perf_counter()
        report = ingest(store, bulk=True)  # what `nel eval merge` runs
        merge_s = time.perf_counter() - start
        start = time.perf_counter()
        again = ingest(store, bulk=True)
        again_s = time.perf_counter() - start
        total = Store(store).rows("SELECT count(*) FROM steps")[0][0]
        print(f"merge 2 x {args.merge_steps:,} steps (built in {built:.1f} s):")
        print(f"  ingest    {report.steps_added:,} steps from {report.shards_ingested} shards in {merge_s:.2f} s "
              f"({report.steps_added / merge_s:,.0f} steps/s; target < 5 s); run {report.runs}")
        print(f"  again     {again.steps_added} new steps in {again_s:.2f} s (idempotent); store holds {total:,}")


if __name__ == "__main__":
    main()
