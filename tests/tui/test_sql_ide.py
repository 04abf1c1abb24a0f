"""`nel sql --ide`: harlequin on the store, read-only, live runs included, never holding the file between queries."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from tui_store import write_live_run

from workbench.tui.sql_ide import StoreAdapter, ide_app


@pytest.fixture(autouse=True)
def _harlequin_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """harlequin keeps its history and catalog cache under the user's directories: a test's own."""
    for var in ("XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))


def _copy(store: Path, tmp_path: Path) -> Path:
    target = tmp_path / "store" / "nel.duckdb"
    target.parent.mkdir()
    shutil.copy(store, target)
    return target


def test_a_query_sees_the_stores_views_and_a_run_still_being_written(demo: Path, tmp_path: Path) -> None:
    store = _copy(demo, tmp_path)
    write_live_run(store, run_id="live-run", tasks=3, repeats=2, delay_s=0)  # journals only: not merged
    connection = StoreAdapter((str(store),)).connect()
    cursor = connection.execute("SELECT run_id, count(*) AS n FROM steps GROUP BY run_id ORDER BY run_id")
    assert cursor is not None
    assert cursor.columns() == [("run_id", "s"), ("n", "##")]
    table = cursor.fetchall()
    assert table is not None
    counts = dict(zip(table.column("run_id").to_pylist(), table.column("n").to_pylist(), strict=True))
    assert counts["live-run"] == 6 and len(counts) == 3
    assert cursor.set_limit(1).fetchall().num_rows == 1  # type: ignore[union-attr]


def test_the_catalog_lists_every_table_and_view_with_columns(demo: Path) -> None:
    catalog = StoreAdapter((str(demo),)).connect().get_catalog()
    names = {item.label: item for item in catalog.items}
    assert {"runs", "steps", "tasks", "step_scores", "task_stats"} <= set(names)
    assert names["steps"].type_label == "v"
    columns = {c.label: c.type_label for c in names["steps"].children}
    assert columns["reward"] == "#.#" and columns["passed"] == "t/f" and columns["run_id"] == "s"


def test_errors_and_writes_are_one_readable_error(demo: Path) -> None:
    from harlequin.exception import HarlequinQueryError

    connection = StoreAdapter((str(demo),)).connect()
    with pytest.raises(HarlequinQueryError, match=r'^Binder Error: Referenced column "nope" not found'):
        connection.execute("SELECT nope FROM steps")
    with pytest.raises(HarlequinQueryError, match="Can only delete from base table"):
        connection.execute("DELETE FROM steps")


def test_the_ide_holds_no_lock_between_queries(demo: Path, tmp_path: Path) -> None:
    """A run's writer merges its steps while the IDE is open: a read-write open of the file succeeds."""
    store = _copy(demo, tmp_path)
    connection = StoreAdapter((str(store),)).connect()
    assert connection.execute("SELECT count(*) FROM steps") is not None
    connection.get_catalog()
    writer = duckdb.connect(str(store))  # raises "Could not set lock on file" if a reader still held it
    writer.close()


@pytest.mark.asyncio
@pytest.mark.timeout(60)
async def test_harlequin_runs_a_query_typed_in_its_editor(demo: Path) -> None:
    from harlequin.components.results_viewer import ResultsTable

    app = ide_app(demo, record_history=False)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        assert app.editor is not None
        app.editor.text = "SELECT run_id, count(*) AS n FROM steps GROUP BY run_id"
        app.editor.focus()
        await pilot.press("ctrl+j")
        for _ in range(100):
            await pilot.pause(0.05)
            tables = app.results_viewer.query(ResultsTable)
            if tables and tables.first().row_count:
                break
        table = app.results_viewer.query(ResultsTable).first()
        assert table.row_count == 2
        labels = {str(node.label) for node in app.data_catalog.database_tree.root.children}
        assert {"runs", "steps", "tasks"} <= {label.split()[0] for label in labels}


def test_cli_refuses_a_query_with_ide_and_a_missing_store(tmp_path: Path) -> None:
    nel = [sys.executable, "-m", "workbench.cli", "sql"]
    both = subprocess.run([*nel, "--ide", "SELECT 1", "--store", str(tmp_path / "x.duckdb")],
                          capture_output=True, text=True, timeout=60)
    assert both.returncode == 2 and "give no query" in both.stderr
    missing = subprocess.run([*nel, "--ide", "--store", str(tmp_path / "x.duckdb")],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "x.duckdb" in missing.stderr and len(missing.stderr.strip().splitlines()) == 1
