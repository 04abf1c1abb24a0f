"""What a background run is asked to do, checked before any process starts.

A ``RunRequest`` is the new-run form of the TUI (and ``nel eval run --background``) as data: a benchmark with
a model, or a config file, plus repeats, problems, concurrency and shards — or the ``RunSpec`` the command line
built. ``worker_spec`` is the one run specification every shard worker is handed (as JSON, ``nel eval run
--spec FILE``), so a background run behaves exactly like one typed in a terminal. No secret is ever part of it:
API keys reach the workers through their environment (``workbench.spec.io``), never through argv (visible in
``ps``) or a state file.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import orjson

from workbench.errors import UsageError
from workbench.limits import MAX_CONCURRENT, MAX_REPEATS
from workbench.secrets import url_has_credentials
from workbench.spec import RunSpec
from workbench.spec.flags import spec_from_values
from workbench.spec.io import spec_json
from workbench.spec.models import Output

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
    values: dict[str, Any] = field(default_factory=dict)
    """More of the spec's flag fields, by destination (``temperature``, ``system_prompt`` ...): what a form shows
    beyond the fields above (``workbench.spec.flags.form_fields``)."""
    spec: RunSpec | None = None
    """The run specification itself (what `nel eval run --background` built from its flags or config file);
    None: built from the fields above."""

    @property
    def uses_mock(self) -> bool:
        return self.model_url == MOCK

    def validate(self) -> None:
        """Raise ``UsageError`` naming the first field that is wrong."""
        if self.spec is not None:
            self._validate_launch()
            for name, service in self.spec.services.items():
                if url_has_credentials(service.url):
                    raise UsageError(f"services.{name}.url: carries credentials (user:password@ or a key in its "
                                     "query string), which a background run would write into its state file and "
                                     "every worker's specification; pass the key in $NEMO_API_KEY, or as api_key: "
                                     "${VAR} in a config file")
            return
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
        self._validate_launch()

    def _validate_launch(self) -> None:
        if not 1 <= self.shards <= MAX_SHARDS:
            raise UsageError(f"shards: must be within 1..{MAX_SHARDS}, got {self.shards}")
        if self.mock_latency_ms < 0:
            raise UsageError(f"mock_latency_ms: must be at least 0, got {self.mock_latency_ms}")

    def worker_spec(self, model_url: str | None = None) -> RunSpec:
        """The spec every shard worker runs (``model_url`` replaces ``mock`` once the mock runs), its runs
        going to this request's store and output directory."""
        output = {"dir": str(self.output_dir), "store": str(self.store)}
        if self.spec is not None:
            spec = self.spec
        elif self.config is not None:
            from workbench.spec import load_config

            spec, _ = load_config(self.config)
        else:
            values = {**self.values, "bench": self.bench, "model_url": model_url or self.model_url,
                      "model_id": self.model_id, "repeats": self.repeats, "max_problems": self.max_problems,
                      "max_concurrent": self.max_concurrent, "run_id": self.run_id, "output_dir": str(self.output_dir),
                      "store": str(self.store), "sandbox": None if self.sandbox is None else {"type": self.sandbox}}
            return spec_from_values(values, lambda f: f.dest)
        benchmarks = spec.benchmarks
        if self.run_id is not None and len(benchmarks) == 1 and benchmarks[0].run_id is None:
            benchmarks = [benchmarks[0].model_copy(update={"run_id": self.run_id})]
        return spec.model_copy(update={"output": Output.model_validate(output), "benchmarks": benchmarks})

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "spec"}
        data = {k: str(v) if isinstance(v, Path) else v for k, v in data.items()}
        data["spec"] = None if self.spec is None else orjson.loads(spec_json(self.spec))  # no key in it
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunRequest:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        for key in ("store", "output_dir", "config"):
            if values.get(key) is not None:
                values[key] = Path(values[key])
        if values.get("spec") is not None:
            values["spec"] = RunSpec.model_validate(values["spec"])
        return cls(**values)
