"""Field types and metadata the run specification is written in.

``Flag`` marks a field that `nel eval run` also takes as a command-line flag: the parser, the flags-to-spec
translation, the naming of a flag in an error message and the TUI's new-run form are all made from these
marks, so a new option is one field here plus the code that uses it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, WithJsonSchema


@dataclass(frozen=True, slots=True)
class Flag:
    """A command-line flag for a field of the single-benchmark spec that `nel eval run -b ...` builds.

    ``path`` is the field's dot-path in that spec (``services.main.generation.temperature``); ``repeat``
    makes the flag repeatable (a list field); ``form`` (a position, from 1) puts it on the TUI's new-run form under
    ``label``, with ``placeholder`` as its hint."""

    flag: str
    help: str
    metavar: str | None = None
    short: str | None = None
    repeat: bool = False
    form: int = 0
    label: str | None = None
    placeholder: str = ""
    parse: Callable[[str], Any] | None = None
    """Turns the flag's text into the field's value (default: the field's own type, read as YAML would)."""


def _one_or_many(value: Any) -> Any:
    """``stop: "</s>"`` and ``stop: ["</s>", "###"]`` are both a list of strings (kept as a tuple)."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(s, str) and s for s in items):
        raise ValueError(f"expected a string or a list of strings, got {kind_of(value)}")
    return tuple(items)


def kind_of(value: Any) -> str:
    """How an error names a value's type: "a mapping", "a list", "a string", "nothing" ..."""
    if value is None:
        return "nothing"
    return {dict: "a mapping", list: "a list", tuple: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), f"a {type(value).__name__}")


NonEmpty = Annotated[str, Field(min_length=1)]
Strings = Annotated[tuple[str, ...], BeforeValidator(_one_or_many),
                    WithJsonSchema({"anyOf": [{"type": "string", "minLength": 1},
                                              {"type": "array", "items": {"type": "string", "minLength": 1}}]})]
"""A string or a list of strings."""
Positive = Annotated[int, Field(ge=1)]
Seconds = Annotated[float, Field(gt=0.0, le=86400.0)]
Fraction = Annotated[float, Field(ge=0.0, le=1.0)]
