"""Charts that draw with no network, and static renderings of them, so a saved notebook reads without a live
kernel (on GitHub, in nbviewer, in ``jupyter nbconvert --to html``, in a diff).

Live charts are altair ``JupyterChart`` widgets whose JavaScript (vega-embed) altair would import from a CDN
at run time; on a GPU cluster without internet that is "Click to show javascript error". ``live_chart`` builds
them with the bundle vl-convert ships instead (``JupyterChart.enable_offline``), once per process.

A live widget saves as a widget view that only a running Jupyter can draw. So every display here carries
static renderings too: ``vl-convert`` renders the Vega-Lite spec in-process, without a browser, to an image
(PNG or SVG) and to ``text/html`` holding the chart's SVG inline. A front end picks what it can show: Jupyter
the interactive view (or, when the widget's model is gone, the HTML), nbconvert's HTML export the inline SVG,
image-only renderers the image. ``enable()`` makes plain altair charts do the same.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from typing import Any, Literal

import altair as alt
import vl_convert as vlc

StaticFormat = Literal["png", "svg"]
PNG, SVG, HTML = "image/png", "image/svg+xml", "text/html"
RENDERER = "nel-static"
SVG_STYLE = "<style>.nel-static text{font-family:'Liberation Sans',Arial,Helvetica,sans-serif}</style>"
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


def offline() -> None:
    """Make every ``JupyterChart`` built from now on carry vega-embed itself (vl-convert's bundle, about
    1 MB) instead of importing it from a CDN: charts draw in a JupyterLab with no internet. Idempotent; the
    bundle is made once per machine (``embed_cache``)."""
    from workbench.widgets.embed_cache import enable_offline_charts

    enable_offline_charts()


def live_chart(chart: alt.TopLevelSpec) -> alt.JupyterChart:
    """An interactive chart widget (selections reach Python) that draws with no network."""
    offline()
    return alt.JupyterChart(chart)


def svg_html(spec: dict[str, Any]) -> str:
    """``text/html`` showing the chart as inline SVG: what an HTML export draws in place of the live view."""
    # vl-convert measured the text with Liberation Sans (Arial's metrics); a browser may draw a wider font: ask
    # for the same metrics first, and let a label run over rather than be cut.
    svg = spec_to_svg(spec).replace("<svg ", "<svg style='overflow:visible' ", 1)
    return f"{SVG_STYLE}<div class='nel-static' style='padding:0 16px'>{svg}</div>"


def html_bundle(parts: Sequence[str]) -> dict[str, str]:
    """The ``text/html`` entry of a widget's static rendering: its HTML parts in display order."""
    return {HTML: "<div class='nel-static-widget'>" + "".join(parts) + "</div>"}


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
    """Altair renderer: an offline ``JupyterChart`` view for Jupyter (JupyterLab 4 draws Vega-Lite 5 only, and
    altair 6 writes 6), the Vega-Lite spec, inline SVG for HTML exports and an image for everything else."""
    fmt: StaticFormat = metadata.get("format", "png")
    answer = live_chart(alt.Chart.from_dict(spec))._repr_mimebundle_()
    view = (answer[0] if isinstance(answer, tuple) else answer) or {}  # ipywidgets answers (data, metadata)
    return {VEGALITE: spec, **image_bundle(spec, fmt), **html_bundle([svg_html(spec)]), **view,
            "text/plain": "<altair chart>"}


def enable(fmt: StaticFormat = "png") -> None:
    """Make every altair chart displayed from now on draw offline and carry static renderings beside its
    interactive view."""
    if RENDERER not in alt.renderers.names():
        alt.renderers.register(RENDERER, _renderer)
    alt.renderers.enable(RENDERER, format=fmt)


def widget_bundle(
    bundle: dict[str, Any],
    chart: Callable[[], alt.TopLevelMixin],
    fmt: StaticFormat | None,
    cache: dict[str, dict[str, str]] | None = None,
    *,
    before: Sequence[str] = (),
    after: Sequence[str] = (),
) -> dict[str, Any]:
    """A widget's MIME bundle with static renderings of ``chart()`` added (``fmt`` None: unchanged): an image
    in ``fmt`` and ``text/html`` (``before``, the chart as inline SVG, ``after``). With ``cache``, each is
    rendered once: displaying the widget again costs nothing."""
    if fmt is None:
        return bundle
    cache = {} if cache is None else cache
    if fmt not in cache or "svg-html" not in cache:
        spec = _spec(chart())
        if fmt not in cache:
            cache[fmt] = image_bundle(spec, fmt)
        if "svg-html" not in cache:
            cache["svg-html"] = {HTML: svg_html(spec)}
    return {**bundle, **cache[fmt], **html_bundle([*before, cache["svg-html"][HTML], *after])}
