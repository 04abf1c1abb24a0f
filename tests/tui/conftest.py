"""Fixtures of the TUI tests: the demo store, and no cursor blink (snapshots must not depend on timing)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input, TextArea
from tui_store import LONG_IDS, agent_store, demo_store, synthetic_store


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo store (two runs of eight tasks), built once; its directory holds nel.duckdb."""
    return demo_store(tmp_path_factory.mktemp("demo") / "nel.duckdb")


@pytest.fixture(scope="session")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run of 350 tasks: several pages of the task list."""
    return synthetic_store(tmp_path_factory.mktemp("big") / "nel.duckdb", runs=1, tasks=350, repeats=1)


@pytest.fixture(scope="session")
def long_ids(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo store with the run ids nel gives (benchmark-model-date-time-hash), too long for 80 columns."""
    return demo_store(tmp_path_factory.mktemp("long") / "nel.duckdb", LONG_IDS)


@pytest.fixture(autouse=True)
def _steady_cursors(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cursors stay visible instead of blinking on a timer."""
    monkeypatch.setattr(Input, "_toggle_cursor", lambda self: None)
    monkeypatch.setattr(TextArea, "_toggle_cursor_blink_visible", lambda self: None)


@pytest.fixture(scope="session")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two runs of one agent task whose attempts call ``bash`` (tui_store.agent_store)."""
    return agent_store(tmp_path_factory.mktemp("agent") / "nel.duckdb")
