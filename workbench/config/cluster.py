"""The ``cluster:`` section of a config: where a suite runs when it is not on this machine.

Only SLURM is supported: ``type: slurm`` turns ``nel eval run CONFIG`` into a job array of shards and a
merge job (see ``workbench.workers.slurm``). ``type: local`` (or no section) runs here, which is how each
array task runs the same config (``-O cluster.type=local``). Values that end up in ``#SBATCH`` lines are
checked here so a script never carries a line break or a value SLURM would misread.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workbench.config.schema import _Checker

CLUSTER_TYPES = ("local", "slurm")
CLUSTER_KEYS = ("type", "shards", "walltime", "node_pools", "account", "qos", "cpus_per_task", "mem",
                "gpus_per_task", "job_name", "setup", "sbatch_args", "merge_walltime", "scripts_dir", "submit")
MAX_SHARDS = 10_000
DEFAULT_MERGE_WALLTIME = "00:30:00"

# SLURM's time formats: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S.
_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")
_MEM = re.compile(r"^\d+[KMGT]?$")
_GPUS = re.compile(r"^(?:[A-Za-z0-9_.-]+:)?[1-9]\d*$")
_NAME = re.compile(r"^[A-Za-z0-9_.+@-]+$")  # partitions, accounts, QOS and job names as sites write them


@dataclass(frozen=True, slots=True)
class Cluster:
    """A validated ``cluster: {type: slurm, ...}`` section; times are SLURM time strings."""

    type: str
    shards: int
    walltime: str | None = None
    node_pools: tuple[str, ...] = ()
    account: str | None = None
    qos: str | None = None
    cpus_per_task: int | None = None
    mem: str | None = None
    gpus_per_task: str | None = None
    job_name: str | None = None
    setup: tuple[str, ...] = ()
    sbatch_args: tuple[str, ...] = ()
    merge_walltime: str = DEFAULT_MERGE_WALLTIME
    scripts_dir: Path | None = None
    submit: bool = True


def slurm_time(text: str) -> str | None:
    """``text`` as a SLURM time limit if it is one (``90``, ``01:30:00``, ``2-00:00:00``), else ``None``."""
    m = _TIME.match(text.strip())
    if not m:
        return None
    days, first, second, third = m.groups()
    if days is not None:  # D-H, D-H:M, D-H:M:S
        if int(first) > 23 or any(v is not None and int(v) > 59 for v in (second, third)):
            return None
    elif third is not None:  # H:M:S
        if int(second) > 59 or int(third) > 59:
            return None
    elif second is not None and int(second) > 59:  # M:S
        return None
    return text.strip()


def _hms(seconds: int) -> str:
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _written_with_colon(c: _Checker, path: str) -> bool:
    """Whether the config file shows ``key: 1:30:00`` unquoted, which YAML 1.1 reads as 5400 (base 60)."""
    located = c.located
    line_no = located.lines.get(path)
    if line_no is None or path in located.overridden:
        return False
    try:
        line = located.file.read_text(encoding="utf-8").splitlines()[line_no - 1]
    except (OSError, IndexError):
        return False
    key = re.escape(path.rsplit(".", 1)[-1])
    m = re.search(rf"\b{key}\s*:\s*([^,}}#\s]+)", line)
    return bool(m and ":" in m.group(1))


def _time(c: _Checker) -> Callable[[Any, str], str]:
    def check(value: Any, path: str) -> str:
        if isinstance(value, int) and not isinstance(value, bool):
            if value < 1:
                raise c.fail(path, f"must be at least 1 minute, got {value}")
            # An unquoted 01:30:00 arrives as seconds (YAML's base-60 integers); a plain number is minutes.
            return _hms(value) if _written_with_colon(c, path) else str(value)
        if isinstance(value, str) and (text := slurm_time(value)) and text.strip("0:-"):
            return text
        raise c.fail(path, f"expected a time limit: minutes, HH:MM:SS or D-HH:MM:SS, got {value!r}")

    return check


def _pattern(c: _Checker, pattern: re.Pattern[str], what: str) -> Callable[[Any, str], str]:
    def check(value: Any, path: str) -> str:
        text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
        if not isinstance(text, str) or not pattern.match(text):
            raise c.fail(path, f"expected {what}, got {value!r}")
        return text

    return check


def _lines(c: _Checker, what: str) -> Callable[[Any, str], tuple[str, ...]]:
    def check(value: Any, path: str) -> tuple[str, ...]:
        lines = c.strings(value, path)
        for i, line in enumerate(lines):
            if "\n" in line or "\r" in line:
                raise c.fail(f"{path}.{i}" if isinstance(value, list) else path,
                             f"one {what} per list item; no line breaks inside one")
        return lines

    return check


def _options(c: _Checker) -> Callable[[Any, str], tuple[str, ...]]:
    lines = _lines(c, "sbatch option")

    def check(value: Any, path: str) -> tuple[str, ...]:
        options = lines(value, path)
        for i, option in enumerate(options):
            if not option.startswith("-"):
                raise c.fail(f"{path}.{i}" if isinstance(value, list) else path,
                             f"expected an sbatch option such as --constraint=a100, got {option!r}")
        return options

    return check


def _names(c: _Checker, value: Any, path: str) -> tuple[str, ...]:
    names = c.strings(value, path)
    for i, name in enumerate(names):
        if not _NAME.match(name):
            raise c.fail(f"{path}.{i}" if isinstance(value, list) else path,
                         f"{name!r} is not a partition name (letters, digits, _ . + @ -)")
    return names


def parse_cluster(c: _Checker, value: Any, path: str = "cluster") -> Cluster | None:
    """The ``cluster:`` section, or ``None`` when the suite runs on this machine (``type: local``)."""
    t = c.mapping(value, path, CLUSTER_KEYS)
    kind = c.get(t, "type", path, c.choice(CLUSTER_TYPES), required=True)
    if kind == "local":  # the other keys may stay (-O cluster.type=local runs a SLURM config here)
        return None
    name = _pattern(c, _NAME, "a name of letters, digits and _ . + @ -")
    return Cluster(
        type=kind,
        shards=c.get(t, "shards", path, _max(c, c.integer(1), MAX_SHARDS), required=True),
        walltime=c.get(t, "walltime", path, _time(c)),
        node_pools=c.get(t, "node_pools", path, lambda v, p: _names(c, v, p), default=()),
        account=c.get(t, "account", path, name),
        qos=c.get(t, "qos", path, name),
        cpus_per_task=c.get(t, "cpus_per_task", path, c.integer(1)),
        mem=c.get(t, "mem", path, _pattern(c, _MEM, "memory like 8G, 512M or 4096 (megabytes)")),
        gpus_per_task=c.get(t, "gpus_per_task", path, _pattern(c, _GPUS, "a GPU count like 1, or TYPE:COUNT")),
        job_name=c.get(t, "job_name", path, name),
        setup=c.get(t, "setup", path, _lines(c, "shell line"), default=()),
        sbatch_args=c.get(t, "sbatch_args", path, _options(c), default=()),
        merge_walltime=c.get(t, "merge_walltime", path, _time(c), default=DEFAULT_MERGE_WALLTIME),
        scripts_dir=c.get(t, "scripts_dir", path, lambda v, p: Path(c.string(v, p))),
        submit=c.get(t, "submit", path, c.boolean, default=True),
    )


def _max(c: _Checker, check: Callable[[Any, str], int], maximum: int) -> Callable[[Any, str], int]:
    def bounded(value: Any, path: str) -> int:
        number = check(value, path)
        if number > maximum:
            raise c.fail(path, f"must be at most {maximum}, got {number}")
        return number

    return bounded
