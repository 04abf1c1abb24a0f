"""The flags of `nel eval run -b NAME --model-url URL --model-id ID ...`, made from the spec's own fields.

A field marked with ``Flag`` (``workbench.spec.fields``) is a flag of the one-benchmark spec the command line
describes: its service is ``main`` and its benchmark ``benchmarks.0``. From those marks come the argparse
arguments (``add_spec_flags``), the spec a parsed command line stands for (``spec_from_flags``), the flag an error
names, and the fields of the TUI's new-run form (``form_fields``).
"""

from __future__ import annotations

import argparse
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from workbench.errors import UsageError
from workbench.spec.errors import first_problem
from workbench.spec.fields import Flag
from workbench.spec.models import MAIN, ApiService, Benchmark, Generation, Output, RunSpec, SimpleSolver, SpecProblem


@dataclass(frozen=True, slots=True)
class FlagField:
    """One flag and the field it sets."""

    path: tuple[str | int, ...]
    flag: Flag
    annotation: Any

    @property
    def dest(self) -> str:
        return self.flag.flag.lstrip("-").replace("-", "_")

    @property
    def dotted(self) -> str:
        return ".".join(str(p) for p in self.path)

    @property
    def choices(self) -> tuple[str, ...] | None:
        for arg in _types(self.annotation):
            if typing.get_origin(arg) is Literal:
                return tuple(str(a) for a in typing.get_args(arg))
        return None

    @property
    def kind(self) -> Literal["integer", "number", "text"]:
        """What a form field for it takes: a whole number, a number, or text."""
        kinds = {t for t in _types(self.annotation) if t in (int, float)}
        return "integer" if kinds == {int} else "number" if kinds else "text"

    def convert(self, text: str) -> Any:
        """The flag's text as the field's value (a number, a string, or what ``Flag.parse`` makes of it)."""
        if self.flag.parse is not None:
            try:
                return self.flag.parse(text)
            except ValueError as exc:
                raise argparse.ArgumentTypeError(str(exc)) from None
        kinds = {t for t in _types(self.annotation) if t in (int, float, str, bool)}
        if int in kinds and float not in kinds:
            try:
                return int(text)
            except ValueError:
                raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if float in kinds:
            try:
                return float(text)
            except ValueError:
                raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        return text


def _types(annotation: Any) -> Iterator[Any]:
    yield annotation
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        yield from _types(typing.get_args(annotation)[0])
    elif origin is not None and origin is not Literal:
        for arg in typing.get_args(annotation):
            yield from _types(arg)


def _flags_of(model: type[BaseModel], prefix: tuple[str | int, ...]) -> Iterator[FlagField]:
    for name, info in model.model_fields.items():
        for meta in info.metadata:
            if isinstance(meta, Flag):
                yield FlagField((*prefix, name), meta, info.annotation)


def spec_flags() -> list[FlagField]:
    """Every flag of the one-benchmark spec, in the order `nel eval run --help` lists them."""
    return [
        *_flags_of(Benchmark, ("benchmarks", 0)),
        *_flags_of(SimpleSolver, ("benchmarks", 0, "solver")),
        *_flags_of(RunSpec, ()),
        *_flags_of(ApiService, ("services", MAIN)),
        *_flags_of(Generation, ("services", MAIN, "generation")),
        *_flags_of(Output, ("output",)),
    ]


def form_fields() -> list[FlagField]:
    """The fields the TUI's new-run form shows, in their order."""
    return sorted((f for f in spec_flags() if f.flag.form), key=lambda f: f.flag.form)


def add_spec_flags(parser: argparse.ArgumentParser, *, store_default: str | None = None) -> None:
    """The spec's flags as arguments of ``parser`` (every one optional: a config file may be given instead)."""
    group = parser.add_argument_group("run specification (or set them in a config file)")
    for field in spec_flags():
        names = [n for n in (field.flag.short, field.flag.flag) if n]
        kwargs: dict[str, Any] = {"dest": field.dest, "help": field.flag.help, "metavar": field.flag.metavar,
                                  "type": field.convert}
        choices = field.choices
        if choices is not None and field.flag.parse is None:
            kwargs.update(choices=choices, metavar=None)
        if field.flag.repeat:
            kwargs["action"] = "append"
        if field.dest == "store":
            kwargs["default"] = store_default
        group.add_argument(*names, **kwargs)


def spec_from_flags(args: argparse.Namespace) -> RunSpec:
    """The ``RunSpec`` a parsed command line stands for; a problem names the flag (exit 2)."""
    return spec_from_values(vars(args), lambda field: field.flag.flag)


def spec_from_values(values: Mapping[str, Any], name: Callable[[FlagField], str]) -> RunSpec:
    """The one-benchmark spec that flag values (by destination: ``model_url``, ``repeats`` ...; a TUI form's
    fields) stand for; a problem is named by ``name`` of the field it concerns."""
    tree: dict[str, Any] = {"services": {MAIN: {}}, "benchmarks": [{}]}
    flags = spec_flags()
    for field in flags:
        value = values.get(field.dest)
        if value is None or value == [] or field.dest == "api_key":  # a key: never in a tree that may be shown
            continue
        _put(tree, field.path, value)
    try:
        spec = RunSpec.model_validate(tree)
    except ValidationError as exc:
        problem = first_problem(exc)
        raise UsageError(f"{_name_for(problem.path, flags, name)}: {problem.message}") from None
    except SpecProblem as exc:
        raise UsageError(f"{_name_for(exc.path, flags, name)}: {exc.message}") from None
    api_key = values.get("api_key")
    if api_key:
        service = spec.services[MAIN]
        assert isinstance(service, ApiService)
        spec.services[MAIN] = service.model_copy(update={"api_key": api_key})
    return spec


def _put(tree: dict[str, Any], path: tuple[str | int, ...], value: Any) -> None:
    node: Any = tree
    for part in path[:-1]:
        node = node[part] if isinstance(part, int) else node.setdefault(part, {})
    node[path[-1]] = value


def _name_for(path: str, flags: list[FlagField], name: Callable[[FlagField], str]) -> str:
    """The name of the flag (or form field) that sets ``path`` or the field below it, else the dot-path."""
    best: FlagField | None = None
    for field in flags:
        dotted = field.dotted
        if (path == dotted or path.startswith(dotted + ".")) and (best is None or len(dotted) > len(best.dotted)):
            best = field
    return name(best) if best is not None else path
