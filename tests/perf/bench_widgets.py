"""Benchmark: the ScoreShift widget over two runs of 14,000 tasks x 8 repeats (issue 6). A script, not a test:
run it with the venv's python; ``--tasks N`` / ``--repeats R`` for another size.

Builds the two synthetic runs of ``bench_diagnose.py`` in memory (``RunData`` frames made with numpy and polars:
a U-shaped per-task skill, the candidate's nudged on a tenth of the tasks, 20 categories, three difficulties,
1 % transport errors), then times, in this process:
  1. ``diagnose`` of the pair (no evidence source: texts are read on demand when a task is opened);
  2. building the widget: the four charts' data, their Vega-Lite specs and the ``JupyterChart`` views;
  3. its static renderings (the PNG a saved notebook keeps, the inline SVG an HTML export shows), as
     ``display`` asks for them;
and their sum (target < 3 s). The first round is reported apart (it pays, once per process, vl-convert's
start and bundling vega-embed into the charts so they draw offline), then the best of three.
Imports (altair, ipywidgets, scipy: seconds) are not counted.
"""

from __future__ import annotations

import sys
import time

from bench_diagnose import make_run  # a sibling script: its synthetic runs


def main() -> None:
    n_tasks = int(sys.argv[sys.argv.index("--tasks") + 1]) if "--tasks" in sys.argv else 14_000
    repeats = int(sys.argv[sys.argv.index("--repeats") + 1]) if "--repeats" in sys.argv else 8
    start = time.perf_counter()
    from workbench.analysis.diagnosis.api import diagnose
    from workbench.widgets.score_shift import ScoreShift

    imports = time.perf_counter() - start
    base = make_run("base", n_tasks, repeats, shift=0.0, seed=11)
    cand = make_run("cand", n_tasks, repeats, shift=-0.004, seed=23)
    print(f"runs: 2 x {n_tasks:,} tasks x {repeats} repeats = {2 * n_tasks * repeats:,} attempts "
          f"(imports: {imports:.2f} s, not counted below)")
    rounds = []
    for _ in range(4):
        t0 = time.perf_counter()
        d = diagnose(base, cand)
        t1 = time.perf_counter()
        widget = ScoreShift.from_diagnosis(d, runs=(base, cand))
        t2 = time.perf_counter()
        bundle = widget._repr_mimebundle_()
        t3 = time.perf_counter()
        rounds.append((t1 - t0, t2 - t1, t3 - t2))
    assert "image/png" in bundle and "<svg" in bundle["text/html"]
    first, best = rounds[0], min(rounds[1:], key=sum)
    for name, (diag_s, build_s, static_s) in (("first round", first), ("best of 3 after it", best)):
        print(f"{name}: diagnose {diag_s:.3f} s, widget {build_s:.3f} s, static PNG+SVG {static_s:.3f} s, "
              f"total {diag_s + build_s + static_s:.3f} s (target < 3 s)")
    shift = widget.shift
    print(f"  {shift.n_paired:,} paired tasks, delta {shift.delta:+.4f}; scatter: {widget.scatter.points.height} "
          f"points{' (binned)' if widget.scatter.binned else ''}; PNG {len(bundle['image/png']) * 3 // 4:,} bytes, "
          f"HTML {len(bundle['text/html']):,} bytes")


if __name__ == "__main__":
    main()
