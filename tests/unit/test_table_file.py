"""Rows out to Markdown, JSON, CSV and Parquet (what the TUI's export dialog writes)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from workbench.errors import UsageError
from workbench.export.table_file import SUFFIXES, Format, Table, markdown_table, write_table

ROWS = Table("t", "3 rows", ["id", "details", "id"], [[1, {"k": [1, 2]}, "a|b\nc"], [2, {"k": [3]}, None],
                                                       [3, {"k": []}, "w"]])


@pytest.mark.parametrize("fmt", list(SUFFIXES))
def test_each_format_writes_every_row_and_a_repeated_column_name_gets_a_suffix(fmt: Format, tmp_path: Path) -> None:
    path = write_table(ROWS, tmp_path / "deep" / f"out{SUFFIXES[fmt]}", fmt)
    assert path.is_file()
    if fmt == "markdown":
        return
    readers: dict[str, Callable[[Path], pl.DataFrame]] = {"json": pl.read_json, "csv": pl.read_csv,
                                                          "parquet": pl.read_parquet}
    frame = readers[fmt](path)
    assert frame.columns == ["id", "details", "id_2"] and frame["id"].to_list() == [1, 2, 3]
    assert frame["id_2"].to_list() == ["a|b\nc", None, "w"]
    details = frame["details"].to_list()
    assert details == (['{"k":[1,2]}', '{"k":[3]}', '{"k":[]}'] if fmt == "csv"  # CSV has no nesting: JSON text
                       else [{"k": [1, 2]}, {"k": [3]}, {"k": []}])


def test_markdown_escapes_pipes_and_line_breaks_and_a_document_replaces_the_table(tmp_path: Path) -> None:
    assert markdown_table(ROWS).splitlines()[2] == '| 1 | {"k":[1,2]} | a\\|b<br>c |'
    doc = Table("t", "doc", ["a"], [[1]], document="# A document\n")
    assert write_table(doc, tmp_path / "d.md", "markdown").read_text() == "# A document\n"


def test_ragged_nesting_that_polars_cannot_type_is_kept_as_json_text(tmp_path: Path) -> None:
    ragged = Table("t", "2 rows", ["v"], [[{"a": 1}], ["plain"]])
    formats: tuple[Format, ...] = ("json", "parquet")
    for fmt in formats:
        path = write_table(ragged, tmp_path / f"r{SUFFIXES[fmt]}", fmt)
        frame = pl.read_json(path) if fmt == "json" else pl.read_parquet(path)
        assert frame["v"].to_list() == ['{"a":1}', "plain"]


def test_a_path_that_cannot_be_written_is_one_line_naming_it(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(UsageError, match=f"^cannot write {blocker / 'out.csv'}: "):
        write_table(ROWS, blocker / "out.csv", "csv")
    with pytest.raises(UsageError, match="unknown format 'xlsx'"):
        write_table(ROWS, tmp_path / "out.xlsx", "xlsx")  # type: ignore[arg-type]
