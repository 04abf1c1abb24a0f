"""``RunSpec``: one typed, validated description of an evaluation (NeMo Evaluator's schema).

Services (model endpoints, or NeMo Gym resources servers whose tools an agent calls), benchmarks (each with its
solver, scoring, sandbox, repeats, problems, concurrency, timeouts), named sandboxes, BYOB files, the cluster and
the output. A YAML config with ``-O`` overrides, the flags of `nel eval run -b ...`, the TUI's new-run form and
every worker (as JSON) all build or read this one object; ``nel config schema`` prints its JSON Schema.

Validation is pydantic's, strict (no "4" for 4, no true for 1), with unknown keys refused; the checks that span
sections (a solver naming a service, a judge grading itself, a sandbox named but not defined) run once the
sections are valid. ``workbench.spec.errors`` turns the first problem into today's one-line message naming the
file, line and dot-path (or the flag).
"""

from __future__ import annotations

import dataclasses
import json
import re
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    ValidationInfo,
    create_model,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from workbench.limits import MAX_CONCURRENT, MAX_REPEATS, Limit
from workbench.sandbox.spec import SandboxSpec
from workbench.spec.fields import Flag, Fraction, NonEmpty, Positive, Seconds, Strings, kind_of

PROTOCOLS = ("chat_completions", "completions", "responses")
MAIN = "main"
"""The service a run from flags (`nel eval run -b ... --model-url ...`) calls."""
JUDGE = "judge"


def problem(message: str, field: str | None = None) -> PydanticCustomError:
    """A validation problem in today's words; ``field`` names the key below the validated object it concerns."""
    return PydanticCustomError("nel", "{message}", {"message": message, "field": field})


class SpecProblem(Exception):
    """A problem found across sections, at an absolute dot-path (``benchmarks.0.solver.service``)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path, self.message = path, message


class Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", validate_default=False)


def _limited(limit: Limit) -> Any:
    def check(value: int | None) -> int | None:
        if value is None:
            return None
        reason = limit.exceeded(value)
        if reason is not None:
            raise problem(f"{value:,} is {reason}")
        return value

    from pydantic import AfterValidator

    return AfterValidator(check)


# ---- services -------------------------------------------------------------------------------------------------
BODY_KEYS = frozenset({"model", "messages", "prompt", "input", "instructions", "stream", "temperature", "top_p",
                       "max_tokens", "max_output_tokens", "seed", "stop", "frequency_penalty", "presence_penalty"})
"""The request-body keys nel sets itself (``workbench.model.client.build_body``)."""


def json_object(text: str) -> dict[str, Any]:
    """A flag's text read as a JSON object (``--extra-body '{"top_k": 20}'``)."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {kind_of(value)}")
    return value


class Generation(Strict):
    """Sampling parameters sent with every request (and part of the run's identity)."""

    temperature: Annotated[float | None, Field(ge=0.0, le=2.0),
                           Flag("--temperature", "sampling temperature", form=12,
                                placeholder="the model's default")] = None
    top_p: Annotated[float | None, Field(gt=0.0, le=1.0), Flag("--top-p", "nucleus sampling")] = None
    max_tokens: Annotated[int | None, Field(ge=1), Flag("--max-tokens", "largest completion", metavar="N")] = None
    seed: Annotated[int | None, Field(ge=-(2**63)),
                    Flag("--seed", "sampling seed; attempt r of a problem is sent seed + r", form=13,
                         placeholder="none (attempt r of a problem is sent seed + r)")] = None
    stop: Annotated[Strings | None, Flag("--stop", "stop sequence (repeatable)", metavar="TEXT", repeat=True)] = None
    frequency_penalty: Annotated[float | None, Field(ge=-2.0, le=2.0)] = None
    presence_penalty: Annotated[float | None, Field(ge=-2.0, le=2.0)] = None
    extra_body: Annotated[dict[str, Any] | None,
                          Flag("--extra-body", "JSON object merged into every request body: a server's own "
                               "parameters, such as vLLM's top_k or chat_template_kwargs", metavar="JSON",
                               parse=json_object, form=11, label="extra request body (JSON)",
                               placeholder='{"chat_template_kwargs": {"enable_thinking": false}}')] = None
    """Sent as given (part of the run's identity); a key nel sets itself is refused, so a setting has one home."""

    @field_validator("extra_body")
    @classmethod
    def _not_nels_own(cls, body: dict[str, Any] | None) -> dict[str, Any] | None:
        for key in body or {}:
            if key in BODY_KEYS:
                own = f"generation.{key}" if key in cls.model_fields else "nel"
                raise problem(f"{key!r} is set by {own}, not here", field=key)
        return body


class InterceptorSettings(Strict):
    """One entry of ``services.NAME.interceptors``: a built-in (``cache``, ``request_log``, ``turn_counter``) or a
    user's class (``package.module:ClassName``) with its ``config`` (docs/interceptors.md)."""

    name: NonEmpty
    config: dict[str, Any] = {}

    @model_validator(mode="after")
    def _known(self) -> InterceptorSettings:
        from workbench.model.interceptors.registry import check_config, known_name

        if (why := known_name(self.name)) is not None:
            raise problem(why, "name")
        if (why := check_config(self.name, self.config)) is not None:
            key, _, message = why.partition(": ")
            raise problem(message, f"config.{key}")
        return self


