"""`nel import lm-eval`: what lm-evaluation-harness itself wrote (``simple_evaluate`` against the mock, saved by its
own ``EvaluationTracker`` as ``lm_eval --output_path --log_samples`` saves it) becomes one run per task, whose pass
rate is lm-eval's accuracy exactly and whose documents pair with a native ``nel eval run -b gsm8k``.

The task is GSM8K's lm-eval config over the first 30 GSM8K test problems in a local file (``tests/fixtures/lmeval``,
shared with ``test_lmeval_oracle``): the same problems as nel's own gsm8k, asked with lm-eval's prompt.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any
from unittest.mock import patch

import orjson
import pytest
from nel_helpers import assert_ok, assert_one_line_error, eval_args, nel
from test_lmeval_oracle import FIXTURES, N_DOCS, PRIMARY, TASK, mock, offline_env  # noqa: F401  (fixtures)

from workbench.importers import lmeval
from workbench.importers.lmeval import import_lmeval
from workbench.mock.process import MockHandle
from workbench.store import open_store

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def lm_eval_output(mock: MockHandle, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:  # noqa: F811
    """lm-eval's own run and files: OUT/<model>/results_<date>.json and samples_<task>_<date>.jsonl."""
    import lm_eval
    from lm_eval import utils
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager

    out = tmp_path_factory.mktemp("lmeval-out")
    tracker = EvaluationTracker(output_path=str(out))
    cwd = Path.cwd()
    os.chdir(FIXTURES)
    try:
        own = getattr(utils.apply_template, "__wrapped__", utils.apply_template)
        with patch.object(utils, "apply_template", own):
            results = lm_eval.simple_evaluate(
                model="local-chat-completions",
                model_args=f"base_url={mock.base_url}/chat/completions,model=nel-mock,num_concurrent=4,max_retries=1",
                tasks=[TASK], apply_chat_template=True, log_samples=True,
                task_manager=TaskManager(include_path="."), evaluation_tracker=tracker)
    finally:
        os.chdir(cwd)
    assert results is not None
    samples = results.pop("samples")
    tracker.save_results_aggregated(results=results, samples=samples)
    for task in results["configs"]:
        tracker.save_results_samples(task_name=task, samples=samples[task])
    return out, results


def _import(store: Path, directory: Path, *args: str) -> tuple[str, str]:
    proc = nel("import", "lm-eval", str(directory), *args, "--store", str(store), cwd=store.parent)
    assert_ok(proc)
    return proc.stdout.split()[1].rstrip(":"), proc.stdout


def _steps(store: Path, run_id: str) -> list[tuple[Any, ...]]:
    return open_store(store).rows("SELECT task_idx, repeat, passed, reward, scores, task_id FROM steps "
                                  "WHERE run_id = ? ORDER BY task_idx, repeat", [run_id])


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _samples_file(directory: Path) -> Path:
    return next(directory.glob("*/samples_*.jsonl"))


def test_the_pass_rate_nel_computes_is_the_accuracy_lm_eval_reported_exactly(lm_eval_output, tmp_path):
    out, results = lm_eval_output
    reported = results["results"][TASK][PRIMARY]
    run_id, text = _import(tmp_path / "nel.duckdb", out, "--benchmark", "gsm8k")
    steps = _steps(tmp_path / "nel.duckdb", run_id)

    assert 0 < reported < 1, "the mock solves some and misses some: a real comparison"
    assert len(steps) == N_DOCS
    assert sum(bool(s[2]) for s in steps) / len(steps) == reported
    assert sum(s[3] for s in steps) / len(steps) == reported
    scores = orjson.loads(steps[0][4])
    assert set(scores) == {"exact_match,final-answer", "exact_match,flexible-extract"}, "every filter's metric"
    flexible = results["results"][TASK]["exact_match,flexible-extract"]
    assert sum(orjson.loads(s[4])["exact_match,flexible-extract"]["reward"] for s in steps) / N_DOCS == flexible
    assert f"lm-eval reported {reported:.6g}" in text and "paired     30 of 30 documents" in text


