"""What a background run is asked to do, checked before any process starts.

A ``RunRequest`` is the new-run form of the TUI (and ``nel eval run --background``) as data:
a benchmark with a model, or a config file, plus repeats, problems, concurrency and shards. It turns
into the ``nel eval run`` command line each shard worker runs, so a background run behaves exactly
like one typed in a terminal. No secret is ever part of it: API keys reach the workers through their
environment ($NEMO_API_KEY / $OPENAI_API_KEY), never through argv (visible in ``ps``) or a state file.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from workbench.errors import UsageError
from workbench.limits import MAX_CONCURRENT, MAX_REPEATS
from workbench.secrets import url_has_credentials

MOCK = "mock"
"""``model_url`` that asks the supervisor to start the built-in mock model (a labelled test model)."""
MAX_SHARDS = 64


@dataclass(frozen=True, slots=True)
class RunRequest:
    """One background run. Either ``bench`` + ``model_url`` + ``model_id``, or ``config``."""

    store: Path
    output_dir: Path
    bench: str | None = None
    model_url: str | None = None
    model_id: str | None = None
    config: Path | None = None
    repeats: int | None = None
    max_problems: int | None = None
    max_concurrent: int | None = None
    shards: int = 1
    run_id: str | None = None
    sandbox: str | None = None
    """``docker`` or ``local``: a sandbox per attempt, for benchmarks that run code or give an agent tools."""
    mock_latency_ms: float = 0.0
    extra_args: tuple[str, ...] = ()
    """More ``nel eval run`` arguments, passed on as given (model settings from the command line, a config
    file's ``-O`` overrides): what the form has no field for still reaches every worker."""

    @property
    def uses_mock(self) -> bool:
        return self.model_url == MOCK

    def validate(self) -> None:
        """Raise ``UsageError`` naming the first field that is wrong."""
        if self.config is not None:
            if self.bench or self.model_url or self.model_id:
                raise UsageError("config: give a config file or a benchmark with a model, not both")
            if not self.config.is_file():
                raise UsageError(f"config: {self.config}: no such file")
            for name in ("run_id", "repeats", "max_problems", "max_concurrent", "sandbox"):
                if getattr(self, name) is not None:
                    raise UsageError(f"{name}: set it in the config file (or -O), not beside one")
        else:
            for name in ("bench", "model_url", "model_id"):
                if not getattr(self, name):
                    raise UsageError(f"{name}: required (or give a config file)")
            if not self.uses_mock:
                url = urlparse(str(self.model_url))
                if url.scheme not in ("http", "https") or not url.netloc:
                    raise UsageError(f"model_url: {self.model_url!r} is not an http(s) URL (or 'mock')")
                if url_has_credentials(str(self.model_url)):
                    raise UsageError("model_url: carries credentials (user:password@ or a key in its query string), "
                                     "which a background run would write into its state file and every worker's "
                                     "command line; pass the key in $NEMO_API_KEY, or run a config file whose "
                                     "url reads it from the environment (url: ...?key=${VAR})")
        for name in ("repeats", "max_problems"):  # a config file's own are checked when it loads
            value = getattr(self, name)
            if value is not None and value < 1:
                raise UsageError(f"{name}: must be at least 1, got {value}")
        if self.max_concurrent is not None and self.max_concurrent < 1:
            raise UsageError(f"max_concurrent: must be at least 1, got {self.max_concurrent}")
        if self.repeats is not None:
            MAX_REPEATS.check("repeats", self.repeats)
        if self.max_concurrent is not None:
            MAX_CONCURRENT.check("max_concurrent", self.max_concurrent)
        if self.sandbox not in (None, "docker", "local"):
            raise UsageError(f"sandbox: expected docker or local, got {self.sandbox!r}")
        if not 1 <= self.shards <= MAX_SHARDS:
            raise UsageError(f"shards: must be within 1..{MAX_SHARDS}, got {self.shards}")
        if self.mock_latency_ms < 0:
            raise UsageError(f"mock_latency_ms: must be at least 0, got {self.mock_latency_ms}")

    def argv(self, model_url: str | None = None, *, resume: bool = False) -> list[str]:
        """The ``nel eval run`` arguments of every shard (``model_url`` replaces ``mock`` once it runs)."""
        args = ["eval", "run"]
        if self.config is not None:
            args += [str(self.config)]
            for override in self.config_overrides():
                args += ["-O", override]
            args += [*self.extra_args, "--no-progress"]
            return [*args, "--resume"] if resume else args
        args += ["-b", str(self.bench), "--model-url", str(model_url or self.model_url),
                 "--model-id", str(self.model_id), "--output-dir", str(self.output_dir)]
        if self.max_concurrent is not None:
            args += ["--max-concurrent", str(self.max_concurrent)]
        if self.repeats is not None:
            args += ["--repeats", str(self.repeats)]
        if self.max_problems is not None:
            args += ["--max-problems", str(self.max_problems)]
        if self.run_id is not None:
            args += ["--run-id", self.run_id]
        if self.sandbox is not None:
            args += ["--sandbox", self.sandbox]
        args += [*self.extra_args, "--store", str(self.store), "--no-progress"]
        return [*args, "--resume"] if resume else args

    def config_overrides(self) -> list[str]:
        """A config file's runs go to this request's store and output directory."""
        return [f"output.dir={self.output_dir}", f"output.store={self.store}"]

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        return {k: str(v) if isinstance(v, Path) else v for k, v in data.items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunRequest:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        for key in ("store", "output_dir", "config"):
            if values.get(key) is not None:
                values[key] = Path(values[key])
        values["extra_args"] = tuple(values.get("extra_args") or ())
        return cls(**values)
