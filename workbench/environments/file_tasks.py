"""file_tasks: small file-manipulation jobs for an agent with a sandbox, verified by inspecting it.

Each attempt gets a fresh sandbox whose work directory holds the task's ``files``; the agent works
with the sandbox tools (``bash``, ``file_read``, ``file_write``, ``str_replace_editor``); afterwards
the sandbox is checked: every path in ``checks.files`` must hold exactly its content and every path
in ``checks.absent`` must be gone. The final message is not scored (response mode
``sandbox_artifact``). Data: ``benchmarks/file_tasks/data.jsonl`` (see its README).
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import orjson

from workbench.environments.base import AnswerKeyEntry, EvalEnvironment, SeedResult, VerifyResult
from workbench.environments.dataset import load_jsonl, task_id_of
from workbench.errors import UsageError
from workbench.resources import benchmarks_dir
from workbench.sandbox.base import Sandbox

NAME = "file_tasks"
SCORER = "sandbox_state"
PROMPT_TEMPLATE = (
    "{instruction}\n\nYou are in the task's work directory in a sandbox; use the tools to inspect and change "
    "files there (paths are relative to it). When you are done, reply with a short summary and no tool call."
)
NO_SANDBOX = f"{NAME} is verified by inspecting the agent's sandbox after the attempt: run it with a sandbox"

SANDBOX_TOOL_ARGUMENTS: dict[str, tuple[str, ...]] = {
    "bash": ("command",),
    "file_read": ("path",),
    "file_write": ("path", "content"),
    "str_replace_editor": ("path", "old_str", "new_str"),
}
"""The sandbox tools and their required arguments."""

FileReader = Callable[[str], Awaitable[bytes | None]]
"""Read a file of the sandbox's work directory; ``None`` when it does not exist."""


def default_data_path() -> Path:
    return benchmarks_dir() / NAME / "data.jsonl"


def safe_relative(path: str, where: str) -> str:
    """A data file's path, refused unless it stays inside the work directory."""
    p = PurePosixPath(path)
    if not path or p.is_absolute() or ".." in p.parts:
        raise UsageError(f"{where}: path {path!r} must be relative and stay inside the work directory")
    return str(p)


