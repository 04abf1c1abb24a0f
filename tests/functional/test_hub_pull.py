"""`nel benchmarks pull` against a real HTTP server standing in for the hub (HF_ENDPOINT): huggingface_hub's own
requests, the revision resolved and pinned, HF_TOKEN sent to the hub and nowhere else, the hub's errors as one
line each, and a new upstream commit making a different run identity."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from hub_cache import FakeHub, jsonl_bytes, parquet_bytes
from nel_helpers import assert_ok, assert_one_line_error, clean_env

from workbench import open_store

TOKEN = "hf_GatedTokenValue123456"
ROWS = [{"q": f"What is {i} + {i}?", "a": i + i, "topic": "sums"} for i in range(6)]
CONVERTER = '''
def convert(row):
    return {"question": row["q"], "answer": str(row["a"]), "category": row["topic"]}
'''
TOML = '''
name = "sums"
description = "sums from the hub"
domain = "math"
prompt = "Q: {question}\\nA:"
input_field = "question"
target_field = "answer"
scorer = "numeric"
license = "CC-BY-4.0"

[hub]
repo = "test-org/sums"
split = "test"
revision = "REVISION"
convert = "nel_test_sums:convert"
'''
# `nel`, with the built-in benchmarks read from this test's own folder (the shipped ones stay untouched)
RUNNER = ("import sys; from pathlib import Path; from workbench.environments import registry; "
          "folder = Path(sys.argv.pop(1)); registry.benchmarks_dir = lambda: folder; "
          "from workbench.cli import entry; sys.argv[0] = 'nel'; entry()")


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    with FakeHub() as server:
        server.commit("test-org/sums", {"data/test-00000-of-00001.parquet": parquet_bytes(ROWS[:4]),
                                        "README.md": b"# sums\n"})
        yield server


class Workspace:
    def __init__(self, root: Path, hub: FakeHub) -> None:
        self.root, self.hub = root, hub
        self.benchmarks = root / "benchmarks"
        (self.benchmarks / "sums").mkdir(parents=True)
        self.set_revision("main")
        (root / "modules").mkdir()
        (root / "modules" / "nel_test_sums.py").write_text(CONVERTER)

    def set_revision(self, revision: str) -> None:
        (self.benchmarks / "sums" / "benchmark.toml").write_text(TOML.replace("REVISION", revision))

    def env(self, *, offline: bool = False, token: str | None = None) -> dict[str, str]:
        env = clean_env(HF_HOME=str(self.root / "hf"), NEL_DATA_DIR=str(self.root / "nel"),
                        HF_ENDPOINT=self.hub.url, HF_HUB_OFFLINE="1" if offline else "0",
                        PYTHONPATH=os.pathsep.join([str(self.root / "modules"), os.environ.get("PYTHONPATH", "")]))
        env.pop("HF_TOKEN", None)
        if token is not None:
            env["HF_TOKEN"] = token
        return env

    def nel(self, *args: str, offline: bool = False, token: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", RUNNER, str(self.benchmarks), *args], cwd=self.root,
                              env=self.env(offline=offline, token=token), capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL)


@pytest.fixture
def ws(tmp_path: Path, hub: FakeHub) -> Workspace:
    return Workspace(tmp_path, hub)


def _files_containing(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


@pytest.mark.timeout(120)
def test_pull_resolves_the_revision_downloads_the_split_and_freezes_it(ws, hub):
    sha = hub.refs["test-org/sums"]["main"]
    proc = ws.nel("benchmarks", "pull", "sums")
    assert_ok(proc)
    assert "sums: test-org/sums (default, test) at main" in proc.stderr
    manifest = orjson.loads((ws.root / "nel" / "benchmarks" / "sums" / sha / "manifest.json").read_bytes())
    assert proc.stdout.split() == ["sums", "revision", sha, "4", "rows", *proc.stdout.split()[5:7], "sha256",
                                   manifest["sha256"], "licence", "CC-BY-4.0", "pulled"]
    assert "GET /api/datasets/test-org/sums/revision/main" in hub.requests
    assert any(r.startswith(f"GET /datasets/test-org/sums/resolve/{sha}/data/test-") for r in hub.requests)
    again = ws.nel("benchmarks", "pull", "sums")
    assert_ok(again)
    assert again.stdout.rstrip().endswith("up to date")
    listed = orjson.loads(ws.nel("list", "--json", offline=True).stdout)
    [sums] = [i for i in listed if i["name"] == "sums"]
    assert (sums["present"], sums["size"], sums["revision"]) == ("yes", 4, sha)


@pytest.mark.timeout(120)
def test_a_gated_dataset_takes_hf_token_which_reaches_the_hub_and_nothing_else(ws, hub, mock):
    hub.gate("test-org/sums", TOKEN)
    line = assert_one_line_error(ws.nel("benchmarks", "pull", "sums"), 2)
    assert "is gated: set HF_TOKEN" in line
    pulled = ws.nel("benchmarks", "pull", "sums", token=TOKEN)
    assert_ok(pulled)
    assert f"Bearer {TOKEN}" in hub.authorizations
    ran = ws.nel("eval", "run", "-b", "sums", "--model-url", mock.base_url, "--model-id", "nel-mock", "--no-progress",
                 "--output-dir", "out", token=TOKEN)
    assert_ok(ran)
    for proc in (pulled, ran):
        assert TOKEN not in proc.stdout + proc.stderr
    assert _files_containing(ws.root / "nel", TOKEN.encode()) == []
    assert _files_containing(ws.root / "out", TOKEN.encode()) == []


@pytest.mark.timeout(120)
def test_the_hubs_errors_are_one_line_each(ws, hub):
    ws.set_revision("v9.9")
    line = assert_one_line_error(ws.nel("benchmarks", "pull", "sums"), 2)
    assert "revision 'v9.9' does not exist in test-org/sums" in line
    ws.set_revision("main")
    (ws.benchmarks / "sums" / "benchmark.toml").write_text(
        (ws.benchmarks / "sums" / "benchmark.toml").read_text().replace("test-org/sums", "test-org/nope"))
    line = assert_one_line_error(ws.nel("benchmarks", "pull", "sums"), 2)
    assert "no dataset repository 'test-org/nope' on the hub" in line
    line = assert_one_line_error(ws.nel("benchmarks", "pull", "mmlu-typo"), 2)
    assert "unknown benchmark 'mmlu-typo'; known benchmarks: file_tasks, humaneval, sums" in line
    line = assert_one_line_error(ws.nel("benchmarks", "pull"), 2)
    assert "name benchmarks or give --all" in line


@pytest.mark.timeout(120)
def test_offline_with_nothing_pulled_runs_say_how_to_fetch_and_list_says_not_present(ws, mock):
    line = assert_one_line_error(ws.nel("eval", "run", "-b", "sums", "--model-url", mock.base_url, "--model-id",
                                        "nel-mock", "--no-progress", "--output-dir", "out", offline=True), 2)
    assert "benchmark 'sums'" in line and "`nel benchmarks pull sums`" in line and "HF_HOME" in line
    listed = ws.nel("list", offline=True)
    assert_ok(listed)
    [sums] = [row.split() for row in listed.stdout.splitlines() if row.startswith("sums ")]
    assert sums == ["sums", "math", "?", "1", "numeric", "hf://test-org/sums",
                                                     "not", "present"]


@pytest.mark.timeout(120)
def test_a_new_upstream_commit_is_another_dataset_and_resume_names_the_revision_change(ws, hub, mock):
    first = hub.refs["test-org/sums"]["main"]
    assert_ok(ws.nel("benchmarks", "pull", "sums"))
    run = ("eval", "run", "-b", "sums", "--model-url", mock.base_url, "--model-id", "nel-mock", "--no-progress",
           "--output-dir", "out")
    assert_ok(ws.nel(*run, offline=True))
    second = hub.commit("test-org/sums", {"data/test-00000-of-00001.parquet": parquet_bytes(ROWS),
                                          "README.md": b"# sums\n"})
    pulled = ws.nel("benchmarks", "pull", "sums")
    assert_ok(pulled)
    assert f"revision {second}  6 rows" in pulled.stdout and pulled.stdout.rstrip().endswith("pulled")
    line = assert_one_line_error(ws.nel(*run, "--resume", offline=True), 2)
    assert f"dataset_revision: '{first}' -> '{second}'" in line
    runs = open_store(ws.root / "out").sql("SELECT count(*) AS n FROM runs")
    assert runs["n"][0] == 1


@pytest.mark.timeout(120)
def test_a_pinned_sha_pulls_that_commit_not_main(ws, hub):
    first = hub.refs["test-org/sums"]["main"]
    hub.commit("test-org/sums", {"test.jsonl": jsonl_bytes(ROWS)})
    ws.set_revision(first)
    proc = ws.nel("benchmarks", "pull", "sums")
    assert_ok(proc)
    assert f"revision {first}  4 rows" in proc.stdout
