"""Finding the program in a reply: which block wins, and when there is no code at all."""

from __future__ import annotations

import pytest

from workbench.scoring.code import extract_code

FUNC = "def add(a, b):\n    return a + b\n"


def test_a_python_block_is_extracted_without_its_fences_or_the_prose_around_it() -> None:
    reply = f"Here you go:\n\n```python\n{FUNC}```\n\nThis adds two numbers."
    assert extract_code(reply) == (FUNC, "fenced_python")


def test_the_last_python_block_wins() -> None:
    reply = "First try:\n```python\ndef add(a, b):\n    return 0\n```\nFixed:\n```python\n" + FUNC + "```"
    assert extract_code(reply) == (FUNC, "fenced_python")


def test_a_python_block_beats_a_later_block_of_another_language() -> None:
    reply = f"```python\n{FUNC}```\nRun it with:\n```bash\npython add.py\n```"
    assert extract_code(reply) == (FUNC, "fenced_python")


@pytest.mark.parametrize("tag", ["py", "python3", "Python", "PYTHON"])
def test_python_tags_are_recognised_whatever_their_case(tag: str) -> None:
    assert extract_code(f"```{tag}\n{FUNC}```") == (FUNC, "fenced_python")


def test_an_info_string_after_the_language_is_ignored() -> None:
    assert extract_code(f"```python title=add.py\n{FUNC}```") == (FUNC, "fenced_python")


def test_without_a_python_block_the_last_fenced_block_of_any_kind_is_taken() -> None:
    assert extract_code(f"```\n{FUNC}```") == (FUNC, "fenced")
    assert extract_code(f"```text\nnotes\n```\n```\n{FUNC}```") == (FUNC, "fenced")


def test_a_fenced_block_is_returned_as_is_even_if_it_is_not_python() -> None:
    # the sandbox decides; extraction only finds what the model meant as code
    assert extract_code("```js\nconsole.log(1)\n```") == ("console.log(1)\n", "fenced")


def test_an_empty_block_is_still_the_code_the_model_gave() -> None:
    assert extract_code("```python\n```") == ("", "fenced_python")


def test_a_block_cut_off_before_its_closing_fence_runs_to_the_end() -> None:
    assert extract_code(f"Sure.\n```python\n{FUNC}") == (FUNC, "fenced_python")


def test_longer_fences_may_hold_triple_backticks() -> None:
    code = 'DOC = """\n```\n"""\n'
    assert extract_code(f"````python\n{code}````") == (code, "fenced_python")


def test_indented_fences_and_windows_line_endings_are_handled() -> None:
    assert extract_code("  ```python\r\nx = 1\r\n  ```\r\n") == ("x = 1\n", "fenced_python")


def test_a_bare_reply_that_parses_as_python_is_the_code() -> None:
    assert extract_code(f"\n{FUNC}\n") == (FUNC.rstrip("\n"), "bare")


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "   \n\n",
        "I'm sorry, but I can't help with that.",
        "The function adds a and b: it returns a + b.",
        "def add(a, b):\n    return a +",  # prose-free but broken code
        "    return a + b",  # an indented body alone does not parse
        "x = 1\x00",  # a NUL byte makes ast.parse raise ValueError, not SyntaxError
    ],
)
def test_no_code_is_found_in_prose_broken_code_or_nothing(reply: str) -> None:
    assert extract_code(reply) == (None, "none")


def test_inline_backticks_are_not_fences() -> None:
    assert extract_code("Use `add(1, 2)` to call it.") == (None, "none")
