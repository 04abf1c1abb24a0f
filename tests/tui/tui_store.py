"""Stores for the TUI tests, written directly (fixed content and timestamps: snapshots stay the same).

``demo_store``: two small runs of the same eight tasks, shaped so every bucket, a tool-calling
transcript, a long response and a cross-run flip appear. ``synthetic_store``: any number of
generated steps in one SQL statement per run (the paging test and the 1,000,000-step benchmark).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from workbench.store.columns import RUN_COLUMNS, SHARD_COLUMNS, STEP_COLUMNS
from workbench.store.database import connect_rw

RUN_A, RUN_B = "demo-a", "demo-b"
LONG_IDS = {RUN_A: "gsm8k_cot_zeroshot-mock-20260102-100000-3f9a2c",
            RUN_B: "gsm8k_cot_zeroshot-mock-20260103-090000-b71e04"}
"""The demo runs under ids as long as real ones, which share their head and differ in their tail."""
SYSTEM = "You are a careful solver. End with a line 'The answer is: N'."
LONG_LINES = 2000

# (prompt, expected answer, category)
TASKS = [
    ("What is 2 + 3?", "5", "arithmetic"),
    ("What is 7 * 6?", "42", "arithmetic"),
    ("Solve x + 4 = 10 for x.", "6", "algebra"),
    ("A train travels 60 km in 1.5 hours. What is its speed in km/h?", "40", "rates"),
    ("Use the calculator tool to compute 123 * 45.", "5535", "tools"),
    ("What is the 10th prime number?", "29", "number theory"),
    ("How many legs do 3 spiders have?", "24", "arithmetic"),
    ("What is 15% of 80?", "12", "percentages"),
]
TASK_IDS = [f"task{idx:04d}" for idx in range(len(TASKS))]

# Per run and task: one outcome per repeat. A number is the answer given ("ok" = the expected one),
# "format" a reply without a final answer, "500" a server error with no reply.
OUTCOMES: dict[str, list[list[str]]] = {
    RUN_A: [
        ["ok", "ok", "ok", "ok"],
        ["ok", "ok", "ok", "ok"],
        ["ok", "14", "ok", "format"],
        ["90", "ok", "90", "45"],
        ["ok", "5525", "ok", "ok"],
        ["23", "31", "27", "23"],
        ["500", "500", "500", "500"],
        [],
    ],
    RUN_B: [
        ["ok", "ok"], ["ok", "41"], ["ok", "ok"], ["ok", "ok"], ["5525", "5525"], ["27", "ok"], ["ok", "ok"],
        ["ok", "ok"],
    ],
}
RUNS: dict[str, dict[str, Any]] = {
    RUN_A: {"model_id": "model-a", "created_at": datetime(2026, 1, 2, 10, 0, 0), "n_repeats": 4},
    RUN_B: {"model_id": "model-b", "created_at": datetime(2026, 1, 3, 9, 0, 0), "n_repeats": 2},
}


def _reply(idx: int, answer: str) -> str:
    """A short worked answer; the long one (task 5, first attempt) tests that only visible lines render."""
    work = {
        0: "2 plus 3 makes 5.", 1: "7 times 6 is 42.", 2: "Subtract 4 from both sides: x = 10 - 4.",
        3: "Speed is distance over time: 60 / 1.5.", 4: "The calculator returned the product.",
        5: "Listing primes: 2, 3, 5, 7, 11, 13, 17, 19, 23, 29.", 6: "Each spider has 8 legs, 3 * 8.",
        7: "15% of 80 is 0.15 * 80.",
    }[idx]
    if answer == "format":
        return f"Let me think.\n{work}\nI am not sure."
    return f"Let me think.\n{work}\nThe answer is: {answer}"


def _messages(idx: int) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASKS[idx][0]}]
    if idx == 4:
        call = {"id": "call_1", "type": "function",
                "function": {"name": "calculator", "arguments": '{"expr": "123 * 45"}'}}
        msgs += [{"role": "assistant", "content": None, "tool_calls": [call]},
                 {"role": "tool", "tool_call_id": "call_1", "content": "5535"}]
    return msgs


def _step(run_id: str, idx: int, rep: int, outcome: str) -> dict[str, Any]:
    expected = TASKS[idx][1]
    answer = expected if outcome == "ok" else outcome
    created: datetime = RUNS[run_id]["created_at"]
    row: dict[str, Any] = dict.fromkeys(STEP_COLUMNS)
    row.update(
        run_id=run_id, task_idx=idx, repeat=rep, task_id=TASK_IDS[idx], shard_idx=0,
        started_at=created + timedelta(seconds=1 + idx * 4 + rep), prompt=TASKS[idx][0],
        messages=orjson.dumps(_messages(idx)).decode(), expected_answer=expected, scoring_method="numeric",
        http_status=200, n_retries=0, request_hash="0" * 64, finish_reason="stop",
        prompt_tokens=30 + idx, completion_tokens=20 + 3 * rep, total_tokens=50 + idx + 3 * rep,
        latency_ms=100.0 + 10 * idx + rep, seed_ms=0.1, model_ms=99.0 + 10 * idx + rep, verify_ms=0.2,
    )
    if outcome == "500":
        row.update(response="", reward=0.0, passed=False, failure_category="server_error", http_status=500,
                   error="HTTP 500: internal server error", finish_reason=None, n_retries=2,
                   scoring_details=orjson.dumps({"method": "none", "reason": "no response"}).decode(),
                   scoring_method="none", prompt_tokens=None, completion_tokens=None, total_tokens=None)
        return row
    response = _reply(idx, answer)
    if run_id == RUN_A and idx == 5 and rep == 0:
        response = "\n".join(f"Checking whether {n} is prime: line {n} of a long search." for n in
                             range(LONG_LINES)) + "\nThe answer is: 23"
    extracted = None if outcome == "format" else answer
    passed = extracted == expected
    row.update(
        response=response, reward=1.0 if passed else 0.0, passed=passed, extracted_answer=extracted,
        failure_category="format_error" if outcome == "format" else None,
        scoring_details=orjson.dumps({"method": "numeric", "raw_match": extracted, "normalized_expected": expected,
                                      "normalized_extracted": extracted}).decode(),
    )
    return row


def _insert(con: Any, table: str, columns: tuple[str, ...], rows: list[dict[str, Any]]) -> None:
    con.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})",
                    [[r[c] for c in columns] for r in rows])


def demo_store(path: Path, ids: dict[str, str] | None = None) -> Path:
    """Write the two demo runs into a fresh store at ``path`` (``ids``: stored under other run ids, e.g. long ones)."""
    stored = {**{run_id: run_id for run_id in RUNS}, **(ids or {})}
    con = connect_rw(path)
    try:
        for idx, (prompt, expected, category) in enumerate(TASKS):
            con.execute("INSERT INTO tasks VALUES (?, 'arith', ?, ?, ?)",
                        [TASK_IDS[idx], prompt, expected, orjson.dumps({"category": category}).decode()])
        for run_id, info in RUNS.items():
            outcomes = OUTCOMES[run_id]
            steps = [_step(run_id, i, r, o) for i, reps in enumerate(outcomes) for r, o in enumerate(reps)]
            run_id = stored[run_id]
            for step in steps:
                step["run_id"] = run_id
            finished = max(s["started_at"] for s in steps) + timedelta(seconds=2)
            run = {
                "run_id": run_id, "benchmark": "arith", "model_id": info["model_id"], "model_url": "http://mock/v1",
                "protocol": "chat_completions", "identity_hash": run_id.ljust(64, "0"), "identity": "{}",
                "config": '{"primary_metric": "numeric"}', "n_tasks": len(TASKS), "n_repeats": info["n_repeats"],
                "problem_start": 0, "problem_end": len(TASKS), "total_shards": 1, "status": "complete",
                "created_at": info["created_at"], "finished_at": finished, "nel_version": "test",
            }
            _insert(con, "runs", RUN_COLUMNS, [run])
            _insert(con, "run_shards", SHARD_COLUMNS, [{
                "run_id": run_id, "shard_idx": 0, "total_shards": 1, "problem_start": 0, "problem_end": len(TASKS),
                "status": "complete", "started_at": info["created_at"], "finished_at": finished,
                "n_steps": len(steps), "host": "test", "pid": 1, "error": None}])
            con.executemany("INSERT INTO run_tasks VALUES (?, ?, ?)",
                            [[run_id, i, TASK_IDS[i]] for i in range(len(TASKS))])
            _insert(con, "steps", tuple(STEP_COLUMNS), steps)
    finally:
        con.close()
    return path


def synthetic_store(path: Path, *, runs: int, tasks: int, repeats: int) -> Path:
    """``runs`` complete runs of the same ``tasks`` generated tasks with ``repeats`` attempts each,
    written in bulk by DuckDB (a million steps take seconds). Outcomes follow a per-task skill, so every
    bucket occurs; a few failures carry a category."""
    con = connect_rw(path)
    try:
        con.execute("SET memory_limit = '2GB'")  # the store's own limit is for writers beside a run
        con.execute("SET preserve_insertion_order = true")  # steps land in task order, as a run writes them
        con.execute("""INSERT INTO tasks SELECT 'syn-' || lpad(i::VARCHAR, 8, '0'), 'synthetic',
            'Problem ' || i || ': what is ' || (i % 97) || ' plus ' || (i % 89) || '? End with: The answer is: N.',
            ((i % 97) + (i % 89))::VARCHAR, json_object('category', ['sum', 'carry', 'small', 'large'][1 + i % 4])
            FROM range(?) t(i)""", [tasks])
        for r in range(runs):
            run_id = f"syn-{r}"
            con.execute("""INSERT INTO runs VALUES (?, 'synthetic', 'model-' || ?, 'http://mock/v1',
                'chat_completions', ?, '{}', '{}', ?, ?, 0, ?, 1, 'complete', TIMESTAMP '2026-01-01 00:00:00'
                + to_hours(?), TIMESTAMP '2026-01-01 00:30:00' + to_hours(?), 'test')""",
                        [run_id, r, run_id.ljust(64, "0"), tasks, repeats, tasks, r, r])
            con.execute("""INSERT INTO run_shards VALUES (?, 0, 1, 0, ?, 'complete', TIMESTAMP '2026-01-01',
                TIMESTAMP '2026-01-01 00:30:00', ?, 'test', 1, NULL)""", [run_id, tasks, tasks * repeats])
            con.execute("INSERT INTO run_tasks SELECT ?, i, 'syn-' || lpad(i::VARCHAR, 8, '0') FROM range(?) t(i)",
                        [run_id, tasks])
            con.execute(_SYNTHETIC_STEPS, [run_id, r, tasks, repeats, repeats])
    finally:
        con.close()
    return path


_SYNTHETIC_STEPS = """
INSERT INTO steps (run_id, task_idx, repeat, task_id, shard_idx, started_at, prompt, messages, response, finish_reason,
    reward, passed, expected_answer, extracted_answer, scoring_method, scoring_details, failure_category, http_status,
    n_retries, prompt_tokens, completion_tokens, total_tokens, latency_ms, seed_ms, model_ms, verify_ms, request_hash)
