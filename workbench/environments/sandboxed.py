"""A benchmark run with a sandbox: each attempt gets its own, opened before the model is called.

``Sandboxed(env, sandboxes)`` is what the engine runs for a benchmark that needs one (HumanEval's
tests, an agent's file tasks). Through the engine's per-attempt hook (``attempt_worker``) every
attempt opens a fresh sandbox, seeded with the task's files; the solver's tools (``bash``,
``file_read`` ...) act on it; verification runs in it (the code's tests) or inspects it (the files
the agent left); then it is removed, whatever happened, model failure and Ctrl-C included.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol, runtime_checkable

from workbench.environments.base import Capabilities, EvalEnvironment, VerifyResult
from workbench.environments.wrapped import Wrapped
from workbench.errors import UsageError
from workbench.model.client import ModelResponse
from workbench.sandbox.base import Sandbox, Sandboxes, finish_despite_cancel
from workbench.solvers.sandbox_tools import SandboxToolBox
from workbench.solvers.tools import ToolBox
from workbench.types import SeedResult  # the engine's type, which attempts carry


@runtime_checkable
class SandboxScored(Protocol):
    """A benchmark whose verdict comes from a sandbox."""

    async def verify_in_sandbox(self, box: Sandbox, response: str, seed: SeedResult,
                                timeout: float) -> VerifyResult: ...


class SandboxAttempt:
    """One attempt's sandbox: its tools for the solver, its verdict for the engine."""

    def __init__(self, env: SandboxScored, box: Sandbox, session: AbstractAsyncContextManager[Sandbox],
                 seed: SeedResult, seed_ms: float, tools: bool, timeout: float, artifact: str | None) -> None:
        self._env, self._box, self._session, self._seed = env, box, session, seed
        self.seed_ms = seed_ms
        self._tools = SandboxToolBox(box) if tools else None
        self._timeout = timeout
        self._artifact = artifact
        self._closed = False

    @property
    def tools(self) -> ToolBox | None:
        return self._tools

    async def verify(self, response: str, model: ModelResponse) -> VerifyResult:
        """Score the final message, or (response mode ``sandbox_artifact``) the artifact file the agent left."""
        artifact: dict[str, Any] = {}
        if self._artifact is not None:
            try:
                response = (await self._box.read_file(self._artifact)).decode("utf-8", "replace")
                artifact = {"artifact": self._artifact}
            except (FileNotFoundError, IsADirectoryError):
                response, artifact = "", {"artifact": self._artifact, "artifact_missing": True}
        verdict = await self._env.verify_in_sandbox(self._box, response, self._seed, self._timeout)
        details = {**verdict.scoring_details, **artifact, "sandbox": self._box.backend}
        return VerifyResult(verdict.reward, verdict.extracted_answer, details, verdict.metadata)

    async def close(self) -> None:
        """Remove the sandbox (idempotent; finishes even when the run is being cancelled)."""
        if not self._closed:
            self._closed = True
            await finish_despite_cancel(self._session.__aexit__(None, None, None))


class _AttemptOpener:
    def __init__(self, owner: Sandboxed) -> None:
        self._owner = owner

    async def begin(self, seed: SeedResult, attempt: int) -> SandboxAttempt:
        owner = self._owner
        started = time.perf_counter()
        session = owner.sandboxes.session()
        box = await session.__aenter__()
        try:
            files = owner.setup_files(seed)
            if files:
                await box.write_files(files)
        except BaseException:
            await finish_despite_cancel(session.__aexit__(None, None, None))
            raise
        return SandboxAttempt(owner.scored, box, session, seed, (time.perf_counter() - started) * 1000.0,
                              owner.tools, owner.sandboxes.spec.timeout, owner.artifact)


class Sandboxed(Wrapped):
    """``inner`` with a sandbox per attempt from ``sandboxes``; ``tools``: offer the sandbox tools."""

    capabilities = Capabilities(remote_attempts=True, sandboxed=True)

    def __init__(self, inner: EvalEnvironment, sandboxes: Sandboxes, *, tools: bool = False,
                 response_mode: str = "final_message") -> None:
        if not isinstance(inner, SandboxScored):
            raise UsageError(f"{inner.name}: this benchmark is not scored in a sandbox; run it without one")
        self.inner = inner
        self.scored: SandboxScored = inner  # the same benchmark, as the sandbox verdict sees it
        self.sandboxes = sandboxes
        self.tools = tools
        self.name = inner.name
        # sandbox_artifact: what is scored is the file the benchmark names (HumanEval: solution.py), as the
        # agent left it; a benchmark that inspects the whole sandbox (file_tasks) names none.
        self.artifact: str | None = getattr(inner, "ARTIFACT", None) if response_mode == "sandbox_artifact" else None

    def setup_files(self, seed: SeedResult) -> dict[str, str]:
        files = getattr(self.inner, "setup_files", None)
        idx = seed.metadata.get("idx")
        return dict(files(idx)) if callable(files) and isinstance(idx, int) else {}

    def verify(self, response: str, expected: str, **metadata: Any) -> VerifyResult:
        raise UsageError(f"{self.name}: verified in each attempt's sandbox (the engine's attempt hook), not here")

    @asynccontextmanager
    async def attempt_worker(self) -> AsyncIterator[_AttemptOpener]:  # type: ignore[override]
        yield _AttemptOpener(self)

    def sandbox_identity(self) -> dict[str, Any]:
        """What about the sandbox can change verdicts: part of the run's identity."""
        spec = self.sandboxes.spec
        return {"type": spec.type, "image": spec.image if spec.type == "docker" else None, "timeout": spec.timeout,
                "memory": spec.memory_bytes, "cpus": spec.cpus, "network": spec.network, "tools": self.tools,
                "artifact": self.artifact}

    def describe(self) -> dict[str, Any]:
        return {**self.inner.describe(), "requires_sandbox": False, "sandbox": self.sandboxes.backend}
