"""An HTML export of a notebook that reads offline even when the notebook carries widget state.

``jupyter nbconvert --to html`` of a notebook with saved widget state (``nbconvert --execute``, or JupyterLab's
"Save widget state") writes each widget as an empty ``<div>`` plus a script that fetches
``@jupyter-widgets/html-manager`` from unpkg.com (and require.js from cdnjs) to draw it: on an air-gapped
cluster every widget output stays blank. No Python package ships that manager (it is an npm package only), and
the altair charts inside our widgets would also need anywidget's module and a megabyte of vega-embed each.

So this export draws no widget at all: every output that carries a widget view *and* a static rendering (the
``text/html`` with inline SVG, or an image, that ``ScoreShift``, ``RunOverview``, ``RunPicker`` and
``static.enable()`` charts carry) keeps only the static one; a widget with no static rendering becomes one line
saying so; the widget state is dropped; and the page's template asks no CDN for anything (no require.js,
MathJax, mermaid or widget manager). The result is one self-contained file.

``jupyter nbconvert --to nel-html NB.ipynb`` (the ``nbconvert.exporters`` entry point), or, with any
exporter, ``--HTMLExporter.preprocessors='["workbench.widgets.html_export.StaticWidgetsPreprocessor"]'``.
JupyterLab lists the exporter under File → Save and Export Notebook As.
"""

from __future__ import annotations

import html
from typing import Any

from jinja2 import DictLoader
from nbconvert.exporters import HTMLExporter
from nbconvert.preprocessors import Preprocessor
from nbformat import NotebookNode
from traitlets import Bool, default

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
STATIC_TYPES = ("text/html", "image/svg+xml", "image/png", "image/jpeg", "text/markdown", "text/latex")
"""What a browser shows without JavaScript; any one of them stands in for a widget view."""
WIDGET_ONLY_NOTE = ("<p class='nel-widget-only'><i>{name}: an interactive widget without a static rendering; "
                    "it draws only in a running Jupyter.</i></p>")
TEMPLATE = "nel_offline.html.j2"
# The lab template with every block that names a CDN emptied: no widget manager (there is no widget state left),
# no require.js (only widget managers and application/javascript outputs use it), no MathJax or mermaid (their
# scripts come from cdnjs; offline, math shows as its TeX source and a diagram as its text).
_TEMPLATE_SOURCE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
"""


def static_output(output: NotebookNode) -> bool:
    """Rewrite one output so it draws without a widget manager; True when it held a widget view."""
    data = output.get("data")
    if not isinstance(data, dict) or WIDGET_VIEW not in data:
        return False
    del data[WIDGET_VIEW]
    if not any(kind in data for kind in STATIC_TYPES):
        name = str(data.get("text/plain", "widget")).splitlines()[0] if data.get("text/plain") else "widget"
        data["text/html"] = WIDGET_ONLY_NOTE.format(name=html.escape(name[:80]))
    return True


class StaticWidgetsPreprocessor(Preprocessor):  # type: ignore[misc]  # nbconvert is untyped
    """Replaces widget views by their static renderings and drops the notebook's widget state, so an HTML
    export neither loads a widget manager nor leaves blank outputs."""

    enabled = Bool(True, help="Replace widget views by their static renderings").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        replaced = sum(static_output(output) for cell in nb.cells if cell.get("cell_type") == "code"
                       for output in cell.get("outputs", []))
        nb.metadata.pop("widgets", None)
        resources["nel_static_widgets"] = replaced
        return nb, resources


class OfflineHTMLExporter(HTMLExporter):  # type: ignore[misc]  # nbconvert is untyped
    """HTML whose every chart and widget shows with no network: static renderings in place of widget views,
    and a page that loads nothing from a CDN."""

    export_from_notebook = "HTML (offline)"

    @default("extra_loaders")
    def _offline_template(self) -> list[DictLoader]:
        return [DictLoader({TEMPLATE: _TEMPLATE_SOURCE})]

    @default("template_file")
    def _offline_template_file(self) -> str:
        return TEMPLATE

    @default("default_preprocessors")
    def _static_widgets(self) -> list[Any]:
        # Last, so it sees what ``--execute`` (an earlier default preprocessor) produced.
        inherited = HTMLExporter.class_traits()["default_preprocessors"].default()
        return [*(inherited or []), StaticWidgetsPreprocessor]