def test_reimporting_adds_nothing_and_the_model_directory_is_the_same_output(lm_eval_output, tmp_path):
    out, _ = lm_eval_output
    store = tmp_path / "nel.duckdb"
    first, _ = _import(store, out)
    before = open_store(store).rows("SELECT count(*) FROM steps")[0][0]
    again, text = _import(store, next(out.iterdir()))
    assert again == first and "already imported (nothing written)" in text
    assert open_store(store).rows("SELECT count(*) FROM steps")[0][0] == before == N_DOCS


def test_documents_pair_with_a_native_gsm8k_run_by_their_question(mock, lm_eval_output, tmp_path):  # noqa: F811
    """lm-eval asks "Question: ...\\nAnswer:", nel asks its own instruction and the question: the question pairs."""
    out, _ = lm_eval_output
    store = tmp_path / "nel.duckdb"
    # the fixture holds every 43rd GSM8K test problem from 0 to 1247: a native run of the first 1248 holds them all
    native_args = eval_args(mock.base_url, problems=1248, repeats=1, store=store, extra=("--problem-range", "0:1248"))
    assert_ok(nel(*native_args, cwd=tmp_path))
    native = open_store(store).rows("SELECT run_id FROM runs")[0][0]
    imported, _ = _import(store, out, "--benchmark", "gsm8k")  # its data is a local file: --benchmark names it
    assert {s[5] for s in _steps(store, imported)} <= {s[5] for s in _steps(store, native)}

    proc = nel("compare", native, imported, "--store", str(store), cwd=tmp_path)
    assert_ok(proc)
    assert "compare gsm8k, metric numeric" in proc.stdout
    assert f"paired     {N_DOCS} tasks; {1248 - N_DOCS} only in the baseline, 0 only in the candidate" in proc.stdout


def test_documents_nel_does_not_know_keep_ids_of_their_own_and_are_counted(lm_eval_output, tmp_path):
    out, _ = lm_eval_output
    _, text = _import(tmp_path / "nel.duckdb", out)
    assert "paired     0 of 30 documents" in text
    assert ("unpaired   30 documents, kept under lmeval-<hash> ids: 'nel_gsm8k_mini' is not a benchmark nel knows, "
            "so its prompt cannot be matched (name one with --benchmark)") in text
    ids = [s[5] for s in _steps(tmp_path / "nel.duckdb", text.split()[1].rstrip(":"))]
    assert all(i.startswith("lmeval-") for i in ids) and len(set(ids)) == N_DOCS