class FileTasksEnvironment(EvalEnvironment):
    """Agentic tasks whose reward is the state of the sandbox afterwards."""

    name = NAME
    requires_sandbox = True
    needs_tools = True

    def __init__(self, data_path: Path | None = None) -> None:
        path = data_path if data_path is not None else default_data_path()
        rows, self._data_sha256 = load_jsonl(path)
        self._rows: list[dict[str, Any]] = []
        for lineno, row in rows:
            where = f"{path}:{lineno}"
            if not isinstance(row.get("instruction"), str) or not row["instruction"].strip():
                raise UsageError(f"{where}: row has no instruction")
            files, checks = row.get("files", {}), row.get("checks")
            if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
                raise UsageError(f"{where}: files must map paths to text")
            if not isinstance(checks, dict) or not (checks.get("files") or checks.get("absent")):
                raise UsageError(f"{where}: checks must name files (with contents) or absent paths")
            for p in [*files, *checks.get("files", {}), *checks.get("absent", [])]:
                safe_relative(p, where)
            self._rows.append(row)
        self._task_ids = [task_id_of({k: v for k, v in row.items() if k != "solution"}) for row in self._rows]

    def __len__(self) -> int:
        return len(self._rows)

    def row(self, idx: int) -> dict[str, Any]:
        if not 0 <= idx < len(self._rows):
            raise IndexError(f"{self.name}: problem index {idx} out of range 0..{len(self._rows) - 1}")
        return self._rows[idx]

    def seed(self, idx: int) -> SeedResult:
        row = self.row(idx)
        prompt = PROMPT_TEMPLATE.format(instruction=row["instruction"])
        return SeedResult(
            prompt=prompt,
            messages=({"role": "user", "content": prompt},),
            expected_answer=orjson.dumps(row["checks"], option=orjson.OPT_SORT_KEYS).decode(),
            task_id=self._task_ids[idx],
            metadata={"idx": idx, "file_task_id": row.get("id")},
        )

    def setup_files(self, idx: int) -> dict[str, str]:
        """What the sandbox's work directory holds before the attempt."""
        return dict(self.row(idx).get("files", {}))

    def verify(self, response: str, expected: str, **metadata: Any) -> VerifyResult:
        """Refuse: the verdict is the sandbox's state, which only an attempt's sandbox can show."""
        raise UsageError(NO_SANDBOX)

    async def verify_sandbox(self, expected: str, read: FileReader) -> VerifyResult:
        """Check the sandbox after the attempt: exact contents of ``checks.files``, ``checks.absent`` gone."""
        return await check_files(orjson.loads(expected), read)

    async def verify_in_sandbox(self, box: Sandbox, response: str, seed: SeedResult, timeout: float) -> VerifyResult:
        """The attempt's sandbox, inspected through its API (the final message is not scored)."""

        async def read(path: str) -> bytes | None:
            try:
                return await box.read_file(path)
            except (FileNotFoundError, IsADirectoryError):
                return None

        return await self.verify_sandbox(seed.expected_answer, read)

    @property
    def data_hash(self) -> str:
        h = hashlib.sha256(self._data_sha256.encode())
        for part in (PROMPT_TEMPLATE, SCORER):
            h.update(b"\0" + part.encode())
        return h.hexdigest()[:16]

    def check_answer_key(self, idx: int) -> tuple[bool, str]:
        """Static checks only (nothing runs here): the reference solution calls known tools with their
        arguments on paths inside the work directory."""
        solution = self.row(idx).get("solution")
        if not isinstance(solution, list) or not solution:
            return False, "no reference solution"
        for n, call in enumerate(solution, 1):
            tool, args = call.get("tool") if isinstance(call, dict) else None, (call or {}).get("arguments")
            needed = SANDBOX_TOOL_ARGUMENTS.get(str(tool))
            if needed is None or not isinstance(args, dict):
                return False, f"solution step {n}: unknown tool {tool!r}"
            missing = [a for a in needed if not isinstance(args.get(a), str)]
            if missing:
                return False, f"solution step {n}: {tool} lacks {', '.join(missing)}"
            if "path" in args:
                try:
                    safe_relative(args["path"], f"solution step {n}")
                except UsageError as exc:
                    return False, str(exc)
        return True, f"{len(solution)}-step reference solution uses known tools (replaying it needs a sandbox)"

    def answer_key(self) -> Iterator[AnswerKeyEntry]:
        for row in self._rows:
            yield AnswerKeyEntry(question=row["instruction"], answer=orjson.dumps(row["solution"]).decode())

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": "file-manipulation tasks for an agent with sandbox tools, verified by inspecting the "
                           "sandbox afterwards",
            "domain": "agentic",
            "size": len(self),
            "default_repeats": 4,
            "scorer": SCORER,
            "source": "written for nel workbench (benchmarks/file_tasks/prepare.py)",
            "license": "Apache-2.0",
            "requires_sandbox": True,
            "solver": "tool_calling",
        }


async def check_files(checks: dict[str, Any], read: FileReader) -> VerifyResult:
    """Reward 1 iff every expected file has exactly its content and every absent path is gone; the
    details list each check that failed, so a wrong attempt says what it got wrong."""
    problems: list[str] = []
    for path, want in sorted((checks.get("files") or {}).items()):
        got = await read(path)
        if got is None:
            problems.append(f"{path}: missing")
        elif got != want.encode():
            shown = got[:200].decode("utf-8", "replace")
            problems.append(f"{path}: has {shown!r}, expected {want!r}")
    for path in sorted(checks.get("absent") or ()):
        if await read(path) is not None:
            problems.append(f"{path}: should not exist")
    n = len(checks.get("files") or {}) + len(checks.get("absent") or ())
    passed = not problems
    return VerifyResult(
        reward=1.0 if passed else 0.0,
        extracted_answer=f"{n - len(problems)}/{n} checks pass",
        scoring_details={"method": SCORER, "checks": n, "failed": problems},
    )
