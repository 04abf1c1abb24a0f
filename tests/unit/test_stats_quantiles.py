"""The t quantiles a summary needs come from a shipped table of scipy's own values: bit for bit the same, and
a run's closing summary no longer imports scipy (0.3 s of a short run's start)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from scipy import special

from workbench.stats.quantiles import TABLE_FILE, build_table, normal_quantile, t_quantile


def test_the_shipped_table_is_scipys_bit_for_bit() -> None:
    assert TABLE_FILE.read_bytes() == build_table()
    for df in (1, 2, 9, 199, 16384):
        assert t_quantile(df, 0.975) == float(special.stdtrit(df, 0.975))


def test_other_quantiles_are_scipys() -> None:
    assert t_quantile(16385, 0.975) == float(special.stdtrit(16385, 0.975))
    assert t_quantile(9, 0.8) == float(special.stdtrit(9, 0.8))
    assert t_quantile(2.5, 0.975) == float(special.stdtrit(2.5, 0.975))
    assert normal_quantile(0.975) == float(special.ndtri(0.975))
    assert normal_quantile(0.9) == float(special.ndtri(0.9))


def test_a_run_summary_does_not_import_scipy() -> None:
    code = ("import sys, numpy as np\n"
            "from workbench.analysis.run_summary import summarize\n"
            "s = summarize('r', n_tasks=200, n_repeats=4, attempts=np.full(200, 4), passes=np.arange(200) % 5,"
            " latency_ms=np.ones(800), failures={}, tokens={})\n"
            "assert s.pass_at_k[1].low < s.pass_at_k[1].value\n"
            "print('scipy' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    assert np.isfinite(t_quantile(3, 0.975))
