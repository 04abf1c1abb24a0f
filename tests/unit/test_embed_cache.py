"""The offline chart JavaScript is bundled once per machine: the first kernel pays vl-convert's bundling
(about 1.5 s), later kernels read the same module from the cache."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROBE = """
import hashlib, sys, time
import altair as alt
from workbench.widgets.static import live_chart
t0 = time.perf_counter()
chart = live_chart(alt.Chart({"values": [{"x": 1}]}).mark_point().encode(x="x:Q"))
print(hashlib.sha256(chart._esm.encode()).hexdigest(), time.perf_counter() - t0)
"""


def probe(cache: Path) -> tuple[str, float]:
    env = {**os.environ, "NEL_CACHE_DIR": str(cache)}
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    digest, seconds = out.stdout.split()
    return digest, float(seconds)


def bundled() -> str:
    out = subprocess.run([sys.executable, "-c", "import hashlib, altair as alt; alt.JupyterChart.enable_offline(); "
                          "print(hashlib.sha256(alt.JupyterChart._esm.encode()).hexdigest())"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_the_second_kernel_reads_the_bundle_the_first_made_and_it_is_altairs_own(tmp_path):
    first, first_s = probe(tmp_path / "cache")
    [cached] = list((tmp_path / "cache").glob("jupyterchart-offline-*.js"))
    second, second_s = probe(tmp_path / "cache")
    assert first == second == bundled(), "the cached module is exactly what enable_offline bundles"
    assert cached.stat().st_size > 500_000 and "embed" in cached.read_text()
    assert second_s < first_s / 4, (first_s, second_s)


def test_an_empty_cache_file_is_bundled_again_and_an_unwritable_cache_is_no_error(tmp_path):
    cache = tmp_path / "cache"
    digest, _ = probe(cache)
    [cached] = list(cache.glob("*.js"))
    cached.write_text("")  # a file cut short: never a blank chart
    assert probe(cache)[0] == digest and cached.stat().st_size > 0
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    assert probe(blocked / "cache")[0] == digest
