"""``jupyter nbconvert --to nel-html``: a notebook that carries widget state (executed by nbconvert, or saved by
JupyterLab with "Save widget state") exports to a page that shows every widget with no network. Plain
``--to html`` of such a notebook leaves each widget an empty box waiting for a widget manager from unpkg.com.

The browser test executes a notebook using ``RunPicker``, ``ScoreShift`` and ``RunOverview`` on the mock's store
with widget state stored, exports it with the real ``jupyter nbconvert`` command line, and opens the page in
Debian's Chromium with the network blocked (the fixtures of ``test_jupyterlab_browser``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import nbformat
import pytest
from conftest import BASELINE, CANDIDATE, KERNEL
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbconvert.exporters import HTMLExporter, get_exporter

from workbench.widgets.html_export import WIDGET_VIEW, OfflineHTMLExporter, StaticWidgetsPreprocessor

ROOT = Path(__file__).resolve().parents[2]
EXPORTER = "workbench.widgets.html_export.OfflineHTMLExporter"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
CDN = re.compile(r"unpkg\.com|cdnjs\.|jsdelivr\.net")
REMOTE_LOAD = re.compile(r"""(?:\bsrc\s*=\s*|\bhref\s*=\s*|url\(\s*|import\(\s*)["']?(?:https?:)?//""", re.I)
"""A reference the browser would fetch: script/img/link sources, CSS ``url()``, dynamic ``import()``."""
CELLS = [
    "import os\nfrom workbench.widgets import RunOverview, RunPicker, ScoreShift\nstore = os.environ['NEL_STORE']",
    "RunPicker(store)",
    f"ScoreShift({BASELINE!r}, {CANDIDATE!r}, store=store)",
    f"RunOverview({BASELINE!r}, store=store)",
    "import ipywidgets\nipywidgets.IntSlider(3)",
]


def widget_output(static: dict[str, str], model_id: str = "m1") -> nbformat.NotebookNode:
    return nbformat.v4.new_output("display_data", data={
        WIDGET_VIEW: {"version_major": 2, "version_minor": 0, "model_id": model_id}, "text/plain": "VBox()", **static})


def notebook_with_state(*outputs: nbformat.NotebookNode) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("w", outputs=list(outputs))]
    nb.metadata["widgets"] = {WIDGET_STATE: {"version_major": 2, "version_minor": 0, "state": {"m1": {}, "m2": {}}}}
    return nb


def test_a_widget_view_gives_way_to_its_static_rendering_and_the_widget_state_is_dropped() -> None:
    nb = notebook_with_state(widget_output({"text/html": "<div class='nel-static-widget'>chart</div>",
                                            "image/png": "iVBORw0KGgo="}))
    nb, resources = StaticWidgetsPreprocessor().preprocess(nb, {})
    data = nb.cells[0].outputs[0].data
    assert WIDGET_VIEW not in data and data["text/html"] == "<div class='nel-static-widget'>chart</div>"
    assert "widgets" not in nb.metadata and resources["nel_static_widgets"] == 1


def test_a_widget_without_static_rendering_says_so_in_one_escaped_line() -> None:
    slider = nbformat.v4.new_output("display_data", data={WIDGET_VIEW: {"model_id": "m2"},
                                                          "text/plain": "IntSlider(<b>3</b>)\nmore"})
    nb = notebook_with_state(slider)
    nb, _ = StaticWidgetsPreprocessor().preprocess(nb, {})
    note = nb.cells[0].outputs[0].data["text/html"]
    assert "IntSlider(&lt;b&gt;3&lt;/b&gt;): an interactive widget without a static rendering" in note
    assert "more" not in note


def test_the_offline_page_names_no_cdn_where_plain_html_loads_the_widget_manager_from_unpkg() -> None:
    nb = notebook_with_state(widget_output({"text/html": "<p>static</p>"}))
    plain, _ = HTMLExporter().from_notebook_node(nbformat.from_dict(nb))
    offline, _ = OfflineHTMLExporter().from_notebook_node(nb)
    assert "unpkg.com/@jupyter-widgets/html-manager" in plain and CDN.search(plain)
    assert CDN.search(offline) is None and REMOTE_LOAD.search(offline) is None
    assert "<p>static</p>" in offline and WIDGET_VIEW not in offline and WIDGET_STATE not in offline


def test_nbconvert_finds_the_exporter_by_its_entry_point_name_and_by_class_path() -> None:
    entry = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["nbconvert.exporters"]
    module, _, name = entry["nel-html"].partition(":")
    assert f"{module}.{name}" == EXPORTER
    assert get_exporter(EXPORTER) is OfflineHTMLExporter
    assert OfflineHTMLExporter.export_from_notebook  # listed in JupyterLab's "Save and Export Notebook As"


def execute_with_widget_state(kernel_specs: KernelSpecManager, store: Path, where: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NEL_STORE", str(store))
        km = AsyncKernelManager(kernel_name=KERNEL, kernel_spec_manager=kernel_specs)
        NotebookClient(nb, km=km, timeout=120, store_widget_state=True,
                       resources={"metadata": {"path": str(where)}}).execute()
    assert WIDGET_STATE in nb.metadata.get("widgets", {}), "nbclient stored no widget state"
    path = where / "widgets.ipynb"
    nbformat.write(nb, path)
    return path


@pytest.mark.timeout(120)
def test_a_notebook_with_widget_state_exports_to_html_that_shows_every_widget_offline(
        kernel_specs: KernelSpecManager, store: Path, tmp_path: Path) -> None:
    chromium = pytest.importorskip("test_jupyterlab_browser", reason="selenium is in the [test] extra")
    if chromium.CHROMIUM is None or chromium.CHROMEDRIVER is None:
        pytest.skip("needs Debian's chromium and chromium-driver (`make system` installs them)")
    notebook = execute_with_widget_state(kernel_specs, store, tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
    subprocess.run([sys.executable, "-m", "nbconvert", "--to", EXPORTER, str(notebook)], check=True,
                   capture_output=True, timeout=120, env=env, cwd=tmp_path)
    page = notebook.with_suffix(".html")
    text = page.read_text()
    assert CDN.search(text) is None and REMOTE_LOAD.search(text) is None, "the page names a remote script"

    browser = chromium.offline_chromium(tmp_path / "chromium")
    try:
        chromium.requests_made(browser)
        browser.get(page.as_uri())
        widgets = browser.find_elements("css selector", ".nel-static-widget")
        charts = browser.find_elements("css selector", ".nel-static-widget .nel-static > svg")
        rows = browser.find_elements("css selector", ".nel-static-widget table.nel-table tbody tr")
        body = browser.find_element("css selector", "body").text
        shots = Path(os.environ.get("NEL_SCREENSHOT_DIR") or tmp_path)
        shots.mkdir(parents=True, exist_ok=True)
        chromium.screenshot_charts(browser, shots, "nel-html-widgets")
        assert len(widgets) == 3, f"{len(widgets)} static widgets: RunPicker, ScoreShift and RunOverview expected"
        assert len(charts) == 2 and all(c.size["width"] > 200 and c.size["height"] > 100 for c in charts), \
            [c.size for c in charts]
        assert BASELINE in body and CANDIDATE in body and len(rows) >= 2  # the picker's table lists both runs
        assert "Δ pass@1" in body and "IntSlider(value=3): an interactive widget without a static rendering" in body
        assert chromium.off_loopback(chromium.requests_made(browser)) == []
    finally:
        browser.quit()
