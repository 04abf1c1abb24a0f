"""HumanEval before the sandbox: the shipped data, seeding, static answer-key checks, a verify that refuses,
and the mock model's code replies."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from workbench.environments import EvalEnvironment, benchmark_names, get_environment
from workbench.environments.humaneval import INSTRUCTION, HumanEvalEnvironment
from workbench.errors import UsageError
from workbench.mock.answers import AnswerIndex, Task
from workbench.mock.responder import REFUSAL, Responder, wrong_function
from workbench.mock.skill import SkillProfile
from workbench.scoring.code import extract_code

FOLDER = Path(__file__).resolve().parents[2] / "benchmarks" / "humaneval"
SHARED_SOURCE = FOLDER.parents[2] / "shared" / "data" / "humaneval" / "HumanEval.jsonl.gz"
DATA_SHA256 = "1d49078ba3e2b196b9344535bef34a43021f038fad9561d6ee7c53450609a6a2"
# Pinned on purpose: a change to the data or the prompt must be deliberate, since it splits run history.
DATA_HASH = "2a0ebce9c3e02dbb"


@pytest.fixture(scope="module")
def env() -> HumanEvalEnvironment:
    return HumanEvalEnvironment()


@pytest.fixture(scope="module")
def rows() -> list[dict[str, str]]:
    return [json.loads(line) for line in (FOLDER / "data.jsonl").read_text(encoding="utf-8").splitlines()]


def _prepare() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_prepare_humaneval", FOLDER / "prepare.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write_rows(path: Path, rows: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# --- the shipped data ------------------------------------------------------------------------


def test_the_shipped_data_is_the_upstream_file_decompressed(rows: list[dict[str, str]]) -> None:
    assert hashlib.sha256((FOLDER / "data.jsonl").read_bytes()).hexdigest() == DATA_SHA256
    assert DATA_SHA256 in (FOLDER / "SOURCE.md").read_text()
    assert len(rows) == 164
    assert [r["task_id"] for r in rows] == [f"HumanEval/{i}" for i in range(164)]
    assert all(set(r) == {"task_id", "prompt", "entry_point", "canonical_solution", "test"} for r in rows)


@pytest.mark.skipif(not SHARED_SOURCE.is_file(), reason="the shared HumanEval source is not here (clean clone)")
def test_prepare_reproduces_the_shipped_data_byte_for_byte() -> None:
    assert _prepare().render(SHARED_SOURCE.read_bytes()) == (FOLDER / "data.jsonl").read_bytes()


def test_prepare_refuses_a_source_that_is_not_the_recorded_file() -> None:
    with pytest.raises(ValueError, match="sha256"):
        _prepare().render(b"not the HumanEval file")


def test_the_folder_has_data_prepare_script_readme_source_and_mit_licence_but_no_toml() -> None:
    for file in ("data.jsonl", "prepare.py", "README.md", "SOURCE.md", "LICENSE"):
        assert (FOLDER / file).is_file(), file
    assert not (FOLDER / "benchmark.toml").exists()
    licence = (FOLDER / "LICENSE").read_text()
    assert licence.startswith("MIT License") and "Copyright (c) OpenAI" in licence
    readme = (FOLDER / "README.md").read_text()
    assert "sandbox" in readme and "refuses to start" in readme


# --- registry and description ----------------------------------------------------------------


def test_it_is_a_builtin_with_164_problems() -> None:
    assert "humaneval" in benchmark_names()
    built = get_environment("humaneval")
    assert isinstance(built, HumanEvalEnvironment) and len(built) == 164


def test_describe_says_code_scored_by_execution_needing_a_sandbox(env: HumanEvalEnvironment) -> None:
    info = env.describe()
    assert info["name"] == "humaneval" and info["size"] == 164
    assert info["domain"] == "code" and info["scorer"] == "code_execution"
    assert info["default_repeats"] == 10
    assert info["license"] == "MIT" and "human-eval" in info["source"]
    assert info["requires_sandbox"] is True and info["description"]


def test_only_sandboxed_benchmarks_require_a_sandbox(env: HumanEvalEnvironment) -> None:
    assert HumanEvalEnvironment.requires_sandbox is True and env.requires_sandbox
    assert EvalEnvironment.requires_sandbox is False
    assert get_environment("gsm8k").requires_sandbox is False


# --- seeding ---------------------------------------------------------------------------------


def test_seed_is_the_instruction_then_the_problem(env: HumanEvalEnvironment, rows: list[dict[str, str]]) -> None:
    for idx in (0, 64, 163):
        seed, row = env.seed(idx), rows[idx]
        assert seed.prompt == f"{INSTRUCTION}\n\n{row['prompt'].strip(chr(10))}"
        assert "```python code block" in seed.prompt
        assert seed.messages == ({"role": "user", "content": seed.prompt},)
        assert seed.expected_answer == row["prompt"] + row["canonical_solution"]
        assert seed.metadata == {"idx": idx, "entry_point": row["entry_point"], "humaneval_id": row["task_id"]}


def test_seed_out_of_range_is_an_index_error(env: HumanEvalEnvironment) -> None:
    with pytest.raises(IndexError, match="out of range"):
        env.seed(164)
    with pytest.raises(IndexError):
        env.seed(-1)


def test_task_ids_are_distinct_and_stable_across_loads(env: HumanEvalEnvironment) -> None:
    ids = [env.seed(i).task_id for i in range(len(env))]
    assert len(set(ids)) == 164
    assert ids == [HumanEvalEnvironment().seed(i).task_id for i in range(164)]
    assert ids[0] == "946c2eadc46c7646"


def test_answer_key_questions_appear_verbatim_in_the_prompts(env: HumanEvalEnvironment) -> None:
    entries = list(env.answer_key())
    assert len(entries) == 164
    for idx, entry in enumerate(entries):
        seed = env.seed(idx)
        assert entry.question in seed.prompt and seed.prompt.endswith(entry.question)
        assert entry.answer == seed.expected_answer and entry.solution is None


def test_data_hash_is_pinned_and_follows_the_data(env: HumanEvalEnvironment, tmp_path: Path,
                                                  rows: list[dict[str, str]]) -> None:
    assert env.data_hash == HumanEvalEnvironment().data_hash == DATA_HASH
    changed = [dict(rows[0], prompt=rows[0]["prompt"] + "# edited\n"), *rows[1:]]
    assert HumanEvalEnvironment(_write_rows(tmp_path / "d.jsonl", changed)).data_hash != DATA_HASH


# --- scoring refuses, validation checks statically -------------------------------------------


def test_verify_refuses_in_one_line_naming_the_sandbox(env: HumanEvalEnvironment) -> None:
    seed = env.seed(0)
    with pytest.raises(UsageError, match="sandbox") as caught:
        env.verify(seed.expected_answer, seed.expected_answer, **seed.metadata)
    assert "\n" not in str(caught.value) and "humaneval" in str(caught.value)


def test_every_answer_key_entry_passes_the_static_checks(env: HumanEvalEnvironment) -> None:
    for idx in range(len(env)):
        ok, how = env.check_answer_key(idx)
        entry = env.seed(idx).metadata["entry_point"]
        assert ok, (idx, how)
        assert how == f"compiles; entry point {entry} defined; tests define check (execution needs a sandbox)"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"canonical_solution": "    return [x for x in\n"}, "the solution does not compile (line"),
        ({"test": "def check(candidate):\n    assert candidate(1) ==\n"}, "the test code does not compile"),
        ({"entry_point": "no_such_function"}, "does not define the entry point 'no_such_function'"),
        ({"test": "def verify(candidate):\n    assert candidate([1.0], 0.5) is False\n"}, "tests do not define check"),
    ],
)
def test_a_broken_row_fails_the_check_saying_why(
    tmp_path: Path, rows: list[dict[str, str]], change: dict[str, str], message: str
) -> None:
    broken = HumanEvalEnvironment(_write_rows(tmp_path / "d.jsonl", [rows[0], {**rows[1], **change}]))
    assert broken.check_answer_key(0)[0]
    ok, how = broken.check_answer_key(1)
    assert not ok and message in how and "\n" not in how


def test_a_row_without_a_field_is_a_usage_error_naming_file_and_line(tmp_path: Path,
                                                                     rows: list[dict[str, str]]) -> None:
    partial = {k: v for k, v in rows[1].items() if k != "test"}
    path = _write_rows(tmp_path / "d.jsonl", [rows[0], partial])
    with pytest.raises(UsageError, match=r"d\.jsonl:2: row has no text field 'test'"):
        HumanEvalEnvironment(path)


def test_a_missing_data_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read dataset"):
        HumanEvalEnvironment(tmp_path / "nowhere.jsonl")


def test_other_benchmarks_check_their_answer_key_by_scoring_it() -> None:
    assert get_environment("gsm8k").check_answer_key(0) == (True, "scores 1.0 via last_number")


# --- the mock model's replies ----------------------------------------------------------------

ATTEMPTS = 6


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return AnswerIndex.load(["humaneval"]).tasks


def test_the_mock_knows_every_problem_and_never_holds_its_verify(tasks: list[Task],
                                                                  env: HumanEvalEnvironment) -> None:
    assert len(tasks) == 164
    assert all(t.scorer == "code_execution" and t.verify is None for t in tasks)
    index = AnswerIndex(tasks)
    for idx in (0, 100, 163):
        found = index.lookup(env.seed(idx).prompt)
        assert found is not None and found.index == idx and found.answer == env.seed(idx).expected_answer
        wrapped = index.lookup(f"System: be brief.\n\n{env.seed(idx).prompt.removeprefix(INSTRUCTION)}")
        assert wrapped is not None and wrapped.index == idx


def test_mock_replies_are_the_reference_function_in_a_python_block_or_plausibly_wrong(
    tasks: list[Task], env: HumanEvalEnvironment
) -> None:
    responder = Responder(SkillProfile(0))
    kinds: Counter[str] = Counter()
    for task in tasks:
        entry = env.seed(task.index).metadata["entry_point"]
        for attempt in range(ATTEMPTS):
            correct = responder.skill.attempt(task.key, None, attempt).correct
            reply = responder.respond(task, None, attempt)
            assert reply == responder.respond(task, None, attempt)  # the same attempt reads the same
            code, method = extract_code(reply.text)
            if correct:
                assert method == "fenced_python" and code is not None and code.strip() == task.answer.strip()
                assert reply.finish_reason == "stop" and not reply.text.startswith("```")
                kinds["right"] += 1
            elif reply.text in (REFUSAL, ""):
                assert code is None
                kinds["refusal or empty"] += 1
            elif reply.finish_reason == "length":
                assert method == "fenced_python" and code is not None and task.answer.strip() not in code
                kinds["cut off"] += 1
            else:
                assert method == "fenced_python" and code is not None and code.strip() != task.answer.strip()
                tree = ast.parse(code)
                assert entry in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
                kinds["wrong function"] += 1
    assert kinds["right"] > 300 and kinds["wrong function"] > 100
    assert kinds["cut off"] > 20 and kinds["refusal or empty"] > 0


@pytest.mark.parametrize("choice", [0, 1 << 16, 2 << 16, 3 << 16])
def test_wrong_functions_keep_the_signature_and_docstring_and_return_a_constant(
    tasks: list[Task], choice: int
) -> None:
    for task in tasks:
        code = wrong_function(task.question, choice)
        assert code.startswith(task.question.rstrip())
        function = ast.parse(code).body[-1]
        assert isinstance(function, ast.FunctionDef)
        last = function.body[-1]
        assert isinstance(last, ast.Return) and isinstance(last.value, ast.Constant | ast.List)
