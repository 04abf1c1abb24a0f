"""Write ``data.jsonl``: small file-manipulation tasks for an agent with a sandbox (deterministic).

Each row: ``id``, ``instruction`` (what the agent is asked), ``files`` (what the sandbox's work
directory holds before the attempt), ``checks`` (what it must hold after: ``files`` with exact
contents, ``absent`` paths) and ``solution`` (a reference sequence of tool calls that passes the
checks; the built-in mock model follows it, and ``nel validate`` replays it).

    python benchmarks/file_tasks/prepare.py
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

WORDS = ["amber", "birch", "cedar", "delta", "ember", "fjord", "grove", "heron", "iris", "juniper", "kestrel",
         "lumen", "maple", "nectar", "onyx", "pine", "quartz", "raven", "sage", "thistle"]


def bash(command: str) -> dict[str, Any]:
    return {"tool": "bash", "arguments": {"command": command}}


def write(path: str, content: str) -> dict[str, Any]:
    return {"tool": "file_write", "arguments": {"path": path, "content": content}}


def replace(path: str, old: str, new: str) -> dict[str, Any]:
    return {"tool": "str_replace_editor", "arguments": {"path": path, "old_str": old, "new_str": new}}


def read(path: str) -> dict[str, Any]:
    return {"tool": "file_read", "arguments": {"path": path}}


def tasks(rng: random.Random) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, word in enumerate(rng.sample(WORDS, 3)):  # write a file
        name = f"greeting-{i}.txt"
        out.append({"instruction": f"Create a file named {name} whose only content is the line: hello, {word}",
                    "files": {}, "checks": {"files": {name: f"hello, {word}\n"}},
                    "solution": [write(name, f"hello, {word}\n")]})
    for name in rng.sample(WORDS, 3):  # count lines
        n = rng.randrange(5, 40)
        rows = "".join(f"{WORDS[rng.randrange(len(WORDS))]},{rng.randrange(100)}\n" for _ in range(n))
        out.append({"instruction": f"Write the number of lines in data/{name}.csv, as digits followed by a newline, "
                                   "to a new file count.txt.",
                    "files": {f"data/{name}.csv": rows}, "checks": {"files": {"count.txt": f"{n}\n"}},
                    "solution": [bash(f"wc -l data/{name}.csv"), write("count.txt", f"{n}\n")]})
    for folder in rng.sample(WORDS, 3):  # rename by extension
        d = f"notes-{folder}"
        names = rng.sample(WORDS, 3)
        files = {f"{d}/{w}.txt": f"note about {w}\n" for w in names}
        files[f"{d}/keep.csv"] = "a,b\n"
        checks = {"files": {f"{d}/{w}.md": f"note about {w}\n" for w in names} | {f"{d}/keep.csv": "a,b\n"},
                  "absent": [f"{d}/{w}.txt" for w in names]}
        out.append({"instruction": f"Rename every .txt file in the {d} directory so that it ends in .md instead; "
                                   "leave other files alone.",
                    "files": files, "checks": checks,
                    "solution": [bash(f"ls {d}"),
                                 bash(f'for f in {d}/*.txt; do mv -- "$f" "${{f%.txt}}.md"; done')]})
    for _ in range(3):  # edit a config value
        port = rng.randrange(1024, 9999)
        new = rng.randrange(1024, 9999)
        text = f"[server]\nmode = debug\nport = {port}\nworkers = 4\n"
        out.append({"instruction": f"In settings.ini, change the port from {port} to {new} and the mode from debug "
                                   "to release. Change nothing else.",
                    "files": {"settings.ini": text},
                    "checks": {"files": {"settings.ini": text.replace(f"port = {port}", f"port = {new}")
                                         .replace("mode = debug", "mode = release")}},
                    "solution": [read("settings.ini"), replace("settings.ini", f"port = {port}", f"port = {new}"),
                                 replace("settings.ini", "mode = debug", "mode = release")]})
    for name in rng.sample(WORDS, 3):  # sum numbers
        numbers = [rng.randrange(-50, 200) for _ in range(rng.randrange(4, 12))]
        src = f"{name}-numbers.txt"
        out.append({"instruction": f"{src} holds one integer per line. Write their sum, followed by a newline, "
                                   "to total.txt.",
                    "files": {src: "".join(f"{n}\n" for n in numbers)},
                    "checks": {"files": {"total.txt": f"{sum(numbers)}\n"}},
                    "solution": [bash(f"python3 -c \"print(sum(int(l) for l in open('{src}')))\" > total.txt")]})
    for folder in rng.sample(WORDS, 3):  # delete by pattern
        d = f"logs-{folder}"
        logs = rng.sample(WORDS, 2)
        keep = rng.sample([w for w in WORDS if w not in logs], 2)
        files = {f"{d}/{w}.log": f"{w} log\n" for w in logs} | {f"{d}/{w}.txt": f"{w} text\n" for w in keep}
        out.append({"instruction": f"Delete every file ending in .log inside the {d} directory, and keep the others.",
                    "files": files,
                    "checks": {"files": {f"{d}/{w}.txt": f"{w} text\n" for w in keep},
                               "absent": [f"{d}/{w}.log" for w in logs]},
                    "solution": [bash(f"rm -f {d}/*.log"), bash(f"ls {d}")]})
    for name in rng.sample(WORDS, 3):  # upper-case a file into a new one
        text = " ".join(rng.sample(WORDS, 4)) + "\n"
        upper = name.upper()
        out.append({"instruction": f"Write the contents of {name}.txt in upper case to a new file {upper}.txt; "
                                   f"keep {name}.txt.",
                    "files": {f"{name}.txt": text},
                    "checks": {"files": {f"{upper}.txt": text.upper(), f"{name}.txt": text}},
                    "solution": [bash(f"tr a-z A-Z < {name}.txt > {upper}.txt")]})
    for word in rng.sample(WORDS, 3):  # directory and report
        out.append({"instruction": f"Create the directory out/reports and, inside it, a file summary.txt containing "
                                   f"the single line: status {word}",
                    "files": {}, "checks": {"files": {"out/reports/summary.txt": f"status {word}\n"}},
                    "solution": [bash("mkdir -p out/reports"), write("out/reports/summary.txt", f"status {word}\n")]})
    for n, row in enumerate(out):
        row["id"] = f"file_tasks/{n}"
    instructions = [row["instruction"] for row in out]
    assert len(set(instructions)) == len(instructions), "every task needs its own instruction"
    return out


def main() -> None:
    rows = tasks(random.Random(20261121))
    path = Path(__file__).with_name("data.jsonl")
    path.write_text("".join(json.dumps({"id": r["id"], **{k: v for k, v in r.items() if k != "id"}}) + "\n"
                            for r in rows))
    print(f"wrote {len(rows)} tasks to {path}")


if __name__ == "__main__":
    main()