class InterceptorsMixin(Strict):
    """``interceptors: [{name, config}]`` between the solver and a model service (any service type that serves a
    model inherits it), applied in order to every request."""

    interceptors: list[InterceptorSettings] = []

    @field_validator("interceptors")
    @classmethod
    def _once_each_builtin(cls, value: list[InterceptorSettings]) -> list[InterceptorSettings]:
        from workbench.model.interceptors.registry import BUILTIN

        seen: set[str] = set()
        for i, item in enumerate(value):
            if item.name in BUILTIN and item.name in seen:
                raise problem(f"{item.name!r} is listed twice; keep one", f"{i}.name")
            seen.add(item.name)
        return value


class ApiService(InterceptorsMixin):
    """``type: api``: an OpenAI-compatible model endpoint."""

    type: Literal["api"] = "api"
    url: Annotated[NonEmpty, Flag("--model-url", "OpenAI-compatible base URL (…/v1) or full endpoint URL",
                                  form=2, label="model URL", placeholder="http://HOST:PORT/v1")]
    protocol: Annotated[Literal["chat_completions", "completions", "responses"] | None,
                        Flag("--protocol", "endpoint protocol (default: from the URL, else chat_completions)")] = None
    model: Annotated[NonEmpty, Flag("--model-id", "model name sent in each request", metavar="NAME", form=3,
                                    label="model id", placeholder="the model name sent in each request")]
    api_key: Annotated[NonEmpty | None, Field(repr=False, exclude=True),
                       Flag("--api-key", "API key (prefer $NEMO_API_KEY or $OPENAI_API_KEY: never stored)")] = None
    """Never serialised: a worker gets it through its environment (``workbench.spec.io``)."""
    generation: Generation = Generation()
    max_retries: Annotated[int, Field(ge=0), Flag("--max-retries", "retries on 429, 5xx, timeouts (default 5)")] = 5

    @property
    def kind(self) -> str:
        return "api"

    @model_validator(mode="after")
    def _protocol_fits(self) -> ApiService:
        if self.protocol == "responses" and self.generation.stop:
            raise problem("the responses protocol has no stop sequences", "generation.stop")
        return self


class ResourcesService(Strict):
    """``type: resources``: a NeMo Gym resources server, whose tools an agent may call (no model)."""

    type: Literal["resources"]
    url: NonEmpty

    @property
    def kind(self) -> str:
        return "resources"

    @property
    def model(self) -> str:
        return ""


_SECRET_FLAG = re.compile(r"^--?[A-Za-z0-9_-]*(key|token|secret|password)[A-Za-z0-9_-]*$", re.IGNORECASE)


def redact_args(args: list[str]) -> list[str]:
    """``args`` with the value of every secret-like flag (``--api-key X``, ``--hf-token=X``) replaced."""
    out: list[str] = []
    for arg in args:
        name, eq, _ = arg.partition("=")
        if eq and _SECRET_FLAG.match(name):
            out.append(f"{name}=REDACTED")
        elif out and _SECRET_FLAG.match(out[-1]) and not arg.startswith("-"):
            out.append("REDACTED")
        else:
            out.append(arg)
    return out


SERVER_TYPES = ("vllm", "sglang", "trt_llm", "command")
"""Service types nel starts itself (``workbench.services``): a model server it serves the run with."""


class ServerService(InterceptorsMixin):
    """``type: vllm | sglang | trt_llm | command``: a model server nel starts before the first benchmark that uses
    it, waits for (``GET /v1/models``) and stops after the last one; the benchmarks call it like an ``api``
    service at ``http://127.0.0.1:PORT/v1`` (docs/services.md)."""

    type: Literal["vllm", "sglang", "trt_llm", "command"]
    model: NonEmpty
    """What the server serves (vLLM's MODEL argument) and the model name every request sends."""
    command: Annotated[list[NonEmpty] | None, Field(min_length=1)] = None
    """``type: command`` only: the server's argv; ``{port}`` and ``{model}`` are replaced."""
    port: Annotated[int | None, Field(ge=1, le=65535)] = None
    """None: a free port nel picks each time (so the port is never part of the run's identity)."""
    tensor_parallel_size: Positive | None = None
    extra_args: list[str] = []
    env: dict[str, str] = {}
    """Set in the server's environment; the values are never recorded (only the names are)."""
    startup_timeout: Seconds = 600.0
    node_pool: NonEmpty | None = None
    depends_on: Strings = ()
    protocol: Literal["chat_completions", "completions", "responses"] = "chat_completions"
    generation: Generation = Generation()
    max_retries: Annotated[int, Field(ge=0)] = 5

    _port: int | None = PrivateAttr(default=None)

    @property
    def kind(self) -> str:
        return "api"  # the benchmarks call it as they call an api service

    _host: str = PrivateAttr(default="127.0.0.1")

    @property
    def url(self) -> str:
        """Its base URL once started (``bind``); before, with the configured port (or 0: not yet picked)."""
        return f"http://{self._host}:{self._port or self.port or 0}/v1"

    def bind(self, port: int | None, host: str = "127.0.0.1") -> None:
        """The port (and host: a SLURM job's pool node) the started server listens on; None once stopped."""
        self._port, self._host = port, host

    def served(self) -> dict[str, Any]:
        """What the server serves, for the run's identity: the model and every argument, with the values of
        secret-like flags (``--api-key X``) and of ``env`` left out, and never the port (picked afresh)."""
        return {"type": self.type, "model": self.model, "tensor_parallel_size": self.tensor_parallel_size,
                "command": redact_args(self.command or []), "extra_args": redact_args(self.extra_args),
                "env": sorted(self.env)}

    def secrets(self) -> list[str]:
        """The values that must never be shown or stored: of secret-like flags, and of secret-named ``env``."""
        args = [*(self.command or []), *self.extra_args]
        hidden = [a.partition("=")[2] if "=" in a else a for a, r in zip(args, redact_args(args), strict=True)
                  if r != a]
        return hidden + [v for k, v in self.env.items() if _SECRET_FLAG.match(f"--{k}")]

    @property
    def api_key(self) -> str | None:
        """The key the server was told to require (``--api-key KEY`` in its arguments): what nel sends it."""
        args = [*(self.command or []), *self.extra_args]
        for i, arg in enumerate(args):
            if arg == "--api-key" and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith("--api-key="):
                return arg.partition("=")[2]
        return None

    @model_validator(mode="after")
    def _command_fits(self) -> ServerService:
        if self.type == "command":
            if self.command is None:
                raise PydanticCustomError("missing", "missing required key 'command'", {"missing": "command"})
            if self.tensor_parallel_size is not None:
                raise problem("a command service sets its own parallelism: put it in command",
                              "tensor_parallel_size")
        elif self.command is not None:
            raise problem(f"type {self.type} builds its own command line; add flags with extra_args, or use "
                          "type: command", "command")
        if self.protocol == "responses" and self.generation.stop:
            raise problem("the responses protocol has no stop sequences", "generation.stop")
        return self


