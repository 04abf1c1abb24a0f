"""A config's sandboxes and its tool-calling solvers, checked like every other section (file:line: path).

``sandboxes: {NAME: {type, image, timeout, memory, cpus, network, concurrency, ...}}`` names sandboxes
once; a benchmark takes one with ``sandbox: NAME`` or inline ``sandbox: {...}``.
``solver: {type: tool_calling, service, max_turns, sandbox_tools, resource_service, tool_timeout,
max_output_chars, response_mode}`` makes the engine drive an agent loop for the benchmark.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from workbench.errors import UsageError
from workbench.sandbox.spec import SandboxSpec

if TYPE_CHECKING:
    from workbench.config.schema import _Checker

SANDBOX_KEYS = tuple(f.name for f in fields(SandboxSpec) if f.name != "labels")
TOOL_SOLVER_KEYS = ("type", "service", "system_prompt", "max_turns", "sandbox_tools", "resource_service",
                    "tool_timeout", "max_output_chars", "response_mode")


@dataclass(frozen=True, slots=True)
class ToolSolver:
    """``solver: {type: tool_calling, ...}``; ``resource_service`` names a service whose tools (a NeMo Gym
    resources server's ``POST /{tool}`` endpoints) the agent may call."""

    max_turns: int = 10
    sandbox_tools: bool = True
    resource_service: str | None = None
    tool_timeout: float = 60.0
    max_output_chars: int = 10_000
    response_mode: str = "final_message"


def sandbox_spec(c: _Checker, value: Any, path: str) -> SandboxSpec:
    """One sandbox mapping as a validated ``SandboxSpec``; a bad field is named at its line."""
    raw = c.mapping(value, path, SANDBOX_KEYS)
    spec_fields: dict[str, Any] = {}
    for key, item in raw.items():
        if item is None:
            continue
        if key in ("memory", "file_size_limit") and not isinstance(item, str | int):
            raise c.fail(f"{path}.{key}", f"expected a size such as '512m', got {item!r}")
        spec_fields[key] = item
    try:
        return SandboxSpec(**spec_fields).validate()
    except UsageError as exc:
        key, _, message = str(exc).partition(": ")
        field = key.removeprefix("sandbox.")
        raise c.fail(f"{path}.{field}" if field in raw else path, message or str(exc)) from None


def named_sandboxes(c: _Checker, top: dict[str, Any]) -> dict[str, SandboxSpec]:
    raw = c.get(top, "sandboxes", "", lambda v, p: c.mapping(v, p, tuple(v) if isinstance(v, dict) else ()),
                default={})
    return {name: sandbox_spec(c, value, f"sandboxes.{name}") for name, value in raw.items()}


def benchmark_sandbox(c: _Checker, value: Any, path: str, named: dict[str, SandboxSpec]) -> SandboxSpec:
    """``sandbox: NAME`` (one of ``sandboxes:``) or an inline mapping."""
    if isinstance(value, str):
        if value not in named:
            known = ", ".join(named) or "none are defined (sandboxes:)"
            raise c.fail(path, f"no sandbox named {value!r}; sandboxes: {known}")
        return named[value]
    return sandbox_spec(c, value, path)


def tool_solver(c: _Checker, solver: dict[str, Any], path: str, services: dict[str, Any],
                has_sandbox: bool, benchmark: str) -> ToolSolver:
    s = ToolSolver(
        max_turns=c.get(solver, "max_turns", path, c.integer(1), default=10),
        sandbox_tools=c.get(solver, "sandbox_tools", path, c.boolean, default=True),
        resource_service=c.get(solver, "resource_service", path, c.string),
        tool_timeout=c.get(solver, "tool_timeout", path, c.number(0.0, 86400.0, open_low=True), default=60.0),
        max_output_chars=c.get(solver, "max_output_chars", path, c.integer(200), default=10_000),
        response_mode=c.get(solver, "response_mode", path, c.choice(("final_message", "sandbox_artifact")),
                            default="final_message"),
    )
    if s.resource_service is not None:
        where = f"{path}.resource_service"
        service = services.get(s.resource_service)
        if service is None:
            raise c.fail(where, f"no service named {s.resource_service!r}; services: {', '.join(services)}")
        if service.kind != "resources":
            raise c.fail(where, f"{s.resource_service!r} is a model; name a resources server (type: resources)")
        if not benchmark.startswith("gym://") or urlsplit(benchmark).netloc != urlsplit(service.url).netloc:
            raise c.fail(where, "a resources server's tools act in the attempt's session on that server, so the "
                                f"benchmark must be served by it: name: gym://{urlsplit(service.url).netloc}"
                                "?protocol=native&data=ROWS.jsonl")
    if s.sandbox_tools and not has_sandbox:
        raise c.fail(f"{path}.sandbox_tools", "the sandbox tools need a sandbox: give the benchmark one "
                                              "(sandbox: NAME or sandbox: {type: docker, ...})")
    if not s.sandbox_tools and s.resource_service is None:
        raise c.fail(path, "a tool_calling solver needs tools: sandbox_tools: true, or a resource_service")
    if s.response_mode == "sandbox_artifact" and not has_sandbox:
        raise c.fail(f"{path}.response_mode", "sandbox_artifact is what the agent leaves in its sandbox: "
                                              "give the benchmark a sandbox")
    return s
