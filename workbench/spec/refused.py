"""Types NeMo Evaluator's configs name that nel does not run, each with what to use instead (one line).

A config arriving from NeMo Evaluator gets, instead of a bare "expected one of ...", the reason and the nel
spelling that does the job: docs/services.md lists them.
"""

from __future__ import annotations

_SERVER = "start the server with type: command (command: [..., \"{port}\"]) or point type: api at it"
REFUSED: dict[tuple[str, str], str] = {
    ("service", "nim"): f"nel does not start NIM containers; {_SERVER}",
    ("service", "docker_model"): f"nel does not start model containers; {_SERVER}",
    ("service", "dynamo"): f"nel does not start Dynamo deployments; {_SERVER}",
    ("service", "nat"): "nel does not run NeMo Agent Toolkit servers; serve the agent behind an OpenAI-compatible "
                        "endpoint and use type: api",
    ("service", "nat_agent"): "nel does not run NeMo Agent Toolkit servers; serve the agent behind an "
                              "OpenAI-compatible endpoint and use type: api",
    ("service", "custom"): f"nel loads no service classes by path; {_SERVER}",
    ("solver", "harbor"): "nel does not run Harbor agents; use solver.type: tool_calling with a docker sandbox "
                          "(sandbox: {type: docker, image: ...})",
    ("solver", "openclaw"): "nel does not run the OpenClaw agent; use solver.type: tool_calling with a sandbox",
    ("solver", "container"): "nel does not run solver containers; use solver.type: tool_calling with a docker "
                             "sandbox (sandbox: {type: docker, image: ...})",
    ("solver", "nat"): "nel does not run NeMo Agent Toolkit agents; serve the agent behind an OpenAI-compatible "
                       "endpoint (a type: api service) and use solver.type: simple",
    ("solver", "nat_agent"): "nel does not run NeMo Agent Toolkit agents; serve the agent behind an "
                             "OpenAI-compatible endpoint (a type: api service) and use solver.type: simple",
    ("solver", "agent"): "use solver.type: tool_calling, nel's agent loop",
    ("sandbox", "ecs_fargate"): "nel has no ECS Fargate sandbox; use type: docker (or local), and spread a large "
                                "run over SLURM or Ray workers",
    ("sandbox", "apptainer"): "nel has no Apptainer sandbox; use type: docker, or type: local on a node you trust",
    ("sandbox", "slurm"): "a sandbox is docker or local; to run on SLURM set cluster.type: slurm",
}


def refusal(section: str, kind: object) -> str | None:
    """``"TYPE is not supported: WHAT TO USE"`` for a known refused type of ``section``, else None."""
    why = REFUSED.get((section, str(kind)))
    return None if why is None else f"{kind!r} is not supported: {why}"
