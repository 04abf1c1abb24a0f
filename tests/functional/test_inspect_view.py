"""A run exported with `--to inspect` opens in `inspect view`: its server lists the log and Chromium draws it.

inspect_ai's reader accepting the file (tests/functional/test_export_targets.py) is not the same as its viewer
showing it: here the real `inspect view` serves the exported log on loopback, and Debian's Chromium, driven
by Selenium with the network blocked, renders the log's page: task, model, accuracy, samples and a score.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from nel_helpers import assert_ok, clean_env, free_port, nel

from workbench.mock import MockHandle

PROBLEMS, REPEATS = 5, 2
CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")


@pytest.fixture(scope="module")
def exported(mock: MockHandle, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A GSM8K run against the mock, exported to an inspect log: the log's directory."""
    root = tmp_path_factory.mktemp("inspect-view")
    store = root / "nel.duckdb"
    assert_ok(nel("eval", "run", "-b", "gsm8k", "--model-url", mock.base_url, "--model-id", "nel-mock",
                  "--repeats", str(REPEATS), "--max-problems", str(PROBLEMS), "--store", str(store),
                  "-o", str(root / "out"), "--no-progress", cwd=root, timeout=120))
    run_id = nel("sql", "--store", str(store), "--format", "csv", "SELECT run_id FROM runs", cwd=root)
    logs = root / "logs"
    assert_ok(nel("eval", "export", run_id.stdout.split()[-1], "--to", "inspect", "-o", str(logs),
                  "--store", str(store), cwd=root, timeout=120))
    return logs


@pytest.fixture(scope="module")
def viewer(exported: Path) -> Iterator[str]:
    """`inspect view` on the exported logs, on a free loopback port: its base URL."""
    port = free_port()
    log = exported.parent / "view.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(Path(sys.executable).parent / "inspect"), "view", "--log-dir", str(exported),
                                 "--host", "127.0.0.1", "--port", str(port)],
                                stdout=out, stderr=subprocess.STDOUT, env=clean_env(), cwd=exported.parent)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(base + "/", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"inspect view did not start: {log.read_text()[-2000:]}")
            time.sleep(0.3)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_viewers_server_lists_the_log_as_a_gsm8k_task(viewer: str, exported: Path) -> None:
    (log,) = exported.glob("*.eval")
    files = httpx.get(viewer + "/api/log-files", timeout=30).json()["files"]
    assert [(Path(f["name"].removeprefix("file://")).name, f["task"]) for f in files] == [(log.name, "gsm8k")]


@pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="Debian's chromium and chromium-driver are not installed "
                    "(make test installs them)")
def test_chromium_draws_the_logs_page(viewer: str, exported: Path, tmp_path: Path) -> None:
    from selenium import webdriver

    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager never downloads a driver
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,900",
                "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=str(DRIVER)))
    try:
        driver.get(viewer + "/")
        text = ""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            text = driver.find_element("tag name", "body").text
            if "SAMPLES" in text and "nel-mock" in text and f"{PROBLEMS * REPEATS} rows" in text:
                break
            time.sleep(0.5)
        driver.save_screenshot(str(tmp_path / "inspect-view.png"))
    finally:
        driver.quit()
    assert "gsm8k" in text and "nel-mock" in text, text[:2000]
    assert "ACCURACY" in text and f"{PROBLEMS * REPEATS} rows" in text, text[:2000]
    assert "Solve the following math problem" in text  # a sample's input, drawn in the samples list
