"""The error categories are defined once in Python and once in SQL; they must agree."""

import duckdb

from workbench.model.failures import ERROR_CATEGORIES, FAILURE_CATEGORIES
from workbench.resources import sql_path


def test_the_sql_macro_and_the_python_set_name_the_same_error_categories():
    con = duckdb.connect()
    con.execute(sql_path("schema.sql").read_text())
    con.execute(sql_path("views.sql").read_text())
    in_sql = {c for c in FAILURE_CATEGORIES if con.execute("SELECT is_error_category(?)", [c]).fetchone()[0]}  # type: ignore[index]
    assert in_sql == set(ERROR_CATEGORIES) == {"rate_limit", "timeout", "server_error", "context_window", "model_error",
                                               "scorer_error", "image_error"}