SELECT $1, i, rep, 'syn-' || lpad(i::VARCHAR, 8, '0'), 0, TIMESTAMP '2026-01-01' + to_milliseconds(i * $5 + rep),
    'Problem ' || i,
    json_array(json_object('role', 'user', 'content', 'Problem ' || i || ': what is ' || (i % 97) || ' plus '
        || (i % 89) || '? End with: The answer is: N.')),
    'Adding ' || (i % 97) || ' and ' || (i % 89) || '.' || chr(10) || 'The answer is: ' || answer,
    'stop', CASE WHEN ok THEN 1.0 ELSE 0.0 END, ok, expected::VARCHAR, answer::VARCHAR, 'numeric',
    '{"method": "numeric"}', CASE WHEN NOT ok AND h % 7 = 0 THEN 'format_error' END, 200, 0,
    40 + i % 30, 20 + h % 50, 60 + i % 30 + h % 50, 100 + h % 900, 0.1, 99.0, 0.2, md5(i::VARCHAR || '-' || rep)
FROM (
    SELECT i, rep, h, expected, ok, CASE WHEN ok THEN expected ELSE expected + 1 END AS answer
    FROM (
        SELECT i, rep, hash(i, rep, $2) % 1000 AS h, (i % 97) + (i % 89) AS expected,
               (hash(i, rep, $2) % 1000) / 1000.0 < (hash(i, $2) % 100) / 100.0 AS ok
        FROM range($3) t(i), range($4) s(rep)
    )
)
ORDER BY i, rep
"""


def write_live_run(store: Path, *, run_id: str = "live-run", tasks: int = 20, repeats: int = 3,
                   delay_s: float = 0.08, gate: Path | None = None, hold: Path | None = None) -> None:
    """Write a run step by step through the engine's shard writer, as a running ``nel eval run`` does
    (run as ``python tui_store.py live STORE [HOLD]`` it is another process, like a real run).

    While the file ``gate`` exists the second step waits and while ``hold`` exists the last one
    does, so a test decides when the run moves and when it ends, however slow the machine."""
    import time

    from workbench.store import ShardWriter

    header = {
        "run_id": run_id, "benchmark": "arith", "model_id": "model-live", "model_url": "http://mock/v1",
        "protocol": "chat_completions", "identity_hash": run_id.ljust(64, "0"), "identity": {}, "config": {},
        "n_tasks": tasks, "n_repeats": repeats, "problem_start": 0, "problem_end": tasks, "total_shards": 1,
        "created_at": time.time(), "nel_version": "test",
    }
    writer = ShardWriter(store, run_id, 0, roll_every=16)
    writer.begin(header, {"shard_idx": 0, "total_shards": 1, "problem_start": 0, "problem_end": tasks},
                 [{"run_id": run_id, "task_idx": i, "task_id": f"live{i:04d}", "benchmark": "arith",
                   "prompt": f"live problem {i}", "expected_answer": str(i), "metadata": None} for i in range(tasks)])
    for idx in range(tasks):
        for rep in range(repeats):
            row: dict[str, Any] = dict.fromkeys(STEP_COLUMNS)
            ok = (idx + rep) % 3 != 0
            row.update(run_id=run_id, task_idx=idx, repeat=rep, task_id=f"live{idx:04d}", shard_idx=0,
                       started_at=time.time(), messages='[{"role": "user", "content": "q"}]',
                       response=f"The answer is: {idx if ok else idx + 1}", reward=float(ok), passed=ok,
                       expected_answer=str(idx), extracted_answer=str(idx if ok else idx + 1),
                       failure_category=None if ok or idx % 2 else "format_error", total_tokens=50,
                       prompt_tokens=30, completion_tokens=20, latency_ms=10.0)
            waits_on = gate if (idx, rep) == (0, 1) else hold if (idx, rep) == (tasks - 1, repeats - 1) else None
            while waits_on is not None and waits_on.exists():
                time.sleep(0.02)
            writer.append(row)
            time.sleep(delay_s)  # the writer's pace, what the live view watches
    writer.finish("complete")


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["live"]:
        gates = [Path(arg) for arg in sys.argv[3:5]]
        write_live_run(Path(sys.argv[2]), gate=gates[0] if gates else None, hold=gates[1] if gates else None)


AGENT_RUNS = ("agent-a", "agent-b")
AGENT_QUESTION = "List the files in the repository and report how many there are.\nUse the bash tool."
OUTPUT_LINES = 40  # a tool output longer than FOLD_LINES: it opens folded


def _agent_step(run_id: str, rep: int, files: int) -> dict[str, Any]:
    """An agent attempt of two turns: ``bash: ls -la`` (its output one line per file), then the answer."""
    listing = "\n".join(f"-rw-r--r-- 1 nel nel {100 + n} Jan  1 file{n:02d}.py" for n in range(files))
    call = {"id": f"call_{rep}", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls -la"}'}}
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": AGENT_QUESTION},
                {"role": "assistant", "content": "I will list the files.", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": call["id"], "content": listing}]
    turns = [{"turn": 1, "text": "I will list the files.", "model": {}, "tool_calls": [
        {"id": call["id"], "name": "bash", "arguments": '{"cmd": "ls -la"}', "output": listing, "truncated": False,
         "exit_code": 0, "error": None, "latency_ms": 3.0, "turn": 1}]},
        {"turn": 2, "text": f"There are {files} files.", "model": {}, "tool_calls": []}]
    created: datetime = datetime(2026, 1, 4, 9, 0, 0)
    row: dict[str, Any] = dict.fromkeys(STEP_COLUMNS)
    passed = files == OUTPUT_LINES
    row.update(
        run_id=run_id, task_idx=0, repeat=rep, task_id="agent0000", shard_idx=0,
        started_at=created + timedelta(seconds=rep), prompt=AGENT_QUESTION, messages=orjson.dumps(messages).decode(),
        response=f"There are {files} files.\nThe answer is: {files}", expected_answer=str(OUTPUT_LINES),
        extracted_answer=str(files), reward=float(passed), passed=passed, scoring_method="numeric",
        scoring_details='{"method": "numeric"}', http_status=200, n_retries=0, request_hash="0" * 64,
        finish_reason="stop", prompt_tokens=100, completion_tokens=20, total_tokens=120, latency_ms=500.0,
        seed_ms=0.1, model_ms=400.0, verify_ms=0.2, turns=orjson.dumps(turns).decode(),
    )
    return row


def agent_store(path: Path) -> Path:
    """Two runs of one agent task (two attempts each, two turns: a ``bash`` call and the answer): run A lists
    40 files and passes, run B's second attempt sees 39 and fails."""
    con = connect_rw(path)
    try:
        con.execute("INSERT INTO tasks VALUES ('agent0000', 'agent', ?, ?, NULL)", [AGENT_QUESTION, "40"])
        for n, run_id in enumerate(AGENT_RUNS):
            steps = [_agent_step(run_id, 0, OUTPUT_LINES), _agent_step(run_id, 1, OUTPUT_LINES - n)]
            run = {
                "run_id": run_id, "benchmark": "agent", "model_id": f"model-{n}", "model_url": "http://mock/v1",
                "protocol": "chat_completions", "identity_hash": run_id.ljust(64, "0"), "identity": "{}",
                "config": "{}", "n_tasks": 1, "n_repeats": 2, "problem_start": 0, "problem_end": 1,
                "total_shards": 1, "status": "complete", "created_at": datetime(2026, 1, 4, 9 + n, 0, 0),
                "finished_at": datetime(2026, 1, 4, 9 + n, 0, 5), "nel_version": "test",
            }
            _insert(con, "runs", RUN_COLUMNS, [run])
            con.execute("INSERT INTO run_tasks VALUES (?, 0, 'agent0000')", [run_id])
            _insert(con, "steps", tuple(STEP_COLUMNS), steps)
    finally:
        con.close()
    return path
