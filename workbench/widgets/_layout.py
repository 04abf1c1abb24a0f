"""How the widgets lay their charts out."""

from __future__ import annotations

from collections.abc import Sequence

import ipywidgets as w


def chart_row(children: Sequence[w.Widget]) -> w.HBox:
    """Charts side by side that wrap onto the next line when the notebook is narrower than they are (a plain
    ``HBox`` hides the last one behind a scroll bar)."""
    return w.HBox(list(children), layout=w.Layout(flex_flow="row wrap"))
