"""SVG snapshots of an agent's transcript at 80×24: a search with its matches highlighted, and the export dialog."""

from __future__ import annotations

from pathlib import Path

import pytest
from pilot_helpers import settle
from textual.pilot import Pilot

from workbench.tui.app import NelApp
from workbench.tui.screens.task import TaskScreen

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def app(agent: Path, monkeypatch: pytest.MonkeyPatch) -> NelApp:
    monkeypatch.chdir(agent.parent)
    return NelApp(Path("nel.duckdb"), clock=lambda: 0.0)


def _agent_task(*keys: str):  # type: ignore[no-untyped-def]
    async def run(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.app.push_screen(TaskScreen("agent-b", 0))
        await settle(pilot)
        for key in keys:
            await pilot.press(key)
        await settle(pilot)

    return run


class TestAgentTranscript:
    """The search (highlights, the current match brighter, the count) and the export dialog."""

    def test_search_in_a_folded_output(self, app: NelApp, snap_compare) -> None:  # type: ignore[no-untyped-def]
        assert snap_compare(app, run_before=_agent_task("slash", *"file1", "enter", "n"))

    def test_export_dialog(self, app: NelApp, snap_compare) -> None:  # type: ignore[no-untyped-def]
        assert snap_compare(app, run_before=_agent_task("e"))
