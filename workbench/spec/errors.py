"""The first problem pydantic finds in a spec, as one line in today's words, at a dot-path.

Pydantic reports where (a location tuple, which also holds the tags of tagged unions) and what (an error type
with its context). This module walks the location through the spec's own models to find the dot-path a user
wrote (``benchmarks.0.solver.type``), the field's declared bounds, and the keys an object accepts, and words the
problem as the hand-written checker did: ``unknown key; expected one of: ...``, ``missing required key
'model'``, ``expected a whole number, got a string``, ``3 is outside [0.0, 2.0]``.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel, Discriminator, ValidationError
from pydantic.fields import FieldInfo

from workbench.spec.fields import kind_of
from workbench.spec.models import RunSpec
from workbench.spec.refused import refusal


@dataclass(frozen=True, slots=True)
class Problem:
    """One problem: the dot-path it is at (``""``: the whole spec) and what is wrong."""

    path: str
    message: str


def first_problem(exc: ValidationError, root: type[BaseModel] = RunSpec) -> Problem:
    error = exc.errors(include_url=False)[0]
    place = _walk(root, error["loc"])
    kind, ctx, value = error["type"], error.get("ctx") or {}, error.get("input")
    path = place.path
    if kind == "nel":
        field = ctx.get("field")
        return Problem(_join(path, field) if field else path, str(ctx["message"]))
    if kind == "missing":
        if "missing" in ctx:  # ours: a key a validator found missing, at the object that lacks it
            return Problem(path, f"missing required key {ctx['missing']!r}")
        parent, _, key = path.rpartition(".")
        return Problem(parent, f"missing required key {key!r}")
    if kind == "extra_forbidden":
        allowed = ", ".join(place.parent_keys)
        return Problem(path, f"unknown key; expected one of: {allowed}")
    if kind == "union_tag_invalid":
        section = "solver" if path.endswith("solver") else "service" if path.startswith("services.") else ""
        if (refused := refusal(section, ctx.get("tag"))) is not None:
            return Problem(_join(path, "type"), refused)
        tags = ", ".join(t.strip("'") for t in str(ctx.get("expected_tags", "")).split(", "))
        return Problem(_join(path, "type"), f"expected one of {tags}, got {ctx.get('tag')!r}")
    if kind == "literal_error":
        options = ", ".join(str(o) for o in place.literal_options) or str(ctx.get("expected"))
        return Problem(path, f"expected one of {options}, got {value!r}")
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        return Problem(path, _bounds_message(place, value, kind, ctx))
    if kind == "value_error":
        return Problem(path, str(error["msg"]).removeprefix("Value error, "))
    return Problem(path, _type_message(kind, value, error["msg"]))


_TYPE_MESSAGES = {
    "int_type": "expected a whole number", "int_parsing": "expected a whole number",
    "int_from_float": "expected a whole number", "float_type": "expected a number",
    "float_parsing": "expected a number",
    "string_type": "expected a non-empty string", "string_too_short": "expected a non-empty string",
    "bool_type": "expected true or false", "dict_type": "expected a mapping", "model_type": "expected a mapping",
    "model_attributes_type": "expected a mapping", "list_type": "expected a list", "tuple_type": "expected a list",
    "too_short": "expected more items", "too_long": "expected fewer items",
}


def _type_message(kind: str, value: Any, fallback: str) -> str:
    words = _TYPE_MESSAGES.get(kind)
    return f"{words}, got {kind_of(value)}" if words else fallback


def _bounds_message(place: _Place, value: Any, kind: str, ctx: dict[str, Any]) -> str:
    low, high, open_low = place.bounds
    if low is not None and high is not None and place.is_float:  # a range of numbers; whole numbers have limits
        bound = f"({float(low)}, {float(high)}]" if open_low else f"[{float(low)}, {float(high)}]"
        return f"{value} is outside {bound}"
    if kind == "greater_than_equal":
        return f"must be at least {ctx.get('ge')}, got {value}"
    if kind == "greater_than":
        return f"must be greater than {ctx.get('gt')}, got {value}"
    if kind == "less_than_equal":
        return f"must be at most {ctx.get('le')}, got {value}"
    return f"must be less than {ctx.get('lt')}, got {value}"


def _join(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)


# ---- walking a location through the models ---------------------------------------------------------------------
@dataclass(slots=True)
class _Place:
    path: str = ""
    parent_keys: tuple[str, ...] = ()
    field: FieldInfo | None = None
    annotation: Any = None

    @property
    def bounds(self) -> tuple[Any, Any, bool]:
        low: Any = None
        high: Any = None
        open_low = False
        for meta in _metadata(self.field, self.annotation):
            if isinstance(meta, Ge):
                low = meta.ge
            elif isinstance(meta, Gt):
                low, open_low = meta.gt, True
            elif isinstance(meta, Le):
                high = meta.le
            elif isinstance(meta, Lt):
                high = meta.lt
        return low, high, open_low

    @property
    def is_float(self) -> bool:
        return float in set(_flatten(self.annotation))

    @property
    def literal_options(self) -> tuple[Any, ...]:
        for arg in _flatten(self.annotation):
            if typing.get_origin(arg) is Literal:
                return typing.get_args(arg)
        return ()


def _metadata(field: FieldInfo | None, annotation: Any) -> Iterator[Any]:
    if field is not None:
        yield from field.metadata
    for arg in _flatten(annotation):
        if typing.get_origin(arg) is Annotated:
            yield from typing.get_args(arg)[1:]


def _flatten(annotation: Any) -> Iterator[Any]:
    """``annotation`` and, through ``Annotated`` and unions, every type it may be."""
    if annotation is None:
        return
    yield annotation
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        yield from _flatten(typing.get_args(annotation)[0])
    elif origin in (Union, types.UnionType):
        for arg in typing.get_args(annotation):
            yield from _flatten(arg)


def _tagged_members(annotation: Any) -> dict[str, Any] | None:
    """For a tagged union (``Annotated[A | B, Discriminator(...)]``): its members by tag."""
    if typing.get_origin(annotation) is not Annotated:
        return None
    inner, *meta = typing.get_args(annotation)
    if not any(isinstance(m, Discriminator) for m in meta):
        return _tagged_members(inner) if typing.get_origin(inner) is Annotated else None
    members = {}
    for arg in typing.get_args(inner):
        if typing.get_origin(arg) is Annotated:
            for m in typing.get_args(arg)[1:]:
                tag = getattr(m, "tag", None)
                if tag is not None:
                    members[tag] = arg
    return members


def _model_of(annotation: Any) -> type[BaseModel] | None:
    for arg in _flatten(annotation):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
    return None


def _container(annotation: Any) -> tuple[Any, Any] | None:
    """``(origin, item annotation)`` of a dict, list or tuple inside ``annotation``."""
    for arg in _flatten(annotation):
        origin = typing.get_origin(arg)
        if origin is dict:
            return dict, typing.get_args(arg)[1]
        if origin in (list, tuple):
            args = typing.get_args(arg)
            return origin, args[0] if args else Any
    return None


def _walk(root: type[BaseModel], loc: tuple[int | str, ...]) -> _Place:
    place = _Place(annotation=root)
    parts: list[str] = []
    for segment in loc:
        members = _tagged_members(place.annotation)
        if members is not None and segment in members:
            place.annotation = members[segment]  # a tagged union's tag: not a key the user wrote
            continue
        model = _model_of(place.annotation) if not isinstance(segment, int) else None
        container = _container(place.annotation)
        if model is not None and (container is None or (isinstance(segment, str) and segment in model.model_fields)):
            place.parent_keys = tuple(model.model_fields)
            info = model.model_fields.get(str(segment))
            place.field, place.annotation = info, (info.annotation if info is not None else None)
            if info is not None and info.metadata:
                place.annotation = Annotated[(info.annotation, *info.metadata)]  # type: ignore[valid-type]
        elif container is not None:
            place.field, place.annotation = None, container[1]
        else:
            place.field, place.annotation = None, None
        parts.append(str(segment))
    place.path = ".".join(parts)
    return place
