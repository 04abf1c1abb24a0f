"""How much `pip install nel-workbench` puts on disk: the core alone (target: at most 700 MB), optionally [all].

Creates a fresh venv in a temporary directory, installs this source tree into it (not editable; dependencies
from the package index), then prints the size of its site-packages and of each distribution in it (the files
its RECORD lists), largest first. The verdict is on what the install adds: site-packages minus what a fresh venv
holds before it (pip, and setuptools on older Pythons).

    python tests/perf/bench_install_size.py            # the core
    python tests/perf/bench_install_size.py --all      # the core, then the core with [all]
    python tests/perf/bench_install_size.py --top 15   # list the 15 largest distributions (default 25)
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

TREE = Path(__file__).resolve().parents[2]
TARGET_MB = 700.0
MB = 1_000_000


def site_packages(env: Path) -> Path:
    found = sorted(env.glob("lib/python*/site-packages"))
    if not found:
        raise SystemExit(f"no site-packages under {env}")
    return found[0]


def directory_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def distribution_sizes(site: Path) -> dict[str, int]:
    """Each distribution's name and version → the bytes of the files its RECORD lists."""
    sizes: dict[str, int] = {}
    for record in sorted(site.glob("*.dist-info/RECORD")):
        total = 0
        with record.open(newline="") as fh:
            for row in csv.reader(fh):
                if not row:
                    continue
                file = (site / row[0]).resolve()
                if file.is_file():
                    total += file.stat().st_size
        sizes[record.parent.name.removesuffix(".dist-info")] = total
    return sizes


def measure(extras: str, top: int) -> float:
    with tempfile.TemporaryDirectory(prefix="nel-install-size-") as tmp:
        env = Path(tmp) / "venv"
        venv.EnvBuilder(with_pip=True).create(env)
        python = env / "bin" / "python"
        site = site_packages(env)
        before = directory_size(site)  # pip itself (and setuptools on older Pythons)
        what = f"{TREE}{extras}"
        started = time.monotonic()
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", what],
                       check=True)
        took = time.monotonic() - started
        total = directory_size(site)
        sizes = distribution_sizes(site)
        label = f"nel-workbench{extras or ''}" if extras else "nel-workbench (no extras)"
        print(f"\n== pip install {label}: {len(sizes)} distributions, installed in {took:.0f} s")
        print(f"site-packages total: {total / MB:,.1f} MB, of which the fresh venv's own (pip, setuptools) "
              f"{before / MB:,.1f} MB and the install's {(total - before) / MB:,.1f} MB")
        for name, size in sorted(sizes.items(), key=lambda kv: -kv[1])[:top]:
            print(f"  {size / MB:9,.1f} MB  {name}")
        rest = sorted(sizes.values(), reverse=True)[top:]
        if rest:
            print(f"  {sum(rest) / MB:9,.1f} MB  ({len(rest)} more)")
        return (total - before) / MB


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="also measure the install with [all]")
    parser.add_argument("--top", type=int, default=25, help="distributions to list (default 25)")
    args = parser.parse_args()
    core = measure("", args.top)
    verdict = "within" if core <= TARGET_MB else "ABOVE"
    print(f"\ncore: {core:,.1f} MB installed (site-packages minus the fresh venv's pip and setuptools), "
          f"{verdict} the {TARGET_MB:,.0f} MB target")
    if args.all:
        everything = measure("[all]", args.top)
        print(f"\n[all]: {everything:,.1f} MB ({everything - core:+,.1f} MB over the core)")
    return 0 if core <= TARGET_MB else 1


if __name__ == "__main__":
    sys.exit(main())
