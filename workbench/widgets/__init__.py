"""Notebook widgets (ipywidgets + altair) over the headless analysis: ``RunPicker``, ``ScoreShift``,
``RunOverview``; ``charts`` (pure chart functions, usable without ipywidgets) and ``static`` (PNG/SVG
renderings, so a saved notebook reads without a kernel).

Widgets lay out what ``workbench.analysis`` computes; they never compute statistics themselves. Imported
lazily: ``from workbench.widgets import charts`` does not pay for ipywidgets. They are the ``[notebook]`` extra:
without it, importing this package is an ``ImportError`` that names the install command.
"""

from __future__ import annotations

import importlib
from typing import Any

from workbench.extras import require

require("notebook", "workbench.widgets")  # an ImportError naming the install command (nothing is imported yet)

_LAZY = {
    "RunPicker": "run_picker",
    "ScoreShift": "score_shift",
    "RunOverview": "run_overview",
    "show_static": "static",
    "find_store": "store_location",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'workbench.widgets' has no attribute {name!r}")
    return getattr(importlib.import_module(f"workbench.widgets.{module}"), name)


__all__ = list(_LAZY)
