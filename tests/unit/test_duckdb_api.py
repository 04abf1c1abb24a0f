"""The store works alike on DuckDB 1.x and 2.x (``make test`` runs these on both majors)."""

import duckdb
import polars as pl

from workbench import open_store
from workbench.analysis.triage import one_line
from workbench.store import reader
from workbench.store.database import connect_rw
from workbench.store.duckdb_api import polars_frame, release


def test_a_query_with_positional_or_named_parameters_reads_as_a_polars_frame():
    con = duckdb.connect()
    expected = pl.DataFrame({"x": [2], "y": ["b"]}, schema={"x": pl.Int32, "y": pl.String})
    assert polars_frame(con, "SELECT ?::INTEGER AS x, ?::VARCHAR AS y", [2, "b"]).equals(expected)
    assert polars_frame(con, "SELECT $x::INTEGER AS x, $y::VARCHAR AS y", {"x": 2, "y": "b"}).equals(expected)
    assert polars_frame(con, "SELECT 2::INTEGER AS x, 'b' AS y", {}).equals(expected)
    assert polars_frame(con, "SELECT 2::INTEGER AS x, 'b' AS y").equals(expected)


def test_a_result_left_unfinished_does_not_block_the_next_query_on_the_connection():
    # DuckDB 2 keeps a result open until a fetch finds no more rows; 1.x dropped it at the next query
    con = duckdb.connect()
    assert con.execute("SELECT range AS i FROM range(10)").fetchone() == (0,)
    assert polars_frame(con, "SELECT 7 AS x")["x"].to_list() == [7]
    assert con.execute("SELECT 1").fetchone() == (1,)
    release(con)
    con.register("wanted", pl.DataFrame({"i": [3]}))
    assert con.execute("SELECT count(*) FROM wanted").fetchall() == [(1,)]


def test_a_statement_without_rows_runs_once_and_reads_as_its_status_frame():
    con = duckdb.connect()
    con.execute("CREATE TABLE t (a INTEGER)")
    assert polars_frame(con, "INSERT INTO t VALUES (1)").rows() == [(1,)]
    assert con.execute("SELECT count(*) FROM t").fetchone() == (1,)
    assert polars_frame(con, "SET threads = 1").height == 0


def test_a_duckdb_error_reads_as_the_same_line_on_either_major():
    try:
        duckdb.connect().execute("SELECT * FROM no_such_table")
    except duckdb.Error as exc:
        line = one_line(exc)
    # 1.x points at the culprit with one caret, 2.x underlines the whole token
    assert line.startswith("Catalog Error: Table with name no_such_table does not exist!")
    assert line.endswith("LINE 1: SELECT * FROM no_such_table ^")


def test_a_store_file_is_created_in_a_format_duckdb_1_reads(tmp_path):
    path = tmp_path / "nel.duckdb"
    connect_rw(path).close()
    header = path.read_bytes()[:20]
    assert header[8:12] == b"DUCK"
    # the storage version in the file header: DuckDB 1.4 reads 64 to 67; DuckDB 2.0's own format is not among them
    assert 64 <= int.from_bytes(header[12:20], "little") <= 67


def test_a_reader_connection_keeps_working_if_duckdb_drops_the_optimiser_it_disables(tmp_path, monkeypatch):
    path = tmp_path / "nel.duckdb"
    connect_rw(path).close()
    monkeypatch.setattr(reader, "_READER_SETTINGS", "SET disabled_optimizers = 'no_such_optimizer'")
    assert open_store(path).rows("SELECT count(*) FROM steps") == [(0,)]


def test_several_queries_share_one_connection_after_the_stores_set_up(tmp_path):
    path = tmp_path / "nel.duckdb"
    connect_rw(path).close()

    def work(con):
        con.register("wanted", pl.DataFrame({"i": [1, 2]}))
        return polars_frame(con, "SELECT count(*) AS n FROM wanted CROSS JOIN runs")["n"].to_list()

    assert open_store(path).on_connection(work) == [0]
