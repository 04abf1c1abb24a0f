"""The t and normal quantiles every interval needs, without importing scipy for the common case.

A run's closing summary needs Student's t quantile for its 95 % intervals, and importing ``scipy.special``
costs a process ~0.3 s (more than the rest of a short run). So the 97.5 % quantiles for 1 to ``TABLE_DF``
degrees of freedom ship as a table of scipy's own values (``t975.f64``, float64 little-endian: bit for bit
what ``scipy.special.stdtrit`` gives, checked by tests/unit/test_stats_quantiles.py, rebuilt by
``python -m workbench.stats.quantiles``), and the normal's as a constant; any other quantile is scipy's.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

TABLE_FILE = Path(__file__).with_name("t975.f64")
TABLE_DF = 16384
Z975 = 1.959963984540054
"""``scipy.special.ndtri(0.975)``."""


@functools.cache
def _table() -> np.ndarray:
    return np.frombuffer(TABLE_FILE.read_bytes(), dtype="<f8")


def t_quantile(df: float, p: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (``scipy.special.stdtrit``)."""
    if p == 0.975 and float(df).is_integer() and 1 <= df <= TABLE_DF:
        return float(_table()[int(df) - 1])
    from scipy import special

    return float(special.stdtrit(df, p))


def normal_quantile(p: float) -> float:
    """The ``p`` quantile of the standard normal (``scipy.special.ndtri``)."""
    if p == 0.975:
        return Z975
    from scipy import special

    return float(special.ndtri(p))


def build_table() -> bytes:
    """The table's bytes, from scipy."""
    from scipy import special

    return special.stdtrit(np.arange(1, TABLE_DF + 1, dtype=np.float64), 0.975).astype("<f8").tobytes()


if __name__ == "__main__":
    TABLE_FILE.write_bytes(build_table())
    print(f"wrote {TABLE_FILE} ({TABLE_DF} quantiles)")