class GymService(Strict):
    """``type: gym``: a NeMo Gym deployment, reached through its head server (the address ``ng_run`` prints),
    whose agent servers a ``gym_delegation`` solver runs attempts on."""

    type: Literal["gym"]
    url: NonEmpty

    @property
    def kind(self) -> str:
        return "gym"

    @property
    def model(self) -> str:
        return ""


def _service_type(value: Any) -> str:
    return str(value.get("type", "api")) if isinstance(value, dict) else getattr(value, "type", "api")


Service = Annotated[Annotated[ApiService, Tag("api")] | Annotated[ResourcesService, Tag("resources")]
                    | Annotated[ServerService, Tag("vllm")] | Annotated[ServerService, Tag("sglang")]
                    | Annotated[ServerService, Tag("trt_llm")] | Annotated[ServerService, Tag("command")]
                    | Annotated[GymService, Tag("gym")], Discriminator(_service_type)]


def _cycle(services: dict[str, Any], start: str) -> list[str]:
    """The ``depends_on`` path from ``start`` back to itself (``[a, b, a]``), or ``[]`` when there is none."""
    def walk(name: str, path: list[str]) -> list[str]:
        for dep in getattr(services.get(name), "depends_on", ()):
            if dep == start:
                return [*path, dep]
            if dep not in path:
                found = walk(dep, [*path, dep])
                if found:
                    return found
        return []

    return walk(start, [start])


# ---- scoring --------------------------------------------------------------------------------------------------
JUDGE_ONLY_KEYS = ("service", "prompt", "allow_self_judge")


class MetricSettings(Strict):
    """One entry of ``scoring.metrics``: a library scorer (with ``params``) or a judge on a service."""

    type: NonEmpty
    name: NonEmpty | None = None
    params: dict[str, Any] = {}
    service: NonEmpty | None = None
    prompt: NonEmpty | None = None
    allow_self_judge: bool = False

    @field_validator("type")
    @classmethod
    def _known_type(cls, value: str) -> str:
        from workbench.scoring import scorer_names

        options = (*scorer_names(), JUDGE)
        if value not in options:
            raise problem(f"expected one of {', '.join(options)}, got {value!r}")
        return value

    @model_validator(mode="after")
    def _params_fit(self) -> MetricSettings:
        from workbench.errors import UsageError
        from workbench.scoring import check_params
        from workbench.scoring.judge import check_template

        if self.name is None:
            self.name = self.type
        if self.type != JUDGE:
            for key in JUDGE_ONLY_KEYS:
                if key in self.model_fields_set:
                    raise problem(f"only a judge metric takes {key!r} (this one is type {self.type!r})", key)
            try:
                self.params = check_params(self.type, self.params, "params")
            except UsageError as exc:
                where, _, message = str(exc).partition(": ")
                raise problem(message, where) from None
            return self
        if self.params:
            raise problem("a judge metric takes no params; it samples with its service's generation settings",
                          f"params.{next(iter(self.params))}")
        if self.service is None:
            raise PydanticCustomError("missing", "missing required key 'service'", {"missing": "service"})
        if self.prompt is not None and (why := check_template(self.prompt)):
            raise problem(why, "prompt")
        return self


class Scoring(Strict):
    """``include_defaults``: the benchmark's own scorer comes first (and is primary)."""

    metrics: list[MetricSettings] = []
    include_defaults: bool = True

    @model_validator(mode="after")
    def _something_scores(self) -> Scoring:
        if not self.include_defaults and not self.metrics:
            raise problem("include_defaults is false and no metrics are listed: nothing would score the answers")
        seen: dict[str, int] = {}
        for i, metric in enumerate(self.metrics):
            assert metric.name is not None
            if metric.name in seen:
                raise problem(f"another metric (metrics.{seen[metric.name]}) is already named {metric.name!r}; "
                              "give each metric its own name", f"metrics.{i}.name")
            seen[metric.name] = i
        return self


# ---- solvers and sandboxes ------------------------------------------------------------------------------------
ImageDetailField = Annotated[Literal["auto", "low", "high"] | None,
                             Flag("--image-detail", "the detail a prompt's images are sent at (default: the data's, "
                                  "else the server's)")]
