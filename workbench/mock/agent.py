"""The mock model as an agent: scripted tool calls for the agentic benchmarks (``file_tasks``).

When a request offers tools and its task is agentic, the mock answers turn by turn from the task's
reference solution (its answer key: a list of ``{tool, arguments}``), one tool call per turn, then a
short final message. Which turn it is comes from the conversation (the assistant turns so far), so
the reply is a pure function of (task, seed, attempt, turn), like every other mock reply.

A correct attempt follows the solution. A wrong one, picked by the attempt's ``choice`` bits, is one
of the ways agents fail: stopping one change short and claiming success, running a command that
fails and giving up, looping on ``ls`` until its turns run out, or answering without touching a tool.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

from workbench.mock.answers import SANDBOX_SCORERS, Task
from workbench.mock.skill import Attempt

AGENT_SCORERS = SANDBOX_SCORERS
"""Scorers of benchmarks the mock answers as an agent (when the request offers tools)."""

READ_ONLY_COMMANDS = ("ls", "wc", "cat", "head", "tail", "pwd")
WRONG_MODES = ("short", "failing_command", "loop", "no_tools")
DONE = "Done: the task is complete."
GAVE_UP = "The input I needed is missing, so I stopped."
NEED_TOOLS = "I need the {} tool for this task, and it was not offered."


@dataclass(frozen=True, slots=True)
class AgentReply:
    text: str
    tool_calls: list[dict[str, Any]] | None = None

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.tool_calls else "stop"


def wrong_mode(choice: int) -> str:
    return WRONG_MODES[(choice >> 8) % len(WRONG_MODES)]


def agent_turn(task: Task, verdict: Attempt, messages: list[dict[str, Any]], offered: set[str]) -> AgentReply:
    """The reply at this point of the conversation."""
    turn = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")
    plan: list[dict[str, Any]] = orjson.loads(task.answer)
    mode = "follow" if verdict.correct else wrong_mode(verdict.choice)
    if mode == "short":
        plan = _one_change_short(plan)
    elif mode == "failing_command":
        plan = [{"tool": "bash", "arguments": {"command": "cat input/source.txt"}}]
    elif mode == "loop":
        return _call(turn, "bash", {"command": "ls -la"}, "Let me look at the files again.")
    elif mode == "no_tools":
        plan = []
    if turn >= len(plan):
        return AgentReply(GAVE_UP if mode == "failing_command" else DONE)
    step = plan[turn]
    if step["tool"] not in offered:
        return AgentReply(NEED_TOOLS.format(step["tool"]))
    return _call(turn, step["tool"], step["arguments"], _narration(step))


def _one_change_short(plan: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The plan without its last step that changes something (reads and listings are kept)."""
    for i in range(len(plan) - 1, -1, -1):
        step = plan[i]
        command = str(step["arguments"].get("command", "")).split(" ", 1)[0]
        if step["tool"] != "file_read" and command not in READ_ONLY_COMMANDS:
            return plan[:i] + plan[i + 1 :]
    return plan[:-1]


def _narration(step: dict[str, Any]) -> str:
    args = step["arguments"]
    if step["tool"] == "bash":
        return f"I will run: {args['command']}"
    return f"I will use {step['tool']} on {args.get('path', '')}."


def _call(turn: int, name: str, arguments: dict[str, Any], text: str) -> AgentReply:
    call = {"id": f"call_{turn:03d}_0", "type": "function",
            "function": {"name": name, "arguments": orjson.dumps(arguments).decode()}}
    return AgentReply(text, [call])


def generic_tool_turn(prompt: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AgentReply:
    """For a prompt the mock does not know (a NeMo Gym row, say) that offers tools: call the first tool
    once, its arguments made from its JSON schema and the prompt, then answer with what it returned."""
    results = [m for m in messages if isinstance(m, dict) and m.get("role") == "tool"]
    if results:
        return AgentReply(f"According to the tool: {str(results[-1].get('content') or '')[:500]}")
    function = next((t["function"] for t in tools if isinstance(t, dict) and isinstance(t.get("function"), dict)), None)
    if function is None or not isinstance(function.get("name"), str):
        return AgentReply(GENERIC_TOOLS_REPLY)
    raw_schema = function.get("parameters")
    schema: dict[str, Any] = raw_schema if isinstance(raw_schema, dict) else {}
    raw_properties = schema.get("properties")
    properties: dict[str, Any] = raw_properties if isinstance(raw_properties, dict) else {}
    wanted = schema.get("required") or list(properties)
    arguments = {name: _value_for(name, properties.get(name) or {}, prompt) for name in wanted if isinstance(name, str)}
    return _call(0, function["name"], arguments, f"Let me use the {function['name']} tool.")


GENERIC_TOOLS_REPLY = "I do not know this task, and no tool I was offered has a name."
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")


def _value_for(name: str, schema: dict[str, Any], prompt: str) -> Any:
    """A plausible argument: a capitalised word of the prompt for a name or place, else its last word."""
    kind = schema.get("type")
    if kind == "integer":
        return 1
    if kind == "number":
        return 1.0
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return {}
    words = _WORD.findall(prompt)
    capitalised = [w for w in words[1:] if w[0].isupper()]  # skip the sentence's first word
    return (capitalised or words or [name])[-1]


def offered_tools(tools: object) -> set[str] | None:
    """The function names a request offers, or ``None`` when it offers none (or not as a list)."""
    if not isinstance(tools, list) or not tools:
        return None
    names = set()
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.add(function["name"])
    return names
