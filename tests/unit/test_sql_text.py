"""Which statement the SQL screen runs: the one under the cursor, split as SQL quotes and comments say."""

from __future__ import annotations

import pytest

from workbench.tui.sql_text import statement_at, statement_spans

SCRIPT = "SELECT 1;\n\n-- a comment; not an end\nSELECT ';' AS semi, \"a;b\" FROM t /* ; */;\n  \nSELECT 3"


def test_semicolons_in_strings_identifiers_and_comments_do_not_end_a_statement() -> None:
    texts = [SCRIPT[s.start:s.end].strip() for s in statement_spans(SCRIPT)]
    assert texts == ["SELECT 1", "-- a comment; not an end\nSELECT ';' AS semi, \"a;b\" FROM t /* ; */", "SELECT 3"]


@pytest.mark.parametrize(("offset", "expected"), [
    (0, "SELECT 1"),
    (8, "SELECT 1"),
    (10, "SELECT 1"),  # the blank line after its ';': still the statement just ended
    (SCRIPT.index("AS semi"), "-- a comment; not an end\nSELECT ';' AS semi, \"a;b\" FROM t /* ; */"),
    (len(SCRIPT), "SELECT 3"),
])
def test_the_statement_under_the_cursor(offset: int, expected: str) -> None:
    assert statement_at(SCRIPT, offset) == expected


def test_doubled_quotes_stay_inside_the_string() -> None:
    assert statement_at("SELECT 'it''s; fine'; SELECT 2", 3) == "SELECT 'it''s; fine'"


def test_blank_and_comment_only_text_has_no_statement() -> None:
    assert statement_at("  \n-- nothing here;\n/* nor; here */ ;", 5) == ""
    assert statement_at("", 0) == ""
