"""The code harness's wire format: what crosses between the tests and the program is rebuilt as built-in values only.

The security of a verdict rests on ``loads``: whatever bytes the program's process sends, the tests compare
values of Python's own types, never an object of the program's.
"""

from __future__ import annotations

import collections
import enum
import fractions
import math
from typing import Any

import pytest

from workbench.sandbox.harness import MAX_DEPTH, dumps, loads

SAMPLES: list[Any] = [
    None, True, False, 0, -1, 2**200, -(2**4000), 1.5, -0.0, float("inf"), 1e-310, 3 + 4j, "", "ü ✓ \ud800",
    b"\x00\xff", [1, [2, (3,)]], (), {"a": [1, 2], 3: None, (1, 2): frozenset({4})}, {1, 2}, frozenset(),
]


@pytest.mark.parametrize("value", SAMPLES, ids=repr)
def test_built_in_values_round_trip_exactly(value: Any) -> None:
    back = loads(dumps(value))
    assert back == value and type(back) is type(value)
    if isinstance(value, float):
        assert math.copysign(1, back) == math.copysign(1, value)  # -0.0 stays negative


def test_nan_round_trips() -> None:
    assert math.isnan(loads(dumps(float("nan"))))


def test_instances_of_subclasses_arrive_as_their_base_type() -> None:
    """What the tests compare is then the base type's value, whatever the subclass's __eq__ says."""

    class Liar(int):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = int.__hash__

    class Colour(enum.IntEnum):
        RED = 1

    point = collections.namedtuple("point", "x y")
    for value, expected in ((Liar(3), 3), (Colour.RED, 1), (collections.Counter("abb"), {"a": 1, "b": 2}),
                            (point(1, 2), (1, 2)), (bytearray(b"x"), b"x")):
        back = loads(dumps(value))
        assert back == expected and type(back) is type(expected)
    assert loads(dumps(Liar(3))) != 4


@pytest.mark.parametrize("value", [object(), fractions.Fraction(1, 2), iter([1]), [1, lambda: 0]],
                         ids=["object", "Fraction", "iterator", "list-with-a-function"])  # the same in every worker
def test_anything_else_is_refused_by_name(value: Any) -> None:
    with pytest.raises(TypeError, match="cannot cross between the tests and the program"):
        dumps(value)


@pytest.mark.parametrize(
    "data",
    [b"", b"x", b"i12", b"s5:abc", b"l2:N", b"d1:l0:N", b"NN", b"s-1:", b"l99999999999999:", b"fzz;", b"i;", b"Q"],
)
def test_malformed_bytes_are_refused_not_guessed(data: bytes) -> None:
    with pytest.raises((ValueError, TypeError)):
        loads(data)


def test_nesting_is_bounded_on_both_sides() -> None:
    deep: list[Any] = []
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(ValueError, match="nested"):
        dumps(deep)
    with pytest.raises(ValueError, match="nested"):
        loads(b"l1:" * (MAX_DEPTH + 5) + b"N")


def test_the_programs_exceptions_arrive_as_builtin_types_but_never_as_the_end_of_an_iteration() -> None:
    """A StopIteration raised through ``map(candidate, ...)`` in the tests would end their loop: a pass."""
    from workbench.sandbox.harness import _program_exception

    def made(name: str) -> BaseException:
        return _program_exception({"raised": name, "message": "m", "at": "solution.py:1: x"})

    raised = made("ValueError")
    assert type(raised) is ValueError and getattr(raised, "nel_at", None) == "solution.py:1: x"
    for name in ("StopIteration", "StopAsyncIteration", "SystemExit", "KeyboardInterrupt", "Yes", "ProgramGone"):
        assert type(made(name)) is RuntimeError, name
