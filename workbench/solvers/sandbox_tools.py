"""The sandbox tools an agent gets: ``bash``, ``file_read``, ``file_write`` and ``str_replace_editor``.

They act on one attempt's sandbox. A command runs as ``bash -c COMMAND``: the model's command is one
argv element, never pasted into a string of ours; files move through the sandbox's API. Paths are
relative to the sandbox's work directory and may not leave it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workbench.sandbox.base import Sandbox, check_relpath
from workbench.solvers.tools import ToolOutcome, ToolSpec, unknown_tool

_PATH = {"type": "string", "description": "a path relative to the work directory"}
SANDBOX_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("bash", "Run a bash command in the work directory; returns its exit code, stdout and stderr.",
             {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}),
    ToolSpec("file_read", "Read a text file.", {"type": "object", "properties": {"path": _PATH}, "required": ["path"]}),
    ToolSpec("file_write", "Create or overwrite a file with the given content.",
             {"type": "object", "properties": {"path": _PATH, "content": {"type": "string"}},
              "required": ["path", "content"]}),
    ToolSpec("str_replace_editor", "Replace the one occurrence of old_str in a file with new_str.",
             {"type": "object", "properties": {"path": _PATH, "old_str": {"type": "string"},
                                               "new_str": {"type": "string"}},
              "required": ["path", "old_str", "new_str"]}),
)


class SandboxToolBox:
    """The four sandbox tools on one attempt's sandbox."""

    def __init__(self, box: Sandbox) -> None:
        self.box = box

    @property
    def specs(self) -> Sequence[ToolSpec]:
        return SANDBOX_TOOLS

    async def call(self, name: str, arguments: dict[str, Any], *, timeout: float) -> ToolOutcome:
        handler = {"bash": self._bash, "file_read": self._read, "file_write": self._write,
                   "str_replace_editor": self._replace}.get(name)
        if handler is None:
            return unknown_tool(name, SANDBOX_TOOLS)
        spec = next(s for s in SANDBOX_TOOLS if s.name == name)
        missing = [k for k in spec.parameters.get("required", ()) if not isinstance(arguments.get(k), str)]
        if missing:
            return ToolOutcome(f"error: {name} needs the string argument(s) {', '.join(missing)}",
                               error="bad_arguments")
        try:
            return await handler(arguments, timeout)
        except ValueError as exc:  # a path outside the work directory
            return ToolOutcome(f"error: {exc}", error="bad_path")

    async def _bash(self, args: dict[str, Any], timeout: float) -> ToolOutcome:
        result = await self.box.run(["bash", "-c", args["command"]], timeout=timeout)
        parts = [f"exit code: {result.exit_code}"]
        if result.timed_out:
            parts = [f"killed: the command ran past {timeout:g} s"]
        elif result.oom_killed:
            parts = ["killed: the command ran out of memory"]
        if result.stdout:
            parts.append(f"stdout:\n{result.stdout}")
        if result.stderr:
            parts.append(f"stderr:\n{result.stderr}")
        error = "timeout" if result.timed_out else "oom" if result.oom_killed else None
        return ToolOutcome("\n".join(parts), exit_code=result.exit_code, error=error)

    async def _read(self, args: dict[str, Any], timeout: float) -> ToolOutcome:
        path = check_relpath(args["path"])
        try:
            data = await self.box.read_file(path)
        except (FileNotFoundError, IsADirectoryError):
            return ToolOutcome(f"error: no such file: {path}", error="not_found")
        return ToolOutcome(data.decode("utf-8", "replace"))

    async def _write(self, args: dict[str, Any], timeout: float) -> ToolOutcome:
        path = check_relpath(args["path"])
        content = args["content"]
        await self.box.write_files({path: content})
        return ToolOutcome(f"wrote {len(content.encode())} bytes to {path}")

    async def _replace(self, args: dict[str, Any], timeout: float) -> ToolOutcome:
        path, old, new = check_relpath(args["path"]), args["old_str"], args["new_str"]
        try:
            text = (await self.box.read_file(path)).decode("utf-8")
        except (FileNotFoundError, IsADirectoryError):
            return ToolOutcome(f"error: no such file: {path}", error="not_found")
        except UnicodeDecodeError:
            return ToolOutcome(f"error: {path} is not UTF-8 text", error="not_text")
        count = text.count(old) if old else 0
        if count != 1:
            why = "old_str is empty" if not old else f"old_str appears {count} times in {path}; it must appear once"
            return ToolOutcome(f"error: {why}", error="no_unique_match")
        await self.box.write_files({path: text.replace(old, new, 1)})
        return ToolOutcome(f"replaced 1 occurrence in {path}")
