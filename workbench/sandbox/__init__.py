"""Sandboxes that run model-written code: docker containers, or a weaker local subprocess backend.

``open_sandboxes(spec)`` gives a provider; ``async with provider.session() as box`` gives one
attempt its own sandbox. Headless: nothing here imports a front end. See docs/sandbox.md.
"""

from workbench.sandbox.base import Sandbox, Sandboxes, open_sandboxes
from workbench.sandbox.spec import ExecResult, SandboxSpec

__all__ = ["ExecResult", "Sandbox", "SandboxSpec", "Sandboxes", "open_sandboxes"]
