"""Chaos: the store's promises under `kill -9` and concurrent writers. A script, not a test:
`python tests/chaos/chaos_store.py [--kills 100] [--rounds 5]`.

0. Creation. ``--creation-kills`` SIGKILLs spread over the creation of a fresh store and its first ingest
   (tests/functional/test_store_kills.py, which the suite runs with 30): every store must open afterwards, with
   every step once.
1. Kills. ``--kills`` SIGKILLs at random moments of `nel eval run` and `nel eval merge`, cycling through four
   cases: an unsharded run into a fresh store, an unsharded run into a store that already holds runs, a shard of
   a two-shard run, and the merge of a two-shard run into a fresh store. After each kill the store must open
   (or not exist yet), and the command is run again (`--resume`, or the merge) until it exits 0; then every step
   is there exactly once with the reward an uninterrupted run gave it (the mock model is deterministic per task,
   repeat and request seed), the run's pass@1 equals the uninterrupted run's, and its export exists and agrees.
   It prints the counts: kills, unusable stores, steps lost or doubled, metric mismatches, missing exports.
2. Concurrency. ``--rounds`` rounds of four writers into one store (two unsharded runs, one run of two shard
   workers, one background run) while a `nel sql` loop and an in-process reader loop read with range filters:
   every writer must exit 0 with its artifacts, and no read may fail.

The machine's load is printed with the figures (os.getloadavg before and after).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from workbench.mock import mock_model
from workbench.store import open_store

NEL = str(Path(sys.executable).with_name("nel"))
PROBLEMS, REPEATS = 40, 4
STEPS = PROBLEMS * REPEATS
CASES = ("fresh store", "existing store", "shard of two", "merge into a fresh store")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEL_", "SLURM_"))}
    env.update(extra)
    return env


def _run_args(url: str, out: Path, run_id: str) -> list[str]:
    return [NEL, "eval", "run", "-b", "gsm8k", "--model-url", url, "--model-id", "nel-mock", "--repeats",
            str(REPEATS), "--max-problems", str(PROBLEMS), "--max-concurrent", "4", "--no-progress", "--output-dir",
            str(out), "--run-id", run_id, "--resume"]


@dataclass
class Tally:
    kills: int = 0
    unusable: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)
    exports: list[str] = field(default_factory=list)
    per_case: dict[str, int] = field(default_factory=dict)


def _usable(store: Path, tally: Tally, label: str) -> None:
    """After a kill: the store does not exist yet, or it opens and reads."""
    if not store.exists() and not store.with_name(store.name + ".segments").exists():
        return
    try:
        open_store(store).rows("SELECT count(*) FROM runs, steps")
    except Exception as exc:
        tally.unusable.append(f"{label}: {type(exc).__name__}: {exc}")


def _until_ok(argv: list[str], env: dict[str, str], label: str, tries: int = 6) -> None:
    for _ in range(tries):
        proc = subprocess.run(argv, env=env, capture_output=True, text=True)
        if proc.returncode == 0:
            return
    raise SystemExit(f"{label}: `{' '.join(argv[1:4])} ...` never succeeded:\n{proc.stdout}\n{proc.stderr}")


def _kill_at(argv: list[str], env: dict[str, str], delay: float) -> None:
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def _check(store: Path, run_id: str, reference: dict[tuple[int, int], float], ref_pass: float, tally: Tally,
           label: str) -> None:
    s = open_store(store)
    rows = s.rows("SELECT task_idx, repeat, reward FROM steps WHERE run_id = ?", [run_id])
    got = {(int(i), int(r)): float(w) for i, r, w in rows}
    if len(rows) != STEPS or got != reference:
        differ = sum(got.get(key) != reward for key, reward in reference.items())
        tally.lost.append(f"{label}: {len(rows)} rows, {len(got)} distinct, {differ} differ from the uninterrupted run")
    pass_at_1 = s.rows("SELECT pass_at_1 FROM run_metrics WHERE run_id = ?", [run_id])
    if not pass_at_1 or abs(float(pass_at_1[0][0]) - ref_pass) > 1e-12:
        tally.metrics.append(f"{label}: pass@1 {pass_at_1} vs {ref_pass}")
    bundle = store.parent / "runs" / run_id / f"eval-{run_id}.json"
    try:
        data = orjson.loads(bundle.read_bytes())
        if data["n_steps"] != STEPS or data["status"] != "complete":
            tally.exports.append(f"{label}: export says {data['n_steps']} steps, {data['status']}")
    except (OSError, orjson.JSONDecodeError, KeyError) as exc:
        tally.exports.append(f"{label}: no export ({exc})")


def kill_campaign(url: str, root: Path, kills: int, rng: random.Random) -> Tally:
    reference_dir = root / "reference"
    start = time.monotonic()
    _until_ok(_run_args(url, reference_dir, "ref"), _env(), "reference run")
    span = time.monotonic() - start
    ref_rows = open_store(reference_dir).rows("SELECT task_idx, repeat, reward FROM steps")
    reference = {(int(i), int(r)): float(w) for i, r, w in ref_rows}
    ref_pass = float(open_store(reference_dir).rows("SELECT pass_at_1 FROM run_metrics")[0][0])
    print(f"uninterrupted run: {STEPS} steps in {span:.2f} s (process start included), pass@1 {ref_pass:.4f}")
    tally = Tally()
    k = 0
    while tally.kills < kills:
        case = CASES[k % len(CASES)]
        out = root / f"case-{k:03d}"
        run_id = f"k{k:03d}"
        label = f"#{k} {case}"
        if case == "existing store":
            shutil.copytree(reference_dir, out)  # a store with a run (and its export) already in it
        argv = _run_args(url, out, run_id)
        n_kills = rng.randint(1, 3)  # killed once or more before it is let finish
        if case in ("fresh store", "existing store"):
            for _ in range(n_kills):
                _kill_at(argv, _env(), rng.uniform(0.05, 1.1) * span)
                tally.kills += 1
                _usable(out / "nel.duckdb", tally, label)
            _until_ok(argv, _env(), label)
        else:
            shards = [_env(NEL_SHARD_IDX=str(i), NEL_TOTAL_SHARDS="2") for i in (0, 1)]
            merge = [NEL, "eval", "merge", str(out)]
            if case == "shard of two":
                victim = rng.randint(0, 1)
                for _ in range(n_kills):
                    _kill_at(argv, shards[victim], rng.uniform(0.05, 1.0) * span)
                    tally.kills += 1
                    _usable(out / "nel.duckdb", tally, label)
                for env in shards:
                    _until_ok(argv, env, label)
            else:
                for env in shards:
                    _until_ok(argv, env, label)
                for _ in range(n_kills):  # a merge takes a fraction of a run: kill early in it
                    _kill_at(merge, _env(), rng.uniform(0.05, 0.6) * span)
                    tally.kills += 1
                    _usable(out / "nel.duckdb", tally, label)
            _until_ok(merge, _env(), label)
            merged = open_store(out).rows("SELECT run_id FROM runs WHERE total_shards = 2")
            run_id = str(merged[0][0]) if merged else run_id
        _check(out / "nel.duckdb", run_id, reference, ref_pass, tally, label)
        tally.per_case[case] = tally.per_case.get(case, 0) + n_kills
        shutil.rmtree(out, ignore_errors=True)
        k += 1
    return tally


def concurrency_campaign(url: str, root: Path, rounds: int) -> tuple[int, int, int, int]:
    """(writers, non-zero exits or missing artifacts, reads, read errors) over ``rounds`` rounds."""
    writers = bad = reads = read_errors = 0
    for round_ in range(rounds):
        out = root / f"round-{round_}"
        store = out / "nel.duckdb"
        stop = threading.Event()
        errors: list[str] = []
        count = [0]

        def read_loop(use_cli: bool, out: Path = out, store: Path = store, stop: threading.Event = stop,
                      errors: list[str] = errors, count: list[int] = count) -> None:
            while not stop.is_set():
                if not store.exists() and not store.with_name(store.name + ".segments").exists():
                    time.sleep(0.05)
                    continue
                try:
                    if use_cli:
                        proc = subprocess.run([NEL, "sql", "SELECT run_id, count(*) FROM steps WHERE task_idx "
                                               "BETWEEN 3 AND 40 GROUP BY ALL", "--store", str(store), "--format",
                                               "json"], capture_output=True, text=True, env=_env())
                        if proc.returncode != 0:
                            errors.append(proc.stderr.strip())
                    else:
                        open_store(store).rows("SELECT task_idx, response FROM steps WHERE task_idx BETWEEN 2 AND 30")
                except Exception as exc:
                    errors.append(f"{type(exc).__name__}: {exc}")
                count[0] += 1

        threads = [threading.Thread(target=read_loop, args=(cli,), daemon=True) for cli in (True, False)]
        for t in threads:
            t.start()

        def start(*extra: str, bench: str = "gsm8k", out: Path = out) -> subprocess.Popen[bytes]:
            return subprocess.Popen([NEL, "eval", "run", "-b", bench, "--model-url", url, "--model-id", "nel-mock",
                                     "--max-problems", "60", "--repeats", "4", "--max-concurrent", "8",
                                     "--no-progress", "--output-dir", str(out), *extra],
                                    env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

        procs = [start(), start(bench="unit_conversion_mc"), start("--shards", "2", bench="element_symbols_qa"),
                 start("--background", "--run-id", f"bg-{round_}")]
        codes = [p.wait() for p in procs]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and _background_status(store, f"bg-{round_}") not in ("complete", "failed"):
            time.sleep(0.2)
        stop.set()
        for t in threads:
            t.join()
        writers += len(procs)
        bad += sum(code != 0 for code in codes)
        bad += _background_status(store, f"bg-{round_}") != "complete"
        for run_id, expected in open_store(store).rows("SELECT run_id, n_tasks * n_repeats FROM runs"):
            bundle = out / "runs" / run_id / f"eval-{run_id}.json"
            if not bundle.exists() or orjson.loads(bundle.read_bytes())["n_steps"] != expected:
                bad += 1
        reads += count[0]
        read_errors += len(errors)
        for line in errors[:2]:
            print(f"  round {round_} read error: {line}")
        print(f"  round {round_}: exits {codes}, {count[0]} reads, {len(errors)} read errors")
    return writers, bad, reads, read_errors


def _background_status(store: Path, run_id: str) -> str | None:
    proc = subprocess.run([NEL, "eval", "status", run_id, "--store", str(store), "--format", "json"],
                          capture_output=True, text=True, env=_env())
    if proc.returncode != 0:
        return None
    launches: list[dict[str, Any]] = orjson.loads(proc.stdout)["launches"]
    return str(launches[0]["status"]) if launches else None


def creation_campaign(points: int) -> tuple[str, bool]:
    """The suite's creation-kill test with ``points`` kills: its summary line, and whether it passed."""
    test = Path(__file__).resolve().parents[1] / "functional" / "test_store_kills.py"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                           f"{test}::test_a_kill_anywhere_while_a_store_is_created_leaves_no_unusable_store"],
                          env=_env(NEL_CREATION_KILLS=str(points)), capture_output=True, text=True)
    line = next((x for x in proc.stdout.splitlines() if "kills over" in x), proc.stdout[-500:])
    return line, proc.returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--creation-kills", type=int, default=100)
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=14)
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    root = Path(tempfile.mkdtemp(prefix="nel-chaos-"))
    creation, creation_ok = creation_campaign(args.creation_kills)
    print(f"creation: {creation.strip()}")
    try:
        with mock_model(latency_ms=10) as mock:  # the run spends ~0.4 s in its loop: kills land there too
            started = time.monotonic()
            tally = kill_campaign(mock.base_url, root / "kills", args.kills, random.Random(args.seed))
            print(f"kills: {tally.kills} SIGKILLs ({', '.join(f'{c}: {n}' for c, n in tally.per_case.items())}) "
                  f"in {time.monotonic() - started:.0f} s")
            print(f"  unusable stores          {len(tally.unusable)}")
            print(f"  steps lost or doubled    {len(tally.lost)}")
            print(f"  metrics != uninterrupted {len(tally.metrics)}")
            print(f"  missing exports          {len(tally.exports)}")
            for problem in (tally.unusable + tally.lost + tally.metrics + tally.exports)[:10]:
                print(f"    {problem}")
            with mock_model(latency_ms=5) as paced:
                writers, bad, reads, read_errors = concurrency_campaign(paced.base_url, root / "writers", args.rounds)
            print(f"concurrency: {args.rounds} rounds x 4 writers + 2 readers: {writers} writers, {bad} non-zero exits "
                  f"or missing artifacts, {reads} reads, {read_errors} reader errors")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    failed = not creation_ok or tally.unusable or tally.lost or tally.metrics or tally.exports or bad or read_errors
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