class SimpleSolver(Strict):
    """One model call per attempt."""

    type: Literal["simple"] = "simple"
    service: NonEmpty | None = None
    system_prompt: NonEmpty | None = None
    image_detail: ImageDetailField = None


class ToolSolver(Strict):
    """``solver: {type: tool_calling, ...}``: the engine drives an agent loop; ``resource_service`` names a
    service whose tools (a NeMo Gym resources server's ``POST /{tool}`` endpoints) the agent may call."""

    type: Literal["tool_calling"]
    service: NonEmpty | None = None
    system_prompt: NonEmpty | None = None
    image_detail: ImageDetailField = None
    max_turns: Positive = 10
    sandbox_tools: bool = True
    resource_service: NonEmpty | None = None
    tool_timeout: Seconds = 60.0
    max_output_chars: Annotated[int, Field(ge=200)] = 10_000
    response_mode: Literal["final_message", "sandbox_artifact"] = "final_message"


class GymDelegationSolver(Strict):
    """``solver: {type: gym_delegation, ...}``: a NeMo Gym agent server (``gym_agent`` of the ``type: gym`` service
    ``gym_service``) runs each attempt through its ``/run``; nel keeps the transcript and scores the answer again
    with the benchmark's scorer unless ``trust_reward`` (docs/gym.md). ``service`` is the model the agent calls,
    as the run records it."""

    type: Literal["gym_delegation"]
    service: NonEmpty
    gym_service: NonEmpty
    gym_agent: NonEmpty | None = None
    trust_reward: bool = False
    system_prompt: NonEmpty | None = None
    timeout: Seconds = 600.0
    """Per attempt: a whole rollout (every model and tool call) must finish within it."""
    max_concurrent: Positive | None = None
    """Attempts the agent runs at once (default: the benchmark's max_concurrent)."""
    max_retries: Annotated[int, Field(ge=0)] = 3

    @property
    def image_detail(self) -> None:
        return None


def _solver_type(value: Any) -> str:
    return str(value.get("type", "simple")) if isinstance(value, dict) else getattr(value, "type", "simple")


Solver = Annotated[Annotated[SimpleSolver, Tag("simple")] | Annotated[ToolSolver, Tag("tool_calling")]
                   | Annotated[GymDelegationSolver, Tag("gym_delegation")], Discriminator(_solver_type)]


def _sandbox_model() -> type[BaseModel]:
    """The ``sandbox:`` mapping, made from ``SandboxSpec``'s own fields: the sandbox's settings are defined once."""
    hints = typing.get_type_hints(SandboxSpec)
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(SandboxSpec):
        if f.name == "labels":
            continue
        kind = hints[f.name]
        if typing.get_origin(kind) is Literal:  # its words are SandboxSpec.validate's ("'none' or 'bridge'")
            kind = Annotated[str, Field(json_schema_extra={"enum": list(typing.get_args(kind))})]
        fields[f.name] = (kind, f.default)
    return create_model("Sandbox", __base__=Strict, **fields)


Sandbox = _sandbox_model()


def sandbox_of(settings: BaseModel) -> SandboxSpec:
    """A validated ``sandbox:`` mapping as the ``SandboxSpec`` the sandboxes are opened with."""
    from workbench.errors import UsageError
    from workbench.spec.refused import refusal

    if (refused := refusal("sandbox", getattr(settings, "type", None))) is not None:
        raise UsageError(f"sandbox.type: {refused}")
    return SandboxSpec(**settings.model_dump()).validate()


def _sandbox_kind(value: Any) -> str:
    return "name" if isinstance(value, str) else "inline"


SandboxRef = Annotated[Annotated[NonEmpty, Tag("name")] | Annotated[Sandbox, Tag("inline")],  # type: ignore[valid-type]
                       Discriminator(_sandbox_kind)]


# ---- benchmarks -----------------------------------------------------------------------------------------------
def _range(text: str) -> list[int]:
    try:
        start, end = (int(p) for p in text.split(":"))
    except ValueError:
        raise ValueError(f"expected START:END (e.g. 0:100), got {text!r}") from None
    return [start, end]


