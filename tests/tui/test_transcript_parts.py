"""The parts under the transcript screens, without an app: search, match overlay, the pending bucket."""

from __future__ import annotations

import shutil
from pathlib import Path

from workbench.analysis import triage
from workbench.store import open_store
from workbench.store.database import connect_rw


class TestPendingBucket:
    def test_a_task_of_a_running_run_with_attempts_to_come_is_pending_not_never(self, agent: Path,
                                                                                tmp_path: Path) -> None:
        store_path = tmp_path / "nel.duckdb"
        shutil.copy(agent, store_path)
        con = connect_rw(store_path)
        try:
            con.execute("UPDATE runs SET status = 'running', n_repeats = 3")
        finally:
            con.close()
        store = open_store(store_path)
        assert [r.bucket for r in triage.task_page(store, "agent-a").rows] == ["pending"]  # 2 of 3 passed so far
        assert [r.bucket for r in triage.task_page(store, "agent-b").rows] == ["sometimes"]  # final already
        assert triage.task_detail(store, "agent-a", 0).bucket == "pending"  # type: ignore[union-attr]
        assert triage.task_facets(store, "agent-a").buckets["pending"] == 1


class TestTextSearch:
    def test_counts_steps_and_wraps_round_with_smart_case(self) -> None:
        from workbench.tui.search import TextSearch

        search = TextSearch("Apple pie, apple tart, APPLE juice")
        search.query = "apple"
        assert search.count() == 3 and search.next(0) == 0 and search.next(1) == 11 and search.next(30) == 0
        assert search.previous(11) == 0 and search.previous(0) == 23  # wraps to the last
        assert search.ordinal(23) == 3 and search.within(5, 16) == [(11, 16)]
        search.query = "APPLE"  # a capital: exact
        assert search.count() == 1 and search.next(0) == 23
        search.query = "pear"
        assert search.count() == 0 and search.next(0) is None and search.previous(5) is None

    def test_overlay_draws_a_match_across_the_pieces_of_a_line(self) -> None:
        from rich.style import Style

        from workbench.tui.widgets.wrapped import overlay

        red, hit = Style(color="red"), Style(bold=True)
        line = (("ab", red), ("cd", Style()))
        assert overlay(line, [(1, 3, hit)]) == (("a", red), ("b", red + hit), ("c", Style() + hit), ("d", Style()))
