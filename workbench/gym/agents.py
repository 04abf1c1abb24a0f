"""Finding a NeMo Gym agent server by name, the way Gym's own servers find each other: through the head server.

A Gym deployment (``ng_run``) starts a head server whose ``/global_config_dict_yaml`` is the whole config: every
top-level key is a server instance, and an agent's entry sits under ``responses_api_agents`` with its
implementation (``simple_agent``) and its ``host``/``port``. A ``gym_delegation`` solver names its agent by the
instance name (``nel_agent``), or by the implementation when one instance runs it; the lookup happens before the
run starts, so a wrong name is one line (exit 2), never a run of failed attempts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx
import yaml

from workbench.errors import RunFailed, UsageError

CONFIG_PATH = "/global_config_dict_yaml"
AGENTS_KEY = "responses_api_agents"


@dataclass(frozen=True, slots=True)
class GymAgent:
    """One agent server of a Gym deployment."""

    name: str
    """The instance name (the top-level key of Gym's config)."""
    implementation: str
    """What it runs (``simple_agent``)."""
    url: str
    """Its base URL (``/run`` is below it)."""


def agents_of(config: dict[str, Any]) -> list[GymAgent]:
    """The agent servers a Gym global config defines, in its order."""
    found = []
    for name, entry in config.items():
        agents = entry.get(AGENTS_KEY) if isinstance(entry, dict) else None
        if not isinstance(agents, dict):
            continue
        for implementation, settings in agents.items():
            if isinstance(settings, dict) and settings.get("host") and settings.get("port"):
                found.append(GymAgent(str(name), str(implementation), f"http://{settings['host']}:{settings['port']}"))
    return found


def pick_agent(agents: list[GymAgent], wanted: str | None, where: str) -> GymAgent:
    """The agent ``wanted`` names (an instance, else the one instance of an implementation); with no name, the
    only agent. ``UsageError`` naming ``where`` and the agents there are otherwise."""
    listing = ", ".join(f"{a.name} ({a.implementation})" for a in agents) or "none"
    if wanted is None:
        if len(agents) == 1:
            return agents[0]
        raise UsageError(f"{where}: name the agent to run (gym_agent); the Gym deployment's agents: {listing}")
    by_name = [a for a in agents if a.name == wanted]
    if by_name:
        return by_name[0]
    by_kind = [a for a in agents if a.implementation == wanted]
    if len(by_kind) == 1:
        return by_kind[0]
    if by_kind:
        raise UsageError(f"{where}: {len(by_kind)} agents run {wanted!r}; name one: "
                         f"{', '.join(a.name for a in by_kind)}")
    raise UsageError(f"{where}: the Gym deployment has no agent {wanted!r}; its agents: {listing}")


def gym_config(head_url: str, timeout: float = 10.0) -> dict[str, Any]:
    """The global config Gym's head server at ``head_url`` serves (``RunFailed`` naming it if it does not)."""
    url = head_url.rstrip("/") + CONFIG_PATH
    try:
        response = httpx.get(url, timeout=timeout, follow_redirects=False)
    except httpx.TransportError as exc:
        reason = (str(exc) or type(exc).__name__).splitlines()[0]
        raise RunFailed(f"cannot reach Gym's head server at {head_url}: {reason}; check the gym service's url "
                        "(the head server `ng_run` prints) and that Gym is running") from None
    if response.status_code == 404:
        raise UsageError(f"{head_url} has no {CONFIG_PATH}: it is not a NeMo Gym head server (give the gym "
                         "service the head server's address, not an agent's or a resources server's)")
    if not response.is_success:
        raise RunFailed(f"{url} answered HTTP {response.status_code}: {' '.join(response.text.split())[:300]}")
    try:
        text = response.json()  # the head server returns the YAML text as a JSON string
        config = yaml.safe_load(text if isinstance(text, str) else json.dumps(text))
    except (ValueError, yaml.YAMLError) as exc:
        raise RunFailed(f"{url} answered with a config nel cannot read: {str(exc).splitlines()[0][:200]}") from None
    if not isinstance(config, dict):
        raise RunFailed(f"{url} answered with a config that is not a mapping")
    return config


def find_agent(head_url: str, wanted: str | None, where: str) -> GymAgent:
    """The agent server ``wanted`` names in the Gym deployment whose head server is ``head_url``."""
    return pick_agent(agents_of(gym_config(head_url)), wanted, where)