class Benchmark(Strict):
    """One benchmark of the suite, evaluated with its solver's service."""

    name: Annotated[NonEmpty, Flag("--bench", "benchmark name (see `nel list`), a BYOB .py file or a gym:// URL",
                                   metavar="NAME", short="-b", form=1, label="benchmark")]
    dataset: Annotated[NonEmpty | None, Flag("--dataset", "run the benchmark's prompt and scorer over another "
                                             "dataset: hf://ORG/NAME[/PATH]?split=…&subset=…&revision=… or a local "
                                             ".jsonl/.csv/.parquet file (docs/datasets.md)", metavar="SOURCE")] = None
    solver: Solver = SimpleSolver()
    scoring: Scoring | None = None
    max_problems: Annotated[Positive | None, Flag("--max-problems", "evaluate only the first N problems",
                                                  metavar="N", short="-m", form=6, label="max problems",
                                                  placeholder="all")] = None
    repeats: Annotated[Positive | None, _limited(MAX_REPEATS),
                       Flag("--repeats", "attempts per problem (default: the benchmark's)", form=5, short="-n",
                            label="repeats", placeholder="the benchmark's default")] = None
    max_concurrent: Annotated[Positive, _limited(MAX_CONCURRENT),
                              Flag("--max-concurrent", "requests in flight (default 64)", form=7,
                                   label="concurrency", placeholder="64 requests in flight")] = 64
    timeout: Annotated[Seconds, Flag("--request-timeout", "per request, in seconds (default 120)",
                                     metavar="SECONDS")] = 120.0
    system_prompt: Annotated[NonEmpty | None, Flag("--system-prompt", "system prompt sent before each problem")] = None
    if typing.TYPE_CHECKING:  # once validated, the sandbox it resolved to (a named one included)
        sandbox: SandboxSpec | None
    else:
        sandbox: Annotated[SandboxRef | None,
                           Flag("--sandbox", "a sandbox per attempt, for benchmarks that run code or give an agent "
                                "tools (humaneval, file_tasks): docker (a container) or local (a subprocess with "
                                "rlimits: weaker isolation); a config sets every limit", metavar="{docker,local}",
                                form=9, label="sandbox", parse=lambda t: {"type": t})] = None
    max_error_rate: Annotated[Fraction, Flag("--max-error-rate", "the run fails (exit 1) when more than this "
                                             "fraction of its attempts reached no verdict (transport, server or "
                                             "scorer errors; default 0.5; 1 never fails on errors)",
                                             metavar="X")] = 0.5
    problem_range: Annotated[tuple[Annotated[int, Field(ge=0)], Annotated[int, Field(ge=1)]] | None,
                             Flag("--problem-range", "evaluate problems START..END-1", metavar="START:END",
                                  parse=_range)] = None
    run_id: Annotated[NonEmpty | None, Flag("--run-id", "name the run (all shards of a sharded run share it)",
                                            form=14, label="run id", placeholder="generated")] = None

    _path: str = PrivateAttr(default="")
    _service: str = PrivateAttr(default="")
    _sandbox: SandboxSpec | None = PrivateAttr(default=None)

    @field_validator("dataset")
    @classmethod
    def _dataset_grammar(cls, value: str | None) -> str | None:
        from workbench.datasources import is_hub_uri, parse_hub_uri
        from workbench.errors import UsageError

        if value is not None and is_hub_uri(value):
            try:
                parse_hub_uri(value)
            except UsageError as exc:
                raise problem(str(exc)) from None
        return value

    @field_validator("problem_range", mode="before")
    @classmethod
    def _range_list(cls, value: Any) -> Any:
        if isinstance(value, list):
            value = tuple(value)
        if isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, int) for v in value) \
                and value[1] <= value[0]:
            raise problem(f"expected 0 <= START < END, got {value[0]}:{value[1]}")
        return value

    @field_serializer("sandbox")
    def _sandbox_out(self, value: Any) -> Any:
        if isinstance(value, SandboxSpec):  # resolved: written back as the inline mapping it stands for
            return {k: v for k, v in dataclasses.asdict(value).items() if k != "labels"}
        return value.model_dump() if isinstance(value, BaseModel) else value

    @property
    def path(self) -> str:
        """Where this benchmark is in the spec (``benchmarks.0``), for messages."""
        return self._path

    @property
    def service(self) -> str:
        """The service its solver calls (the only one, when the solver names none)."""
        return self._service

    @property
    def tool_solver(self) -> ToolSolver | None:
        return self.solver if isinstance(self.solver, ToolSolver) else None

    @property
    def sandbox_spec(self) -> SandboxSpec | None:
        """The sandbox each attempt runs in (a named one resolved), or None."""
        return self._sandbox

    @property
    def effective_system_prompt(self) -> str | None:
        return self.system_prompt if self.system_prompt is not None else self.solver.system_prompt


# ---- the cluster and the output -------------------------------------------------------------------------------
_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")
_MEM = r"^\d+[KMGT]?$"
_GPUS = r"^(?:[A-Za-z0-9_.-]+:)?[1-9]\d*$"
_NAME = r"^[A-Za-z0-9_.+@-]+$"  # partitions, accounts, QOS and job names as sites write them
MAX_CLUSTER_SHARDS = 10_000
DEFAULT_MERGE_WALLTIME = "00:30:00"


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


def _pattern(pattern: str, what: str) -> Any:
    from pydantic import BeforeValidator

    compiled = re.compile(pattern)

    def check(value: Any) -> Any:
        text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
        if not isinstance(text, str) or not compiled.match(text):
            raise problem(f"expected {what}, got {value!r}")
        return text

    return BeforeValidator(check)


def _each_line(check: Any) -> Any:
    """A check of every item of a string-or-list field, naming the item (``setup.1``) when a list was given."""
    from pydantic import BeforeValidator

    def each(value: Any) -> Any:
        items = [value] if isinstance(value, str) else value
        if isinstance(items, list):
            for i, item in enumerate(items):
                if isinstance(item, str) and (why := check(item)):
                    raise problem(why, str(i) if isinstance(value, list) else None)
        return value

    return BeforeValidator(each)


def _lines(what: str, options: bool = False) -> Any:
    def check(line: str) -> str | None:
        if "\n" in line or "\r" in line:
            return f"one {what} per list item; no line breaks inside one"
        if options and not line.startswith("-"):
            return f"expected an sbatch option such as --constraint=a100, got {line!r}"
        return None

    return _each_line(check)


def _partition(name: str) -> str | None:
    return None if re.match(_NAME, name) else f"{name!r} is not a partition name (letters, digits, _ . + @ -)"


SlurmName = Annotated[str, _pattern(_NAME, "a name of letters, digits and _ . + @ -")]


