"""Static renderings of charts and widgets, so a saved notebook reads without a live kernel (on GitHub,
in nbviewer, in a diff).

A live widget saves as a widget view that only a running Jupyter can draw. So every display here carries
an image too: ``vl-convert`` renders the Vega-Lite spec to PNG (or SVG) in-process, without a browser, and
the image travels in the same output as the interactive view. A front end picks what it can show: Jupyter
the interactive view, GitHub the image. ``enable()`` makes plain altair charts do the same.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any, Literal

import altair as alt
import vl_convert as vlc

StaticFormat = Literal["png", "svg"]
PNG, SVG = "image/png", "image/svg+xml"
RENDERER = "nel-static"
VEGALITE = f"application/vnd.vegalite.v{alt.SCHEMA_VERSION.lstrip('v').split('.')[0]}+json"
"""The Vega-Lite MIME type of altair's schema version, as Jupyter front ends name it."""
_SCALE = 1.0  # PNG pixels per chart pixel; 2 doubles the size of every saved notebook


def _spec(chart: alt.TopLevelMixin) -> dict[str, Any]:
    return chart.to_dict()


def _vl_version(spec: dict[str, Any]) -> str | None:
    """The Vega-Lite version vl-convert should use: the one altair wrote the spec for ("v6.4.1" → "6.4")."""
    schema = str(spec.get("$schema", ""))
    version = schema.rsplit("/", 1)[-1].removesuffix(".json").lstrip("v")
    return ".".join(version.split(".")[:2]) or None


def spec_to_png(spec: dict[str, Any], scale: float = _SCALE) -> bytes:
    return bytes(vlc.vegalite_to_png(spec, vl_version=_vl_version(spec), scale=scale))


def spec_to_svg(spec: dict[str, Any]) -> str:
    return str(vlc.vegalite_to_svg(spec, vl_version=_vl_version(spec)))


def to_png(chart: alt.TopLevelMixin, scale: float = _SCALE) -> bytes:
    """The chart as PNG bytes (no browser, no kernel)."""
    return spec_to_png(_spec(chart), scale)


def to_svg(chart: alt.TopLevelMixin) -> str:
    """The chart as an SVG document."""
    return spec_to_svg(_spec(chart))


def image_bundle(spec: dict[str, Any], fmt: StaticFormat = "png") -> dict[str, str]:
    """The MIME entry of a static image of ``spec``, as a notebook stores it (PNG base64-encoded)."""
    if fmt == "svg":
        return {SVG: spec_to_svg(spec)}
    return {PNG: base64.b64encode(spec_to_png(spec)).decode("ascii")}


class StaticChart:
    """A chart displayed as an image only: for outputs that must read the same everywhere."""

    def __init__(self, chart: alt.TopLevelMixin, fmt: StaticFormat = "png") -> None:
        self.chart = chart
        self.fmt: StaticFormat = fmt

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {**image_bundle(_spec(self.chart), self.fmt), "text/plain": f"<{type(self.chart).__name__} (static)>"}


def show_static(obj: Any, fmt: StaticFormat = "png") -> StaticChart:
    """A static image of a chart, or of a widget of this package (its ``static_chart()``), for ``display``."""
    chart = obj.static_chart() if hasattr(obj, "static_chart") else obj
    return StaticChart(chart, fmt)


def _renderer(spec: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    """Altair renderer: the Vega-Lite view for Jupyter plus an image for everything else."""
    fmt: StaticFormat = metadata.get("format", "png")
    return {VEGALITE: spec, **image_bundle(spec, fmt), "text/plain": "<altair chart>"}


def enable(fmt: StaticFormat = "png") -> None:
    """Make every altair chart displayed from now on carry a static image beside its interactive view."""
    if RENDERER not in alt.renderers.names():
        alt.renderers.register(RENDERER, _renderer)
    alt.renderers.enable(RENDERER, format=fmt)


def widget_bundle(
    bundle: dict[str, Any],
    chart: Callable[[], alt.TopLevelMixin],
    fmt: StaticFormat | None,
    cache: dict[str, dict[str, str]] | None = None,
) -> dict[str, Any]:
    """A widget's MIME bundle with a static image of ``chart()`` added (``fmt`` None: unchanged). With
    ``cache``, the image is rendered once per format: displaying the widget again costs nothing."""
    if fmt is None:
        return bundle
    if cache is None:
        return {**bundle, **image_bundle(_spec(chart()), fmt)}
    if fmt not in cache:
        cache[fmt] = image_bundle(_spec(chart()), fmt)
    return {**bundle, **cache[fmt]}
