"""One task's attempts: their transcripts, the pairs worth diffing and how their scoring differs (the attempts
themselves are read by ``workbench.store.queries.triage_attempts``)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from workbench.images import is_image, placeholder
from workbench.store.queries.triage_attempts import Attempt, TaskDetail, attempts
from workbench.store.reader import Store

FOLD_LINES = 12
"""A tool's output longer than this many lines opens folded: the calls around it stay in view."""


@dataclass(frozen=True, slots=True)
class Block:
    """One part of a transcript: a message, the reply, tool calls, an error or the scoring."""

    kind: Literal["system", "user", "assistant", "tool", "reasoning", "error", "scoring"]
    title: str
    text: str
    foldable: bool = False
    """A tool's output: a view may fold it to its title (``folded`` says whether it opens so)."""
    turn: int = 0
    """The model call it belongs to: 0 is the prompt, 1 the first reply (with its tool calls and their
    outputs), and so on; what a diff aligns the two attempts on."""

    @property
    def folded(self) -> bool:
        """Whether a view opens this block folded: a foldable block longer than ``FOLD_LINES`` lines."""
        return self.foldable and self.text.count("\n") >= FOLD_LINES


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: text as text, an image as its placeholder, the rest as JSON
        return "\n".join(p["text"] if isinstance(p, dict) and isinstance(p.get("text"), str)
                         else placeholder(p) if is_image(p) else _pretty(p) for p in content)
    return _pretty(content)


def _pretty(value: Any) -> str:
    if isinstance(value, str):
        return value
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()


_BARE = re.compile(r"[^\s\"'=]+")


def _argument(value: Any) -> str:
    """One argument's value as it would be typed: bare when it can be, else quoted JSON."""
    if isinstance(value, str) and _BARE.fullmatch(value):
        return value
    return orjson.dumps(value).decode()


def call_line(name: str, arguments: Any) -> str:
    """A tool call as a command: ``bash: ls -la`` when the arguments are one string (``{"cmd": "ls -la"}``),
    ``write: path=a.txt text="two words"`` otherwise; arguments that are not a JSON object are shown as sent."""
    if isinstance(arguments, str):
        try:
            arguments = orjson.loads(arguments) if arguments.strip() else {}
        except orjson.JSONDecodeError:
            return f"{name}: {arguments}"
    if not isinstance(arguments, dict):
        return f"{name}: {orjson.dumps(arguments).decode()}"
    if not arguments:
        return name
    if len(arguments) == 1 and isinstance(only := next(iter(arguments.values())), str):
        return f"{name}: {only}"
    return f"{name}: " + " ".join(f"{key}={_argument(value)}" for key, value in arguments.items())


def _calls_text(calls: Any) -> tuple[str, dict[str, str]]:
    """OpenAI-format tool calls as one command line each, and each call id's tool name."""
    if not isinstance(calls, list):
        return _pretty(calls), {}
    lines, names = [], {}
    for call in calls:
        if not isinstance(call, dict):
            lines.append(_pretty(call))
            continue
        raw = call.get("function")
        function: dict[str, Any] = raw if isinstance(raw, dict) else {}
        name = str(function.get("name") or call.get("name") or "?")
        lines.append(call_line(name, function.get("arguments", call.get("arguments", ""))))
        if call.get("id") is not None:
            names[str(call["id"])] = name
    return "\n".join(lines), names


def _calls_block(title: str, calls: Any, turn: int) -> tuple[Block, dict[str, str]]:
    text, names = _calls_text(calls)
    count = len(calls) if isinstance(calls, list) else 1
    return Block("tool", title + ("s" if count != 1 else "") + (f" ({count})" if count > 1 else ""), text,
                 turn=turn), names


def _lines(text: str) -> str:
    n = text.count("\n") + 1 if text else 0
    return f"{n} line{'s' if n != 1 else ''}"


