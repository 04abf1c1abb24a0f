"""The notebooks in a real JupyterLab, in a real browser, with the network blocked: what a user on a GPU cluster
without internet sees. ``jupyter lab`` runs on loopback; Debian's Chromium (headless, driven by Debian's
chromedriver through Selenium, nothing downloaded) opens each notebook, runs all its cells, and then every chart
must have drawn its marks (SVG or canvas), no "JavaScript Error" may show, and no request may have left
loopback. The notebook saved from JupyterLab and exported with ``jupyter nbconvert --to html`` must show every
chart as SVG in the same offline browser. Screenshots land in ``$NEL_SCREENSHOT_DIR`` (else a temporary
directory; the path is printed)."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from conftest import BASELINE, CANDIDATE, NOTEBOOKS

from workbench.analysis.diagnosis.api import diagnose
from workbench.analysis.diagnosis.types import RunProfile
from workbench.analysis.sources import load_run
from workbench.analysis.triage import runs_table
from workbench.store import open_store

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(CHROMIUM is None or CHROMEDRIVER is None,
                       reason="needs Debian's chromium and chromium-driver (`make system` installs them)"),
]
pytest.importorskip("selenium.webdriver", reason="selenium is in the [test] extra")
from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import TimeoutException  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

MARKS = ".vega-embed svg.marks, .vega-embed canvas.marks"
"""What Vega draws a chart into (vega-embed's menu icon is an svg too, without the class)."""
LOCAL_SCHEMES = ("data", "blob", "about", "chrome", "devtools", "file")
NBCONVERT_TEMPLATE = ("https://cdnjs.cloudflare.com/ajax/libs/require.js/", "https://cdnjs.cloudflare.com/ajax/libs/mathjax/")
"""What nbconvert's own HTML template asks a CDN for (require.js, MathJax), charts or not; offline these fail
and the page reads without them. Nothing else may leave loopback."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def shots() -> Path:
    where = Path(os.environ.get("NEL_SCREENSHOT_DIR") or tempfile.mkdtemp(prefix="nel-notebook-shots-"))
    where.mkdir(parents=True, exist_ok=True)
    print(f"screenshots in {where}")
    return where


@pytest.fixture(scope="module")
def lab(store: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """``jupyter lab`` on 127.0.0.1 over a copy of the notebooks, reading the test store: (base URL with token,
    root directory)."""
    home = tmp_path_factory.mktemp("lab")
    root = home / "root"
    root.mkdir()
    for notebook in NOTEBOOKS.glob("*.ipynb"):
        shutil.copy(notebook, root / notebook.name)
    settings = home / "settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    # Every cell in the DOM (JupyterLab 4 skips painting cells out of view), so every chart draws.
    (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    notices = home / "settings" / "@jupyterlab" / "apputils-extension"
    notices.mkdir(parents=True)  # no "get Jupyter news?" toast over the screenshots (nor a request for it)
    (notices / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    port, token = free_port(), secrets.token_hex(16)
    env = {**os.environ, "NEL_STORE": str(store), "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"), "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
           "IPYTHONDIR": str(home / "ipython"), "PYTHONPATH": os.pathsep.join(filter(None, (
               str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH"))))}
    log = (home / "lab.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
         "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        env=env, stdout=subprocess.DEVNULL, stderr=log, cwd=root)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5).read()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"jupyter lab did not start: {(home / 'lab.log').read_text()[-2000:]}")
                time.sleep(0.3)
        yield f"{base}/lab/tree/{{name}}?reset&token={token}", root
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def offline_chromium(profile: Path) -> webdriver.Chrome:
    """Headless Chromium that can reach loopback only: every host name resolves to nothing, and anything not
    for 127.0.0.1/localhost goes to a proxy port where nothing listens. ``profile``: its user data directory."""
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--window-size=1400,1600", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-default-apps", "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
                f"--proxy-server=http://127.0.0.1:{free_port()}", "--proxy-bypass-list=127.0.0.1;localhost",
                f"--user-data-dir={profile}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=str(CHROMEDRIVER)))
    driver.set_script_timeout(240)
    return driver


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    driver = offline_chromium(tmp_path_factory.mktemp("chromium"))
    try:
        yield driver
    finally:
        driver.quit()


def requests_made(driver: webdriver.Chrome) -> list[str]:
    """The URLs the browser asked for since the last call (Chromium's performance log)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
        elif message["method"] == "Network.webSocketCreated":
            urls.append(message["params"]["url"])
    return urls


def off_loopback(urls: list[str], allowed: tuple[str, ...] = ()) -> list[str]:
    return [u for u in urls if urlsplit(u).scheme not in LOCAL_SCHEMES
            and urlsplit(u).hostname not in ("127.0.0.1", "localhost") and not u.startswith(allowed)]


RUN_ALL = """
const done = arguments[arguments.length - 1];
const tick = () => new Promise(r => setTimeout(r, 100));
(async () => {
  const app = window.jupyterapp;
  let panel;
  while (!(panel = app.shell.currentWidget) || !panel.sessionContext) { await tick(); }
  await panel.context.ready;
  await panel.sessionContext.ready;
  const kernel = () => panel.sessionContext.session && panel.sessionContext.session.kernel;
  while (!kernel() || kernel().connectionStatus !== 'connected' || kernel().status !== 'idle') { await tick(); }
  await app.commands.execute('notebook:run-all-cells');
  const code = panel.content.widgets.filter(c => c.model.type === 'code');
  while (code.some(c => !c.model.executionCount) || kernel().status !== 'idle') { await tick(); }
  await app.commands.execute('docmanager:save');
  const stderr = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]';
  const errors = [...panel.node.querySelectorAll(stderr)].map(e => e.textContent).filter(t => t.includes('Error'));
  done(errors);
})().catch(e => done(['script: ' + e]));
"""
CHARTS = "return window.jupyterapp.shell.currentWidget.node.querySelectorAll(arguments[0]).length"


def run_notebook(driver: webdriver.Chrome, url: str) -> None:
    """Open the notebook alone (``reset``: no tab of an earlier one), run every cell, wait until each has run
    and the kernel is idle, save."""
    driver.get(url)
    WebDriverWait(driver, 120).until(lambda d: d.execute_script("return !!window.jupyterapp"))
    errors = driver.execute_async_script(RUN_ALL)
    assert errors == [], errors


def charts_drawn(driver: webdriver.Chrome, expected: int) -> int:
    """Wait until ``expected`` charts of the open notebook drew their marks (or 90 s passed); how many did."""
    def count(d: webdriver.Chrome) -> int:
        return int(d.execute_script(CHARTS, MARKS))

    with contextlib.suppress(TimeoutException):  # the assertion after says how many drew
        WebDriverWait(driver, 90, poll_frequency=0.25).until(lambda d: count(d) >= expected)
    return count(driver)


def screenshot_charts(driver: webdriver.Chrome, shots: Path, name: str) -> None:
    """One screenshot per output holding a chart, scrolled into view, plus the page."""
    outputs = driver.find_elements("css selector", ".jp-OutputArea-child:has(.vega-embed), .nel-static-widget,"
                                                   " body > .nel-static")
    for i, output in enumerate(o for o in outputs if o.size["width"] and o.size["height"]):
        driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", output)
        output.screenshot(str(shots / f"{name}-{i:02d}.png"))
    driver.save_screenshot(str(shots / f"{name}-page.png"))


def failure_plot(store: Path) -> int:
    """explore.ipynb's failure-category plot: drawn when some attempt of some run has a failure category."""
    return int(not open_store(store).sql("SELECT 1 FROM failure_counts LIMIT 1").is_empty())


def expected_charts(store: Path) -> dict[str, int]:
    """Live charts each notebook draws: explore: the pass-count plot, the failure plot (when any attempt failed
    with a category) and one RunOverview; diagnose: ScoreShift, two RunOverviews, two plain charts. A chart with
    nothing to draw is a sentence instead."""
    d = diagnose(load_run(BASELINE, store=store), load_run(CANDIDATE, store=store))
    assert d.shift is not None

    def overview(profile: RunProfile) -> int:
        return 2 + bool(profile.failures)

    newest = runs_table(open_store(store))[0].run_id  # the run explore.ipynb's picker starts on
    picked = d.baseline.profile if newest == BASELINE else d.candidate.profile
    return {"explore.ipynb": 1 + failure_plot(store) + overview(picked),
            "diagnose.ipynb": 3 + bool(d.shift.slices) + overview(d.baseline.profile) + overview(d.candidate.profile)
            + 2}


@pytest.mark.parametrize("name", ["explore.ipynb", "diagnose.ipynb"])
def test_notebook_runs_offline_in_jupyterlab_and_its_html_export_shows_every_chart(
        name: str, lab: tuple[str, Path], browser: webdriver.Chrome, store: Path, shots: Path) -> None:
    url, root = lab
    expected = expected_charts(store)[name]
    requests_made(browser)  # forget what came before
    run_notebook(browser, url.format(name=name))
    drawn = charts_drawn(browser, expected)
    page_text = browser.find_element("css selector", "body").text
    screenshot_charts(browser, shots, f"lab-{name.removesuffix('.ipynb')}")
    assert drawn >= expected, f"{drawn} of {expected} charts drew in JupyterLab"
    assert "JavaScript Error" not in page_text and "Error displaying widget" not in page_text
    assert off_loopback(requests_made(browser)) == []

    html = root / name.replace(".ipynb", ".html")
    subprocess.run([sys.executable, "-m", "nbconvert", "--to", "html", str(root / name)], check=True,
                   capture_output=True, timeout=120)
    browser.get(html.as_uri())
    static = int(browser.execute_script("return document.querySelectorAll('.nel-static > svg').length"))
    screenshot_charts(browser, shots, f"html-{name.removesuffix('.ipynb')}")
    # Each widget is one figure of its charts; each plain chart one SVG.
    figures = {"explore.ipynb": 2 + failure_plot(store), "diagnose.ipynb": 5}[name]
    assert static >= figures, f"{static} inline SVG charts in the exported HTML, {figures} expected"
    assert "JavaScript Error" not in browser.find_element("css selector", "body").text
    assert off_loopback(requests_made(browser), NBCONVERT_TEMPLATE) == []
