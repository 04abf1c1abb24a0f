"""The optional parts of the workbench and the one line that says an extra is missing.

``pip install nel-workbench`` is the core (engine, store, statistics, CLI, mock model); the front ends and heavy
integrations are extras of the distribution (pyproject.toml). Whatever needs one goes through ``require`` (a
check that imports nothing) or ``needs_extra`` (around the imports themselves), so a missing extra is always
the same ``MissingExtra``: a ``UsageError`` (the CLI prints one line, exit 2) and an ``ImportError`` (what
``import workbench.widgets`` raises in a notebook), naming the exact install command.

A leaf module: it imports nothing heavy, so every layer may use it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator

from workbench.errors import UsageError

DISTRIBUTION = "nel-workbench"

EXTRA_OF: dict[str, str] = {
    "textual": "tui",
    "harlequin": "tui",
    "ipywidgets": "notebook",
    "altair": "notebook",
    "anywidget": "notebook",
    "vl_convert": "notebook",
    "fastapi": "serve",
    "starlette": "serve",
    "uvicorn": "serve",
    "docker": "docker",
    "math_verify": "math",
    "ray": "ray",
    "lm_eval": "lm-eval",
    "huggingface_hub": "hub",
    "inspect_ai": "inspect",
    "mlflow": "mlflow",
    "wandb": "wandb",
}
"""Top-level module → the extra that installs it."""

MODULES_OF: dict[str, tuple[str, ...]] = {}
for _module, _extra in EXTRA_OF.items():
    MODULES_OF[_extra] = (*MODULES_OF.get(_extra, ()), _module)
"""Extra → the top-level modules it brings."""


def install_command(extra: str) -> str:
    return f"pip install '{DISTRIBUTION}[{extra}]'"


class MissingExtra(UsageError, ImportError):
    """``feature`` needs ``extra``, which is not installed (``module`` is the first of its modules missing)."""

    def __init__(self, extra: str, feature: str = "", module: str | None = None) -> None:
        self.extra, self.feature = extra, feature
        text = f"{feature + ' ' if feature else ''}needs the [{extra}] extra: {install_command(extra)}"
        super().__init__(text)
        self.name = module  # ImportError's: the module that is not there

    def line(self, command: str) -> str:
        """The one line the CLI prints: ``nel tui: needs the [tui] extra: pip install 'nel-workbench[tui]'``."""
        return f"{command}: {self}"


def missing_module(extra: str) -> str | None:
    """The first module of ``extra`` that is not installed, or ``None`` (nothing is imported)."""
    for module in MODULES_OF[extra]:
        try:
            if importlib.util.find_spec(module) is None:
                return module
        except (ImportError, ValueError):  # a broken or half-removed package
            return module
    return None


def require(extra: str, feature: str = "") -> None:
    """Raise ``MissingExtra`` unless every module of ``extra`` is installed; cheap (nothing is imported)."""
    module = missing_module(extra)
    if module is not None:
        raise MissingExtra(extra, feature, module)


def extra_for(exc: ImportError) -> str | None:
    """The extra whose module ``exc`` failed to import, if it is one of theirs."""
    name = getattr(exc, "name", None) or ""
    return EXTRA_OF.get(name.split(".")[0])


@contextlib.contextmanager
def needs_extra(feature: str = "") -> Iterator[None]:
    """Around the imports of something optional: a module of an extra that is missing becomes ``MissingExtra``
    (any other ``ImportError`` is a bug and stays as it is)."""
    try:
        yield
    except MissingExtra:
        raise
    except ImportError as exc:
        extra = extra_for(exc)
        if extra is None:
            raise
        raise MissingExtra(extra, feature, exc.name) from None


@contextlib.contextmanager
def environ_set(name: str, value: str) -> Iterator[None]:
    """``name=value`` in the environment for the block, as it was afterwards: how an extra's library is told
    something only a variable can tell it (lm-eval's progress bars, its ifeval module's download at import)."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before