def _tool_results(attempt: Attempt) -> dict[str, str]:
    """``tool_call_id`` → how that call went ("bash, turn 2: exit 1"), from the agent's turns."""
    out: dict[str, str] = {}
    for turn in attempt.turns if isinstance(attempt.turns, list) else ():
        for call in turn.get("tool_calls") or () if isinstance(turn, dict) else ():
            if not isinstance(call, dict) or call.get("id") is None:
                continue
            how = (f"error {call['error']}" if call.get("error") else
                   f"exit {call['exit_code']}" if call.get("exit_code") is not None else "done")
            cut = ", output cut" if call.get("truncated") else ""
            out[str(call["id"])] = f"turn {call.get('turn', turn.get('turn'))}, {how}{cut}"
    return out


def conversation(attempt: Attempt) -> list[Block]:
    """The exchange as the model saw it: messages sent, reasoning, the reply and its tool calls. A tool call
    reads as a command (``bash: ls -la``); its output is a foldable block naming the tool, how the call went
    (an agent's exit code or error) and its length."""
    blocks: list[Block] = []
    results = _tool_results(attempt)
    names: dict[str, str] = {}
    turn = 0
    for msg in attempt.messages:
        msg = msg if isinstance(msg, dict) else {"role": "user", "content": msg}
        role = str(msg.get("role") or "user")
        kind = role if role in ("system", "user", "assistant", "tool") else "user"
        if role == "assistant":
            turn += 1
        call_id = msg.get("tool_call_id")
        text = _content_text(msg.get("content"))
        if call_id is not None and role == "tool":
            how = "; ".join(x for x in (str(call_id), results.get(str(call_id)), _lines(text)) if x)
            blocks.append(Block("tool", f"output of {names.get(str(call_id), 'a tool')} ({how})", text,
                                foldable=True, turn=turn))
            continue
        if text or not msg.get("tool_calls"):
            blocks.append(Block(kind, role, text, turn=turn))  # type: ignore[arg-type]
        if msg.get("tool_calls"):
            block, called = _calls_block(f"{role} tool call", msg["tool_calls"], turn)
            blocks.append(block)
            names.update(called)
    if attempt.reasoning:
        blocks.append(Block("reasoning", "reasoning", attempt.reasoning, turn=turn + 1))
    if attempt.error is None or attempt.response:
        finish = f" (finish: {attempt.finish_reason})" if attempt.finish_reason else ""
        blocks.append(Block("assistant", f"assistant reply{finish}", attempt.response or "", turn=turn + 1))
    if attempt.tool_calls:
        blocks.append(_calls_block("reply tool call", attempt.tool_calls, turn + 1)[0])
    return blocks


def turns(blocks: Sequence[Block]) -> list[tuple[str, str]]:
    """The conversation cut at each model call: ("prompt", text), ("turn 1", text), … in order, each as
    ``blocks_text`` gives it (what a diff aligns two attempts on)."""
    out: dict[int, list[Block]] = {}
    for block in blocks:
        out.setdefault(block.turn, []).append(block)
    return [("prompt" if n == 0 else f"turn {n}", blocks_text(part)) for n, part in sorted(out.items())]


def transcript(attempt: Attempt) -> list[Block]:
    """The whole attempt, readable top to bottom: the conversation, then any error, then the scoring."""
    blocks = conversation(attempt)
    if attempt.error:
        status = f"HTTP {attempt.http_status}, " if attempt.http_status else ""
        blocks.append(Block("error", f"error ({status}{attempt.n_retries or 0} retries)", attempt.error))
    lines = [
        f"outcome: {attempt.outcome}   reward: {attempt.reward:g}   method: {attempt.scoring_method or '-'}",
        f"extracted: {_show(attempt.extracted_answer)}",
        f"expected:  {_show(attempt.expected_answer)}",
    ]
    if attempt.scoring_details is not None:
        lines += ["details:", _pretty(attempt.scoring_details)]
    if attempt.scores:
        lines += ["metrics:", _pretty(attempt.scores)]
    blocks.append(Block("scoring", "scoring", "\n".join(lines)))
    return blocks


