"""Loading an lm-evaluation-harness task the way ``simple_evaluate`` loads it, with nel's one-line errors.

``lm_eval`` is imported here, once per process and only when a run (or the mock model) builds an
``lm-eval://`` benchmark. What ``simple_evaluate`` does to a task before it builds requests is done here in the
same order (the global seeds, ``num_fewshot`` unless the task pins 0, the few-shot sampler's seed), so the
prompts are the ones lm-eval itself would send. One thing is done faster than lm-eval does it, with the same
result: a task's Jinja templates are compiled once, not once per field per document (``memoise_templates``).
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import importlib.util
import os
import random
from typing import TYPE_CHECKING, Any

from workbench.errors import UsageError
from workbench.extras import MissingExtra, environ_set
from workbench.lmeval.uri import LmEvalUri

if TYPE_CHECKING:
    from lm_eval.api.task import Task

EXTRA = "lm-eval"
SUPPORTED_OUTPUT_TYPE = "generate_until"
SIMPLE_EVALUATE_RANDOM_SEED = 0
"""``lm_eval.defaults.DEFAULT_RANDOM_SEED``: ``simple_evaluate`` seeds ``random`` with it before loading tasks."""
SIMPLE_EVALUATE_NUMPY_SEED = 1234
"""``lm_eval.defaults.DEFAULT_OTHER_SEED``: and numpy with this (a task's ``process_docs`` may sample)."""


def require_lm_eval(feature: str) -> None:
    """``MissingExtra`` (one line, exit 2) unless ``lm_eval`` is installed; imports nothing."""
    try:
        missing = importlib.util.find_spec("lm_eval") is None
    except (ImportError, ValueError):
        missing = True
    if missing:
        raise MissingExtra(EXTRA, feature, "lm_eval")



def memoise_templates() -> None:
    """lm-eval compiles a task's Jinja template anew for every field of every document (``utils.apply_template``
    is ``env.from_string(template).render(**doc)``; lm-eval issue #1286): about a millisecond each, most of the
    cost of building a task's requests and of ``process_results``' ``doc_to_target``. Here the compiled template
    is kept by its source, in lm-eval's own Environment: the Template the next call would compile, rendered from
    the same document, so every string is the one lm-eval renders. Installed once per process (the first
    ``lm-eval://`` build); ``apply_template.__wrapped__`` is lm-eval's own function."""
    from lm_eval import utils

    if getattr(utils.apply_template, "_nel_memoised", False):
        return
    environment = utils.env

    @functools.lru_cache(maxsize=1024)
    def compiled(template: str) -> Any:
        return environment.from_string(template)

    @functools.wraps(utils.apply_template)
    def apply_template(template: str, doc: dict[str, Any]) -> str:
        return str(compiled(template).render(**doc))

    apply_template._nel_memoised = True  # type: ignore[attr-defined]
    utils.apply_template = apply_template


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _offline_hint() -> str:
    offline = [name for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
               if os.environ.get(name, "").lower() in ("1", "true", "yes", "on")]
    if offline:
        return (f" ({'/'.join(offline)} is set: fetch the dataset where the hub is reachable, or copy its "
                "Hugging Face cache here)")
    return ""


def _declared(manager: Any, name: str) -> dict[str, Any]:
    """What a task's YAML declares (with its includes), read without loading its data; ``{}`` if unreadable."""
    try:
        from lm_eval.tasks._yaml_loader import load_yaml

        entry = manager.task_index.get(name)
        if entry is None or entry.yaml_path is None:
            return {}
        config = load_yaml(entry.yaml_path, recursive=True)
        return config if isinstance(config, dict) else {}
    except Exception:  # an error message's detail, or a check lm-eval repeats after loading
        return {}


def _standalone(manager: Any, name: str) -> bool:
    """A task whose YAML names no other task (not a group or tag of others): the user's directory serves it
    alone, exactly as the whole index would (include_path takes precedence over the built-in tasks anyway)."""
    declared = _declared(manager, name)
    return bool(declared) and "task" in declared and not isinstance(declared["task"], list) and "group" not in declared


def _not_generate_until(shown: str, name: str, output_type: str) -> str:
    return (f"{shown}: lm-eval task {name!r} is {output_type} (scored by the log-likelihood of each choice); nel "
            "calls chat/completions APIs that return text, so only generate_until tasks run here")


def load_tasks(uri: LmEvalUri, shown: str) -> list[tuple[str, Task]]:
    """The leaf tasks ``uri`` names (one, or a group's or tag's), configured as ``simple_evaluate`` would.

    Errors are one line naming ``shown`` (the URI as the user wrote it): lm-eval not installed, an unknown task
    (with the closest names), data that cannot be loaded (naming the dataset), a task nel cannot run."""
    require_lm_eval(f"{shown}:")
    with environ_set("TQDM_DISABLE", "1"):  # lm-eval draws a progress bar per task: not on nel's terminal
        from lm_eval.tasks import TaskManager

        memoise_templates()
        include = None if uri.include_path is None else str(uri.include_path)
        manager = None
        if include is not None:  # a user's task: index their directory alone first (lm-eval's ~14,000 YAMLs
            own = TaskManager(include_path=include, include_defaults=False)  # take seconds to scan)
            if uri.task in own.all_tasks and _standalone(own, uri.task):
                manager = own
        if manager is None:
            manager = TaskManager(include_path=include)
        if uri.task not in manager.all_tasks:
            close = difflib.get_close_matches(uri.task, manager.all_tasks, n=5, cutoff=0.6)
            where = f" (built-in or under {uri.include_path})" if include else ""
            hint = f"; closest: {', '.join(close)}" if close else "; list them with: lm_eval ls tasks"
            raise UsageError(f"{shown}: unknown lm-eval task {uri.task!r}{where}{hint}")
        declared = _declared(manager, uri.task).get("output_type")
        if declared is not None and declared != SUPPORTED_OUTPUT_TYPE:  # before its data is loaded
            raise UsageError(_not_generate_until(shown, uri.task, str(declared)))
        random.seed(SIMPLE_EVALUATE_RANDOM_SEED)
        with contextlib.suppress(ImportError):
            import numpy as np

            np.random.seed(SIMPLE_EVALUATE_NUMPY_SEED)
        try:
            loaded = manager.load([uri.task])
        except (KeyboardInterrupt, UsageError):
            raise
        except Exception as exc:
            dataset = _declared(manager, uri.task).get("dataset_path", "?")
            raise UsageError(f"{shown}: cannot load the data of lm-eval task {uri.task!r} (dataset {dataset}): "
                             f"{_first_line(exc)}{_offline_hint()}") from None
    tasks = sorted(loaded["tasks"].items())
    for name, task in tasks:
        _configure(uri, shown, name, task)
    return tasks


def _configure(uri: LmEvalUri, shown: str, name: str, task: Task) -> None:
    output_type = task.get_config("output_type")
    if output_type != SUPPORTED_OUTPUT_TYPE:
        raise UsageError(_not_generate_until(shown, name, str(output_type)))
    repeats = task.get_config("repeats") or 1
    if repeats != 1:
        raise UsageError(f"{shown}: lm-eval task {name!r} samples each document {repeats} times (repeats: "
                         f"{repeats}) and scores them together; nel scores each attempt on its own: use a variant "
                         "without repeats and nel's --repeats")
    # As simple_evaluate: the URI's num_fewshot, unless the task pins 0; a task without one gets 0.
    if uri.num_fewshot is not None:
        if task.get_config("num_fewshot") != 0:
            task.set_config(key="num_fewshot", value=uri.num_fewshot)
    elif task.get_config("num_fewshot") is None:
        task.set_config(key="num_fewshot", value=0)
