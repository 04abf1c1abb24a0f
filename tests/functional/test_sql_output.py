"""``nel sql`` output is terminal-safe: a response that holds ANSI or OSC escapes is shown, never obeyed.

A model's response is untrusted text. Printed raw, ``ESC ] 52 ; c ; … BEL`` writes the user's clipboard and
``ESC [ 31 m`` recolours the terminal; the table and CSV outputs show them escaped as ``--format json`` does.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from nel_helpers import assert_ok, nel

from workbench.store.database import connect_rw

# the strings as DuckDB builds them: OSC 52 (clipboard write), an SGR colour, and a C1 CSI (0x9b)
QUERY = ("SELECT 'copy' || chr(27) || ']52;c;ZXZpbA==' || chr(7) AS osc, chr(27) || '[31mred' || chr(27) || "
         "'[0m' AS sgr, chr(155) || '2J' AS c1, 'a\\b' AS latex")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sql") / "nel.duckdb"
    connect_rw(path).close()  # an empty store: the query needs no data
    return path


def _sql(store: Path, *args: str) -> str:
    proc = nel("sql", QUERY, "--store", str(store), *args, cwd=store.parent)
    assert_ok(proc)
    return proc.stdout


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_escapes_in_a_response_are_shown_not_sent_to_the_terminal(store: Path, fmt: str) -> None:
    out = _sql(store, "--format", fmt)
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
    for shown in ("copy\\u001b]52;c;ZXZpbA==\\u0007", "\\u001b[31mred\\u001b[0m", "\\u009b2J"):
        assert shown in out, (shown, out)
    assert ("a\\\\b" if fmt == "json" else "a\\b") in out  # a backslash is no control: LaTeX stays readable


def test_json_output_is_still_the_same_data(store: Path) -> None:
    row = orjson.loads(_sql(store, "--format", "json"))[0]
    assert row == {"osc": "copy\x1b]52;c;ZXZpbA==\x07", "sgr": "\x1b[31mred\x1b[0m", "c1": "\x9b2J", "latex": "a\\b"}


def test_the_table_stays_aligned(store: Path) -> None:
    lines = _sql(store).splitlines()[:3]  # header, rule, the row
    assert len({len(line) for line in lines}) == 1, lines