def _walltime(value: Any, info: ValidationInfo) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise problem(f"must be at least 1 minute, got {value}")
        # An unquoted 01:30:00 arrives as seconds (YAML's base-60 integers); a plain number is minutes.
        colon = (info.context or {}).get("written_with_colon")
        key = f"cluster.{info.field_name}"
        return _hms(value) if colon is not None and colon(key) else str(value)
    if isinstance(value, str) and (text := slurm_time(value)) and text.strip("0:-"):
        return text
    raise problem(f"expected a time limit: minutes, HH:MM:SS or D-HH:MM:SS, got {value!r}")


_GRES = r"^[A-Za-z0-9_.:,-]+$"
_GRES_GPUS = re.compile(r"(?:^|,)gpu:(?:[A-Za-z0-9_.-]+:)?(\d+)(?:,|$)")
LEGACY_POOL = "default"
"""The one pool a list of partitions (``node_pools: [a, b]``, the older form) becomes."""


class NodePool(Strict):
    """``cluster.node_pools.NAME``: a group of nodes one component of the job runs on (NeMo Evaluator's keys)."""

    partition: Annotated[str, _pattern(r"^[A-Za-z0-9_.+@-]+(?:,[A-Za-z0-9_.+@-]+)*$",
                                       "a partition name, or several joined by commas")]
    nodes: Positive = 1
    ntasks_per_node: Positive = 1
    gres: Annotated[str | None, _pattern(_GRES, "generic resources like gpu:4 or gpu:a100:4")] = None
    cpus_per_task: Positive | None = None
    mem: Annotated[str | None, _pattern(_MEM, "memory like 8G, 512M or 4096 (megabytes)")] = None

    @property
    def gpus(self) -> int:
        """GPUs of the whole pool: ``gres: gpu:N`` (or ``gpu:TYPE:N``) on each of its ``nodes``; 0 without."""
        return self.gpus_per_node * self.nodes

    @property
    def gpus_per_node(self) -> int:
        """GPUs of one node (``gres: gpu:N``): what a server placed on the pool has, as it runs on one node."""
        m = _GRES_GPUS.search(self.gres or "")
        return int(m.group(1)) if m else 0


def _pools(value: Any) -> Any:
    """The older list of partitions (``[batch, batch_short]``: ``--partition=batch,batch_short``) as one pool."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        return value
    for i, item in enumerate(items):
        if isinstance(item, str) and (why := _partition(item)):
            raise problem(why, str(i) if isinstance(value, list) else None)
    if not all(isinstance(item, str) and item for item in items):
        raise problem(f"expected a mapping of named pools ({{NAME: {{partition: ...}}}}), got {kind_of(value)}")
    return {LEGACY_POOL: {"partition": ",".join(items)}} if items else {}


class Cluster(Strict):
    """``cluster: {type: slurm, ...}``: the suite runs as a SLURM job array of shards and a merge job; ``type:
    local`` (or no section) runs here, which is how each array task runs the same spec."""

    type: Literal["local", "slurm"]
    shards: Annotated[int, Field(ge=1, le=MAX_CLUSTER_SHARDS)] = 1
    walltime: str | None = None
    node_pools: Annotated[dict[str, NodePool], BeforeValidator(_pools)] = {}
    """Named pools, the first one the evaluation's; a service placed on another makes a heterogeneous job."""
    account: SlurmName | None = None
    qos: SlurmName | None = None
    cpus_per_task: Positive | None = None
    mem: Annotated[str | None, _pattern(_MEM, "memory like 8G, 512M or 4096 (megabytes)")] = None
    gpus_per_task: Annotated[str | None, _pattern(_GPUS, "a GPU count like 1, or TYPE:COUNT")] = None
    job_name: SlurmName | None = None
    setup: Annotated[Strings, _lines("shell line")] = ()
    sbatch_args: Annotated[Strings, _lines("sbatch option", options=True)] = ()
    merge_walltime: str = DEFAULT_MERGE_WALLTIME
    scripts_dir: Annotated[Path | None, Field(strict=False)] = None
    submit: bool = True

    @field_validator("walltime", "merge_walltime", mode="before")
    @classmethod
    def _times(cls, value: Any, info: ValidationInfo) -> Any:
        return _walltime(value, info)

    @model_validator(mode="before")
    @classmethod
    def _shards_for_slurm(cls, value: Any) -> Any:
        if isinstance(value, dict) and value.get("type") == "slurm" and "shards" not in value:
            raise PydanticCustomError("missing", "missing required key 'shards'", {"missing": "shards"})
        return value


class MlflowExportConfig(Strict):
    """NeMo Evaluator's ``export_config.mlflow`` keys; credentials only from the environment."""

    tracking_uri: NonEmpty | None = None
    experiment_name: NonEmpty | None = None
    run_name: NonEmpty | None = None
    tags: dict[str, str] = {}


class WandbExportConfig(Strict):
    """``export_config.wandb``: where the W&B run goes (``WANDB_API_KEY`` only from the environment)."""

    project: NonEmpty | None = None
    entity: NonEmpty | None = None
    name: NonEmpty | None = None
    tags: list[str] = []


class ExportConfig(Strict):
    mlflow: MlflowExportConfig | None = None
    wandb: WandbExportConfig | None = None


class Output(Strict):
    dir: Annotated[NonEmpty, Flag("--output-dir", "where runs and artifacts go (default nel-results/)",
                                  metavar="DIR", short="-o")] = "nel-results"
    store: Annotated[NonEmpty | None, Flag("--store", "store file (default: $NEL_STORE or OUTPUT_DIR/nel.duckdb)",
                                           metavar="PATH")] = None
    export: list[Literal["inspect", "mlflow", "wandb"]] = []
    """Where the run also goes once its artifacts are written (``workbench.export.targets``; docs/exports.md)."""
    export_config: ExportConfig = ExportConfig()

    @model_validator(mode="after")
    def _configured_targets_exported(self) -> Output:
        for name in ("mlflow", "wandb"):
            if getattr(self.export_config, name) is not None and name not in self.export:
                raise problem(f"export_config.{name} is set but {name!r} is not in output.export", "export")
        return self