def _show(value: str | None) -> str:
    return "—" if value is None else repr(value)


def blocks_text(blocks: Sequence[Block]) -> str:
    """Blocks as plain text, each under a ``── title ──`` rule (what the diff compares)."""
    return "\n".join(f"── {b.title} ──\n{b.text}" for b in blocks)


def default_pair(attempts: Sequence[Attempt]) -> tuple[Attempt, Attempt] | None:
    """The pair a diff opens on: the first passing and the first failing attempt when the task sometimes
    passes (the most telling contrast), else the first two attempts; None with fewer than two."""
    passing = [a for a in attempts if a.passed]
    failing = [a for a in attempts if not a.passed]
    if passing and failing:
        return passing[0], failing[0]
    return (attempts[0], attempts[1]) if len(attempts) >= 2 else None


def counterpart(store: Store, attempt: Attempt, other_run: str) -> Attempt | None:
    """The same task (by content hash) in ``other_run``: an attempt with the opposite outcome if there
    is one, else the same repeat, else the first; None when that run never attempted the task."""
    others = attempts(store, other_run, task_id=attempt.task_id)
    for choose in (lambda o: o.passed != attempt.passed, lambda o: o.repeat == attempt.repeat, lambda o: True):
        found = next((o for o in others if choose(o)), None)
        if found is not None:
            return found
    return None


def scoring_difference(a: Attempt, b: Attempt) -> list[str]:
    """How the two attempts were scored differently, one sentence per difference."""
    out: list[str] = []
    if a.passed != b.passed or a.reward != b.reward:
        out.append(f"outcome: {a.outcome} (reward {a.reward:g}) → {b.outcome} (reward {b.reward:g})")
    elif a.failure_category != b.failure_category:
        out.append(f"failure category: {a.failure_category or '—'} → {b.failure_category or '—'}")
    if a.extracted_answer != b.extracted_answer:
        out.append(f"extracted answer: {_show(a.extracted_answer)} → {_show(b.extracted_answer)}")
    if a.expected_answer != b.expected_answer:
        out.append(f"expected answer: {_show(a.expected_answer)} → {_show(b.expected_answer)}")
    elif a.extracted_answer != b.extracted_answer:
        out.append(f"expected answer (both): {_show(a.expected_answer)}")
    if a.scoring_method != b.scoring_method:
        out.append(f"scoring method: {a.scoring_method or '—'} → {b.scoring_method or '—'}")
    if (a.error or None) != (b.error or None):
        out.append(f"error: {a.error or '—'} → {b.error or '—'}")
    da, db = a.scoring_details, b.scoring_details
    if isinstance(da, dict) and isinstance(db, dict):
        keys = [k for k in dict.fromkeys([*da, *db]) if da.get(k) != db.get(k) and k != "method"]
        out += [f"details.{k}: {_brief(da.get(k))} → {_brief(db.get(k))}" for k in keys]
    elif da != db:
        out.append(f"details: {_brief(da)} → {_brief(db)}")
    return out or ["scored the same"]


def _brief(value: Any, limit: int = 60) -> str:
    text = "—" if value is None else orjson.dumps(value).decode() if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _fenced(text: str) -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}\n{text}\n{fence}"


def attempts_markdown(detail: TaskDetail) -> str:
    """A task's attempts as a Markdown document: the question, then each attempt's transcript, part by part (what
    the export of a task writes as Markdown: it reads as the TUI shows it)."""
    out = [f"# Task {detail.task_idx} of run {detail.run_id}", "",
           f"task id `{detail.task_id}` · {detail.bucket} · {detail.n_pass}/{detail.n} pass · "
           f"expected {_show(detail.expected_answer)}", ""]
    if detail.prompt:
        out += ["## Question", "", _fenced(detail.prompt), ""]
    for attempt in detail.attempts:
        out += [f"## Attempt {attempt.repeat} ({attempt.outcome})", ""]
        for block in transcript(attempt):
            out += [f"### {block.title}", "", _fenced(block.text), ""]
    return "\n".join(out)
