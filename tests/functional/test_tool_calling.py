"""The tool-calling solver against the real mock model process: the loop, its transcript, its limits.

The tools here record their calls and answer from a script (the sandbox tools are tested with the
sandboxes); which attempts of the mock are right or wrong, and how, comes from its skill profile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from workbench.environments import get_environment
from workbench.environments.file_tasks import SANDBOX_TOOL_ARGUMENTS
from workbench.mock import MockHandle, mock_model
from workbench.mock.agent import DONE, GAVE_UP, wrong_mode
from workbench.mock.skill import SkillProfile
from workbench.model.config import ModelConfig
from workbench.solvers.tool_calling import ToolCallingSettings, ToolCallingSolver
from workbench.solvers.tools import CombinedToolBox, ToolOutcome, ToolSpec, truncate_middle

pytestmark = pytest.mark.timeout(60)
ENV = get_environment("file_tasks")
SKILL = SkillProfile(0)


@pytest.fixture(scope="module")
def mock() -> Iterator[MockHandle]:
    with mock_model(latency_ms=0, benchmarks=("file_tasks",)) as handle:
        yield handle


class ScriptedTools:
    """The four sandbox tools by name; each call is recorded and answered by ``answer``."""

    def __init__(self, answer: Any = None, names: tuple[str, ...] = tuple(SANDBOX_TOOL_ARGUMENTS)) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._answer = answer or (lambda name, args: ToolOutcome("ok", exit_code=0 if name == "bash" else None))
        self._specs = [ToolSpec(n, f"the {n} tool") for n in names]

    @property
    def specs(self) -> list[ToolSpec]:
        return self._specs

    async def call(self, name: str, arguments: dict[str, Any], *, timeout: float) -> ToolOutcome:
        self.calls.append((name, arguments))
        result = self._answer(name, arguments)
        return await result if asyncio.iscoroutine(result) else result


class Context:
    def __init__(self, tools: Any) -> None:
        self.tools = tools


def attempt_where(predicate: Any, idx: int) -> int:
    """The first attempt number at task ``idx`` whose mock verdict satisfies ``predicate``."""
    key = f"file_tasks:{ENV.seed(idx).task_id}"
    for attempt in range(500):
        if predicate(SKILL.attempt(key, None, attempt)):
            return attempt
    raise AssertionError("no such attempt")


def task_and_attempt_where(predicate: Any) -> tuple[int, int]:
    """A task and an attempt at it whose mock verdict satisfies ``predicate`` (some tasks always pass)."""
    for idx in range(len(ENV)):
        try:
            return idx, attempt_where(predicate, idx)
        except AssertionError:
            continue
    raise AssertionError("no such attempt at any task")


def solve(mock: MockHandle, idx: int, attempt: int, tools: Any, **settings: Any) -> Any:
    solver = ToolCallingSolver(ModelConfig(url=mock.base_url, model_id="nel-mock", max_retries=0),
                               ToolCallingSettings(**settings))

    async def go() -> Any:
        async with solver.worker() as worker:
            return await worker.solve(ENV.seed(idx), attempt, Context(tools))

    return asyncio.run(go())


def test_a_correct_attempt_follows_the_reference_solution_and_every_turn_is_recorded(mock: MockHandle) -> None:
    idx = 9  # settings.ini: read, then two edits
    attempt = attempt_where(lambda v: v.correct, idx)
    tools = ScriptedTools()
    out = solve(mock, idx, attempt, tools)
    solution = orjson.loads(next(e for i, e in enumerate(ENV.answer_key()) if i == idx).answer)
    assert [(c["tool"], c["arguments"]) for c in solution] == tools.calls
    assert out.response == DONE and out.model.failure is None
    assert [t["turn"] for t in out.turns] == [1, 2, 3, 4]
    assert [len(t["tool_calls"]) for t in out.turns] == [1, 1, 1, 0]
    call = out.turns[1]["tool_calls"][0]
    assert call["name"] == "str_replace_editor" and orjson.loads(call["arguments"]) == solution[1]["arguments"]
    assert call["output"] == "ok" and call["exit_code"] is None and call["error"] is None and call["latency_ms"] >= 0
    # the conversation of the last call: prompt, then (assistant tool call, tool result) x 3
    assert [m["role"] for m in out.messages] == ["user"] + ["assistant", "tool"] * 3
    assert out.messages[2]["tool_call_id"] == out.messages[1]["tool_calls"][0]["id"]
    per_turn = sum(t["model"]["completion_tokens"] for t in out.turns)
    assert out.model.completion_tokens == per_turn and out.model.total_tokens > per_turn


def test_an_agent_still_calling_tools_when_its_turns_run_out_is_max_turns_exhausted(mock: MockHandle) -> None:
    idx, attempt = task_and_attempt_where(lambda v: not v.correct and wrong_mode(v.choice) == "loop")
    tools = ScriptedTools()
    out = solve(mock, idx, attempt, tools, max_turns=4)
    assert out.model.failure == "max_turns_exhausted"
    assert "after 4 turns" in out.model.error
    assert len(tools.calls) == 3 and len(out.turns) == 4
    assert out.turns[-1]["tool_calls"][0]["skipped"] == "no turn left"


def test_a_failing_command_is_recorded_with_its_exit_code_and_turn(mock: MockHandle) -> None:
    idx, attempt = task_and_attempt_where(lambda v: not v.correct and wrong_mode(v.choice) == "failing_command")
    tools = ScriptedTools(lambda name, args: ToolOutcome("cat: input/source.txt: No such file or directory",
                                                         exit_code=1))
    out = solve(mock, idx, attempt, tools)
    failed = [c for t in out.turns for c in t["tool_calls"] if c["exit_code"]]
    assert [(c["name"], c["exit_code"], c["turn"]) for c in failed] == [("bash", 1, 1)]
    assert out.response == GAVE_UP


def test_long_output_keeps_its_head_and_tail_and_a_slow_tool_times_out(mock: MockHandle) -> None:
    idx = 3
    attempt = attempt_where(lambda v: v.correct, idx)

    async def answer(name: str, args: dict[str, Any]) -> ToolOutcome:
        if name == "bash":
            return ToolOutcome("HEAD" + "x" * 50_000 + "TAIL", exit_code=0)
        await asyncio.sleep(10)  # the slow tool: far past tool_timeout
        return ToolOutcome("never")

    out = solve(mock, idx, attempt, ScriptedTools(answer), max_output_chars=1_000, tool_timeout=0.2)
    bash, write = out.turns[0]["tool_calls"][0], out.turns[1]["tool_calls"][0]
    assert bash["truncated"] and bash["output_chars"] == 50_008 and len(bash["output"]) <= 1_000
    assert bash["output"].startswith("HEAD") and bash["output"].endswith("TAIL") and "characters cut" in bash["output"]
    assert out.messages[2]["content"] == bash["output"]  # the model reads what is stored
    assert write["error"] == "timeout" and write["latency_ms"] < 8_000


def test_a_tool_the_request_did_not_offer_is_not_called(mock: MockHandle) -> None:
    idx = 9
    attempt = attempt_where(lambda v: v.correct, idx)
    tools = ScriptedTools(names=("bash",))
    out = solve(mock, idx, attempt, tools)
    assert tools.calls == [] and "file_read tool" in out.response


def test_without_tools_the_solver_says_what_is_missing(mock: MockHandle) -> None:
    from workbench.errors import UsageError

    with pytest.raises(UsageError, match="needs tools"):
        solve(mock, 0, 0, None)


def test_the_protocol_and_settings_are_checked_before_anything_runs() -> None:
    from workbench.errors import UsageError

    with pytest.raises(UsageError, match="chat_completions"):
        ToolCallingSolver(ModelConfig(url="http://h/v1/responses", model_id="m", protocol="responses"))
    with pytest.raises(UsageError, match=r"solver\.max_turns"):
        ToolCallingSolver(ModelConfig(url="http://h/v1", model_id="m"), ToolCallingSettings(max_turns=0))


def test_bad_arguments_and_unknown_tools_reach_the_model_as_errors() -> None:
    from workbench.solvers.tool_calling import ToolCallingWorker

    worker = ToolCallingWorker.__new__(ToolCallingWorker)
    worker._settings = ToolCallingSettings()
    box = CombinedToolBox([ScriptedTools(names=("bash",))])
    call = {"id": "c1", "function": {"name": "bash", "arguments": "{not json"}}
    text, entry = asyncio.run(worker._run_call(box, call, 2))
    assert entry["error"] == "bad_arguments" and "not a JSON object" in text and entry["turn"] == 2
    text, entry = asyncio.run(worker._run_call(box, {"id": "c2", "function": {"name": "rm_rf", "arguments": "{}"}}, 1))
    assert entry["error"] == "unknown_tool" and "the tools are: bash" in text


def test_truncation_keeps_head_and_tail_within_the_limit() -> None:
    text, cut = truncate_middle("a" * 100 + "b" * 100, 120)
    assert cut and len(text) <= 120 and text.startswith("a") and text.endswith("b")
    assert truncate_middle("short", 120) == ("short", False)


def test_two_tool_boxes_may_not_offer_the_same_name() -> None:
    from workbench.errors import UsageError

    with pytest.raises(UsageError, match=r"two tools are named 'bash'"):
        CombinedToolBox([ScriptedTools(names=("bash",)), ScriptedTools(names=("bash",))])