# ---- the whole run --------------------------------------------------------------------------------------------
class RunSpec(Strict):
    """Everything one `nel eval run` evaluates; see the module docstring."""

    services: dict[str, Service]
    benchmarks: list[Benchmark]
    output: Output = Output()
    benchmark_files: Annotated[Strings, Flag("--benchmark-file", "load @benchmark definitions from a Python file "
                                             "(repeatable)", metavar="FILE.py", repeat=True)] = ()
    cluster: Cluster | None = None
    sandboxes: dict[str, Sandbox] = {}  # type: ignore[valid-type]
    source: str | None = None
    """The config file the spec was read from (set by nel; a suite entry's ``--resume`` key uses it)."""

    _file: Path | None = PrivateAttr(default=None)

    @field_validator("services")
    @classmethod
    def _some_service(cls, value: dict[str, Any]) -> dict[str, Any]:
        if not value:
            raise problem("define at least one service")
        return value

    @field_validator("benchmarks", mode="before")
    @classmethod
    def _some_benchmark(cls, value: Any) -> Any:
        if not isinstance(value, list) or not value:
            raise problem("expected a non-empty list of benchmarks")
        return value

    @model_validator(mode="after")
    def _sections_agree(self, info: ValidationInfo) -> RunSpec:
        known = (info.context or {}).get("known_benchmark")
        self._servers_agree()
        named = {name: self._sandbox(settings, f"sandboxes.{name}", {}) for name, settings in self.sandboxes.items()}
        for i, bench in enumerate(self.benchmarks):
            path = f"benchmarks.{i}"
            bench._path = path
            if known is not None and not known(bench.name):
                raise SpecProblem(f"{path}.name", f"unknown benchmark {bench.name!r} (see `nel list`)")
            bench._service = self._solver_service(bench, path)
            if bench.system_prompt is not None and bench.solver.system_prompt is not None:
                raise SpecProblem(f"{path}.solver.system_prompt", f"also set at {path}.system_prompt; keep one")
            bench._sandbox = self._sandbox(bench.sandbox, f"{path}.sandbox", named)
            if bench._sandbox is not None:  # read back as what it resolved to (a named sandbox included)
                object.__setattr__(bench, "sandbox", bench._sandbox)
            if bench.scoring is not None:
                self._judges_agree(bench, f"{path}.scoring")
            if bench.tool_solver is not None:
                self._tools_agree(bench, bench.tool_solver, f"{path}.solver")
            if isinstance(bench.solver, GymDelegationSolver):
                self._delegation_agrees(bench, bench.solver, f"{path}.solver")
        if self.cluster is not None and self.cluster.type == "local":
            self.cluster = None  # it runs here; the other keys may stay (-O cluster.type=local on a SLURM config)
        return self

    def _servers_agree(self) -> None:
        """``depends_on`` names services and makes no cycle; ``node_pool`` only where there are node pools."""
        for name, service in self.services.items():
            if not isinstance(service, ServerService):
                continue
            for i, dep in enumerate(service.depends_on):
                if dep not in self.services:
                    raise SpecProblem(f"services.{name}.depends_on.{i}", f"no service named {dep!r}; "
                                                                         f"services: {', '.join(self.services)}")
            cycle = _cycle(self.services, name)
            if cycle:
                raise SpecProblem(f"services.{name}.depends_on", f"a cycle: {' -> '.join(cycle)}")
            if service.node_pool is not None:
                self._placed(name, service, service.node_pool)

    def _placed(self, name: str, service: ServerService, pool_name: str) -> None:
        """A server placed on a node pool: the pool exists, and its GPUs hold the server's tensor parallelism."""
        if self.cluster is None or self.cluster.type != "slurm":
            raise SpecProblem(f"services.{name}.node_pool", "places the server on a SLURM node pool; this run "
                                                            "is local (no cluster.type: slurm): drop it")
        pools = self.cluster.node_pools
        if pool_name not in pools:
            known = ", ".join(pools) or "none are defined"
            raise SpecProblem(f"services.{name}.node_pool", f"no pool named {pool_name!r} in cluster.node_pools "
                                                            f"({known})")
        pool, tp = pools[pool_name], service.tensor_parallel_size
        per_node = pool.gpus_per_node
        if tp is not None and (per_node == 0 or per_node % tp):
            # The server is started on one node of the pool (srun --nodes=1): its GPUs are that node's.
            has = f"{per_node} GPU(s) on each node (gres {pool.gres})" if per_node else "no GPUs (gres)"
            raise SpecProblem(f"services.{name}.tensor_parallel_size",
                              f"{tp} does not fit cluster.node_pools.{pool_name}, which has {has}; a server runs "
                              "on one node, so make tensor_parallel_size divide one node's GPUs, or change the "
                              "pool's gres")

    def _solver_service(self, bench: Benchmark, path: str) -> str:
        service = bench.solver.service
        if service is None:
            if len(self.services) != 1:
                raise SpecProblem(f"{path}.solver", "name the service to evaluate (solver.service): the config "
                                                    f"defines {len(self.services)}")
            service = next(iter(self.services))
        elif service not in self.services:
            raise SpecProblem(f"{path}.solver.service",
                              f"no service named {service!r}; services: {', '.join(self.services)}")
        if (kind := self.services[service].kind) != "api":
            what = "a Gym deployment" if kind == "gym" else "a resources server"
            raise SpecProblem(f"{path}.solver.service", f"{service!r} is {what}, not a model; name a "
                                                        "model service (type: api)")
        return service

    def _sandbox(self, ref: Any, path: str, named: dict[str, SandboxSpec | None]) -> SandboxSpec | None:
        """A sandbox reference resolved: a name (of ``sandboxes:``, already checked) or an inline mapping."""
        from workbench.errors import UsageError

        if ref is None or isinstance(ref, SandboxSpec):
            return ref
        if isinstance(ref, str):
            if ref not in named:
                known = ", ".join(named) or "none are defined (sandboxes:)"
                raise SpecProblem(path, f"no sandbox named {ref!r}; sandboxes: {known}")
            return named[ref]
        try:
            return sandbox_of(ref)
        except UsageError as exc:
            key, _, message = str(exc).partition(": ")
            field = key.removeprefix("sandbox.")
            raise SpecProblem(f"{path}.{field}" if field in ref.model_fields_set else path,
                              message or str(exc)) from None

    def _judges_agree(self, bench: Benchmark, path: str) -> None:
        assert bench.scoring is not None
        solver = self.services[bench.service]
        for i, metric in enumerate(bench.scoring.metrics):
            if metric.type != JUDGE:
                continue
            where = f"{path}.metrics.{i}.service"
            assert metric.service is not None
            judge = self.services.get(metric.service)
            if judge is None:
                raise SpecProblem(where, f"no service named {metric.service!r}; services: {', '.join(self.services)}")
            same = metric.service == bench.service or (judge.url, judge.model) == (solver.url, solver.model)
            if same and not metric.allow_self_judge:
                raise SpecProblem(where, f"the judge {metric.service!r} is the solver's own model ({solver.model}), "
                                         "which would grade itself; use another service or set allow_self_judge: true")

    def _tools_agree(self, bench: Benchmark, solver: ToolSolver, path: str) -> None:
        from urllib.parse import urlsplit

        has_sandbox = bench.sandbox is not None
        if solver.resource_service is not None:
            where = f"{path}.resource_service"
            service = self.services.get(solver.resource_service)
            if service is None:
                raise SpecProblem(where, f"no service named {solver.resource_service!r}; "
                                         f"services: {', '.join(self.services)}")
            if service.kind != "resources":
                raise SpecProblem(where, f"{solver.resource_service!r} is a model; name a resources server "
                                         "(type: resources)")
            if not bench.name.startswith("gym://") or urlsplit(bench.name).netloc != urlsplit(service.url).netloc:
                raise SpecProblem(where, "a resources server's tools act in the attempt's session on that server, "
                                         f"so the benchmark must be served by it: name: gym://"
                                         f"{urlsplit(service.url).netloc}?protocol=native&data=ROWS.jsonl")
        if solver.sandbox_tools and not has_sandbox:
            raise SpecProblem(f"{path}.sandbox_tools", "the sandbox tools need a sandbox: give the benchmark one "
                                                       "(sandbox: NAME or sandbox: {type: docker, ...})")
        if not solver.sandbox_tools and solver.resource_service is None:
            raise SpecProblem(path, "a tool_calling solver needs tools: sandbox_tools: true, or a resource_service")
        if solver.response_mode == "sandbox_artifact" and not has_sandbox:
            raise SpecProblem(f"{path}.response_mode", "sandbox_artifact is what the agent leaves in its sandbox: "
                                                       "give the benchmark a sandbox")

    def _delegation_agrees(self, bench: Benchmark, solver: GymDelegationSolver, path: str) -> None:
        service = self.services.get(solver.gym_service)
        if service is None:
            raise SpecProblem(f"{path}.gym_service", f"no service named {solver.gym_service!r}; "
                                                     f"services: {', '.join(self.services)}")
        if service.kind != "gym":
            raise SpecProblem(f"{path}.gym_service", f"{solver.gym_service!r} is not a Gym deployment; name a "
                                                     "service of type: gym (its head server's url)")
        for key, why in (("scoring", "nel scores with the benchmark's own scorer, Gym with its resources server"),
                         ("sandbox", "the Gym agent's resources server is where its attempts run")):
            if getattr(bench, key) is not None:
                raise SpecProblem(f"{bench.path}.{key}", f"not with a gym_delegation solver: {why}")
        if bench.name.startswith("gym://"):
            raise SpecProblem(f"{bench.path}.name", "a gym:// benchmark is already served by Gym; a gym_delegation "
                                                    "solver runs a built-in, lm-eval or BYOB benchmark")

    # ---- what the rest of nel reads ---------------------------------------------------------------------------
    @property
    def file(self) -> Path | None:
        """The config file this spec came from (None: built from flags)."""
        return Path(self.source) if self.source else None

    @property
    def output_dir(self) -> Path:
        return Path(self.output.dir)

    @property
    def store(self) -> Path | None:
        """The store named in the spec (``output.store``), or None (the default: ``OUTPUT_DIR/nel.duckdb``)."""
        return None if self.output.store is None else Path(self.output.store)

    @property
    def store_path(self) -> Path:
        return self.store or self.output_dir / "nel.duckdb"

    @property
    def runs_here(self) -> bool:
        return self.cluster is None or self.cluster.type == "local"
