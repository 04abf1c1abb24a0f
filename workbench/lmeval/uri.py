"""The grammar of ``lm-eval://TASK[?num_fewshot=N&include_path=DIR&fewshot_seed=S&fewshot_as_multiturn=B]``.

Parsed without importing ``lm_eval`` (its import costs seconds): ``nel --help``, ``nel list`` and a config
check stay fast, and a typo is reported before anything heavy starts. The keys are the ``lm_eval`` /
``simple_evaluate`` options that decide what is sent to the model; their defaults are ``simple_evaluate``'s,
so ``lm-eval://gsm8k`` asks what ``lm_eval --tasks gsm8k --apply_chat_template`` asks.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from workbench.errors import UsageError

SCHEME = "lm-eval"

DEFAULT_FEWSHOT_SEED = 1234
"""``lm_eval.defaults.DEFAULT_OTHER_SEED``: the few-shot sampler's seed ``simple_evaluate`` uses."""

QUERY_KEYS: dict[str, str] = {
    "num_fewshot": "examples in the few-shot context (lm_eval --num_fewshot; default: the task's own)",
    "include_path": "a directory of the user's task YAMLs (lm_eval --include_path)",
    "fewshot_seed": f"the few-shot sampler's seed (lm_eval --seed ...,...,...,S; default {DEFAULT_FEWSHOT_SEED})",
    "fewshot_as_multiturn": "few-shot examples as chat turns, true or false (default true, as simple_evaluate)",
}
"""The query keys ``lm-eval://`` accepts, and what each means."""

_BOOLS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


@dataclass(frozen=True, slots=True)
class LmEvalUri:
    """An ``lm-eval://`` benchmark name, parsed."""

    task: str
    num_fewshot: int | None = None
    include_path: Path | None = None
    fewshot_seed: int = DEFAULT_FEWSHOT_SEED
    fewshot_as_multiturn: bool = True

    def identity(self) -> dict[str, object]:
        """What in the URI decides the prompts (the include path by its resolved location)."""
        return {"task": self.task, "num_fewshot": self.num_fewshot,
                "include_path": None if self.include_path is None else str(self.include_path.resolve()),
                "fewshot_seed": self.fewshot_seed, "fewshot_as_multiturn": self.fewshot_as_multiturn}


def _int(uri: str, key: str, text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise UsageError(f"bad benchmark URL {uri!r}: {key}: expected an integer >= {minimum}, got {text!r}")
    return value


def parse_lmeval_uri(uri: str) -> LmEvalUri:
    """The parsed URI; a one-line ``UsageError`` naming the part that is wrong. Nothing is imported or read
    beyond checking that ``include_path`` is a directory."""
    parts = urlsplit(uri)
    if parts.scheme != SCHEME:
        raise UsageError(f"bad benchmark URL {uri!r}: expected {SCHEME}://TASK")
    task = parts.netloc + parts.path
    if not task or "/" in task:
        raise UsageError(f"bad benchmark URL {uri!r}: expected {SCHEME}://TASK with one task or group name "
                         "(e.g. lm-eval://gsm8k)")
    if parts.fragment:
        raise UsageError(f"bad benchmark URL {uri!r}: a fragment ('#{parts.fragment}') means nothing here")
    values: dict[str, str] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False):
        if key not in QUERY_KEYS:
            raise UsageError(f"bad benchmark URL {uri!r}: unknown query key {key!r}; known keys: "
                             f"{', '.join(QUERY_KEYS)}")
        if key in values:
            raise UsageError(f"bad benchmark URL {uri!r}: {key} is given twice")
        values[key] = value
    parsed = LmEvalUri(task=task)
    if "num_fewshot" in values:
        parsed = replace(parsed, num_fewshot=_int(uri, "num_fewshot", values["num_fewshot"], 0))
    if "fewshot_seed" in values:
        parsed = replace(parsed, fewshot_seed=_int(uri, "fewshot_seed", values["fewshot_seed"], 0))
    if "fewshot_as_multiturn" in values:
        flag = _BOOLS.get(values["fewshot_as_multiturn"].lower())
        if flag is None:
            raise UsageError(f"bad benchmark URL {uri!r}: fewshot_as_multiturn: expected true or false, "
                             f"got {values['fewshot_as_multiturn']!r}")
        parsed = replace(parsed, fewshot_as_multiturn=flag)
    if "include_path" in values:
        directory = Path(values["include_path"]).expanduser()
        if not directory.is_dir():
            raise UsageError(f"bad benchmark URL {uri!r}: include_path: {directory} is not a directory")
        parsed = replace(parsed, include_path=directory)
    return parsed