def test_a_damaged_line_is_skipped_and_named_and_the_rest_imports(lm_eval_output, tmp_path):
    out = _copy(lm_eval_output[0], tmp_path / "out")
    samples = _samples_file(out)
    lines = samples.read_bytes().splitlines(keepends=True)
    lines[4] = lines[4][: len(lines[4]) // 2] + b"\n"  # document 4 of the first filter, cut short
    samples.write_bytes(b"".join(lines))
    run_id, text = _import(tmp_path / "nel.duckdb", out, "--benchmark", "gsm8k")
    assert f"skipped    1 damaged lines:\n    {samples.name}:5: not JSON" in text
    assert [s[0] for s in _steps(tmp_path / "nel.duckdb", run_id)] == [i for i in range(N_DOCS) if i != 4]


def test_credentials_in_model_args_never_reach_the_store(lm_eval_output, tmp_path):
    out = _copy(lm_eval_output[0], tmp_path / "out")
    results = next(out.glob("*/results_*.json"))
    data = orjson.loads(results.read_bytes())
    data["config"]["model_args"] += ",api_key=sk-nel-test-SECRET"
    results.write_bytes(orjson.dumps(data))
    run_id, _ = _import(tmp_path / "nel.duckdb", out)
    config = open_store(tmp_path / "nel.duckdb").rows("SELECT config FROM runs WHERE run_id = ?", [run_id])[0][0]
    assert "sk-nel-test-SECRET" not in str(config) and "model=nel-mock" in str(config)


class TestBadInput:
    def test_a_directory_without_lm_eval_output_says_what_it_is_not(self, tmp_path):
        (tmp_path / "notes.txt").write_text("hello")
        line = assert_one_line_error(nel("import", "lm-eval", str(tmp_path), cwd=tmp_path), 2)
        assert f"{tmp_path}: not lm-evaluation-harness output (no results_*.json" in line

    def test_a_results_file_of_a_newer_version_names_it_and_what_is_supported(self, lm_eval_output, tmp_path):
        out = _copy(lm_eval_output[0], tmp_path / "out")
        results = next(out.glob("*/results_*.json"))
        results.write_bytes(orjson.dumps({**orjson.loads(results.read_bytes()), "lm_eval_version": "0.5.1"}))
        line = assert_one_line_error(nel("import", "lm-eval", str(out), cwd=tmp_path), 2)
        assert "written by lm-evaluation-harness 0.5.1; supported: 0.4.x" in line

    def test_output_without_samples_asks_for_log_samples(self, lm_eval_output, tmp_path):
        out = _copy(lm_eval_output[0], tmp_path / "out")
        _samples_file(out).unlink()
        line = assert_one_line_error(nel("import", "lm-eval", str(out), cwd=tmp_path), 2)
        assert f"for task(s) {TASK} next to it (run lm_eval with --log_samples)" in line

    def test_a_json_file_that_is_not_a_results_file_says_so(self, tmp_path):
        (tmp_path / "results_2026.json").write_text('{"a": 1}')
        line = assert_one_line_error(nel("import", "lm-eval", str(tmp_path), cwd=tmp_path), 2)
        assert "not an lm-evaluation-harness results file (no 'results' and 'configs' objects)" in line


def test_a_large_output_is_written_and_ingested_shard_by_shard_into_one_complete_run(lm_eval_output, tmp_path,
                                                                                     monkeypatch):
    """5,000 documents (lm-eval's own lines, each made a document of its own) in shards of 2,048 (8,192 outside
    tests: fewer, larger ingests are faster, at the same peak RSS): three shards, one run."""
    monkeypatch.setattr(lmeval, "_SHARD_DOCS", 2048)
    out = _copy(lm_eval_output[0], tmp_path / "out")
    samples = _samples_file(out)
    lines = [orjson.loads(line) for line in samples.read_bytes().splitlines()]
    with open(samples, "wb") as fh:
        for filt in ("final-answer", "flexible-extract"):
            own = [s for s in lines if s["filter"] == filt]
            for doc_id in range(5000):
                s = own[doc_id % N_DOCS]
                doc = {**s["doc"], "question": f"{s['doc']['question']} ({doc_id})"}
                fh.write(orjson.dumps({**s, "doc_id": doc_id, "doc": doc}) + b"\n")
    (result,) = import_lmeval(tmp_path / "nel.duckdb", out)
    store = open_store(tmp_path / "nel.duckdb")
    assert (result.n_tasks, result.n_steps) == (5000, 5000)
    assert store.rows("SELECT status, n_tasks, total_shards FROM runs WHERE run_id = ?", [result.run_id]) == [
        ("complete", 5000, 3)]
    assert store.rows("SELECT count(DISTINCT task_id) FROM run_tasks WHERE run_id = ?", [result.run_id]) == [(5000,)]


def _rewrite(samples: Path, change: Any) -> None:
    rows = [orjson.loads(line) for line in samples.read_bytes().splitlines()]
    samples.write_bytes(b"".join(orjson.dumps(change(r)) + b"\n" for r in rows))


def test_a_question_copied_with_other_spacing_and_case_still_pairs(lm_eval_output, tmp_path):
    out = _copy(lm_eval_output[0], tmp_path / "out")
    native_ids = {s[5] for s in _steps(tmp_path / "a.duckdb", _import(tmp_path / "a.duckdb", out, "--benchmark",
                                                                       "gsm8k")[0])}
    shutil.rmtree(out)
    out = _copy(lm_eval_output[0], tmp_path / "out")
    _rewrite(_samples_file(out), lambda r: {**r, "doc": {**r["doc"], "question": "  " + r["doc"]["question"].upper()
                                                          .replace(" ", "\n ")}})
    run_id, text = _import(tmp_path / "b.duckdb", out, "--benchmark", "gsm8k")
    assert "paired     30 of 30 documents" in text
    assert {s[5] for s in _steps(tmp_path / "b.duckdb", run_id)} == native_ids


def test_each_repeat_is_a_step_carrying_its_documents_scores(lm_eval_output, tmp_path):
    """lm-eval scores a document, not a repeat: the mean over steps stays lm-eval's accuracy."""
    out, results = lm_eval_output
    out = _copy(out, tmp_path / "out")
    _rewrite(_samples_file(out), lambda r: {**r, "resps": [[r["resps"][0][0], "a second answer", "a third"]]})
    run_id, text = _import(tmp_path / "nel.duckdb", out)
    steps = _steps(tmp_path / "nel.duckdb", run_id)
    assert "documents  30, 3 repeat(s) each, 90 steps written" in text
    assert [s[1] for s in steps[:3]] == [0, 1, 2] and len({s[2] for s in steps[:3]}) == 1
    assert sum(bool(s[2]) for s in steps) / len(steps) == results["results"][TASK][PRIMARY]


def test_sparse_document_ids_keep_each_documents_scores_under_every_filter(lm_eval_output, tmp_path):
    """The first pass keeps scores in arrays indexed by doc_id: ids far apart, and a score only one filter has,
    reach the right steps; an id out of range is named and skipped, not imported under another document."""
    out = _copy(lm_eval_output[0], tmp_path / "out")
    samples = _samples_file(out)
    _rewrite(samples, lambda r: {**r, "doc_id": r["doc_id"] * 3000 + 7,
                                 "exact_match": float(r["doc_id"] % 2 == 0) if r["filter"] == "final-answer"
                                 else float(r["doc_id"] % 3 == 0)})
    bad = {**orjson.loads(samples.read_bytes().splitlines()[0]), "doc_id": 1 << 22}
    samples.write_bytes(samples.read_bytes() + orjson.dumps(bad) + b"\n")
    (result,) = import_lmeval(tmp_path / "nel.duckdb", out)
    assert (result.n_tasks, result.n_skipped) == (N_DOCS, 1)
    assert result.skipped == (f"{samples.name}:{2 * N_DOCS + 1}: doc_id 4194304 out of range (0 to 4,194,303)",)
    steps = _steps(tmp_path / "nel.duckdb", result.run_id)
    assert [s[0] for s in steps] == [d * 3000 + 7 for d in range(N_DOCS)]
    for task_idx, _, passed, reward, scores, _ in steps:
        doc = (task_idx - 7) // 3000
        got = {k: v["reward"] for k, v in orjson.loads(scores).items()}
        assert got == {"exact_match,final-answer": float(doc % 2 == 0),
                       "exact_match,flexible-extract": float(doc % 3 == 0)}
        assert (reward, passed) == (float(doc % 2 == 0), doc % 2 == 0)


def test_a_file_instead_of_a_directory_says_it_is_a_file_and_a_results_file_imports(lm_eval_output, tmp_path):
    """It said "no such directory" of a file that exists."""
    (tmp_path / "hostname").write_text("box\n")
    line = assert_one_line_error(nel("import", "lm-eval", str(tmp_path / "hostname"), cwd=tmp_path), 2)
    assert "hostname: a file, not lm-evaluation-harness output (name the --output_path directory" in line
    results = next(lm_eval_output[0].glob("*/results_*.json"))
    _, text = _import(tmp_path / "nel.duckdb", results, "--benchmark", "gsm8k")
    assert f"documents  {N_DOCS}, 1 repeat(s) each, {N_DOCS} steps written" in text
