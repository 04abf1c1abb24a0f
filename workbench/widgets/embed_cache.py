"""altair's offline ``JupyterChart`` JavaScript, bundled once per machine instead of once per process.

``JupyterChart.enable_offline`` has vl-convert bundle vega-embed into the widget's module: about 1.5 s, paid by
the first chart of every kernel. The bundle depends only on the altair and vl-convert versions and the
Vega-Lite version, so it is kept in a cache file keyed by them (``$NEL_CACHE_DIR``, else
``$XDG_CACHE_HOME/nel``, else ``~/.cache/nel``) and the next kernel loads it in milliseconds. Where the cache
cannot be written, or altair no longer keeps the module where this expects it, charts fall back to
``enable_offline`` (slower, same result).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import altair as alt


def cache_dir() -> Path:
    """Where nel keeps per-machine caches that are safe to delete."""
    explicit = os.environ.get("NEL_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "nel"


def _bundle_path() -> Path | None:
    """The cache file of this altair × vl-convert × Vega-Lite; None when a version cannot be read."""
    try:
        from altair.jupyter.jupyter_chart import load_js_src
        from altair.utils._importers import vl_version_for_vl_convert

        vl_convert = version("vl-convert-python")
    except (ImportError, PackageNotFoundError):
        return None
    source = hashlib.sha256(load_js_src().encode()).hexdigest()[:16]
    key = f"{alt.__version__}-{vl_convert}-{vl_version_for_vl_convert()}-{source}"
    return cache_dir() / f"jupyterchart-offline-{hashlib.sha256(key.encode()).hexdigest()[:20]}.js"


def enable_offline_charts() -> None:
    """``JupyterChart.enable_offline()``, from the cache when a kernel on this machine already bundled it.
    Idempotent."""
    chart = alt.JupyterChart
    if getattr(chart, "_is_offline", False):
        return
    path = _bundle_path()
    if path is not None and hasattr(chart, "_is_offline"):
        try:
            cached = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            cached = ""  # not cached yet (or unreadable): bundle it, then keep it
        if cached:
            chart._esm = cached
            chart._is_offline = True
            return
    chart.enable_offline(offline=True)
    if path is not None and getattr(chart, "_is_offline", False) and isinstance(getattr(chart, "_esm", None), str):
        _write_atomically(path, chart._esm)


def _write_atomically(path: Path, text: str) -> None:
    """Whole or not at all (two kernels may start at once); a cache that cannot be written is no error."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
