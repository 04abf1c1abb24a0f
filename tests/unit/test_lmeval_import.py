"""The lm-evaluation-harness import on small hand-written outputs (the layout ``--log_samples`` writes): lines
without ``doc_id`` or ``doc``, the generation kwargs as the run's identity, and the paths it is given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from workbench.errors import UsageError
from workbench.importers.lmeval import import_lmeval
from workbench.store import open_store

DATE = "2026-01-01T00-00-00.000000"
QUESTIONS = ("What is 2 + 2?", "What is 3 + 5?", "What is 10 - 4?", "What is 7 * 6?")
STRICT = (1.0, 0.0, 1.0, 1.0)  # exact_match,strict-match of each document: lm-eval reports their mean
FLEXIBLE = (1.0, 1.0, 0.0, 1.0)
GENERATION = {"until": ["Question:", "</s>"], "do_sample": False, "temperature": 0.0, "max_gen_toks": 512}


def _line(doc_id: int, filt: str, value: float) -> dict[str, Any]:
    question = QUESTIONS[doc_id]
    chat = orjson.dumps([{"role": "user", "content": f"Question: {question}\nAnswer:"}]).decode()
    return {"doc_id": doc_id, "doc": {"question": question, "answer": "4"}, "target": "4",
            "arguments": {"gen_args_0": {"arg_0": chat, "arg_1": GENERATION}}, "resps": [[f"The answer is {doc_id}"]],
            "filtered_resps": [str(doc_id)], "filter": filt, "metrics": ["exact_match"], "exact_match": value}


def write_output(out: Path, change: Any = None, generation: dict[str, Any] | None = None) -> Path:
    """OUT/<model>/results_<date>.json and samples_arith_<date>.jsonl; ``change(line)`` edits each line (``None``
    drops it). Returns the model directory."""
    model_dir = out / "nel-mock"
    model_dir.mkdir(parents=True)
    lines = [_line(d, "strict-match", STRICT[d]) for d in range(len(QUESTIONS))] + \
        [_line(d, "flexible-extract", FLEXIBLE[d]) for d in range(len(QUESTIONS))]
    lines = [change(line) if change else line for line in lines]
    (model_dir / f"samples_arith_{DATE}.jsonl").write_bytes(
        b"".join(orjson.dumps(line) + b"\n" for line in lines if line is not None))
    config = {"task": "arith", "output_type": "generate_until", "generation_kwargs": generation or GENERATION,
              "metric_list": [{"metric": "exact_match"}],
              "filter_list": [{"name": "strict-match"}, {"name": "flexible-extract"}]}
    results = {"results": {"arith": {"exact_match,strict-match": sum(STRICT) / len(STRICT),
                                     "exact_match,flexible-extract": sum(FLEXIBLE) / len(FLEXIBLE)}},
               "configs": {"arith": config}, "config": {"model": "local-chat-completions"}, "model_name": "nel-mock",
               "lm_eval_version": "0.4.13"}
    (model_dir / f"results_{DATE}.json").write_bytes(orjson.dumps(results))
    return model_dir


def _steps(store: Path, run_id: str) -> list[dict[str, Any]]:
    return open_store(store).dicts("SELECT * FROM steps WHERE run_id = ? ORDER BY task_idx, repeat", [run_id])


def _without(*keys: str, doc_id: int) -> Any:
    def change(line: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in line.items() if k not in keys} if line["doc_id"] == doc_id else line
    return change


class TestLinesWithoutAnIdOrADocument:
    """The issue: samples without an id or input are imported unpaired with a count, never silently dropped."""

    def test_a_document_without_doc_id_is_imported_unpaired_after_the_others_and_the_pass_rate_is_lm_evals(
            self, tmp_path):
        write_output(tmp_path / "out", _without("doc_id", doc_id=1))
        [result] = import_lmeval(tmp_path / "s.duckdb", tmp_path / "out", benchmark="arith")
        steps = _steps(tmp_path / "s.duckdb", result.run_id)
        assert (result.n_tasks, result.n_steps, result.n_skipped) == (4, 4, 0)
        assert result.n_unpaired_tasks == 4 and dict(result.unpaired_reasons)[
            "no doc_id: numbered after lm-eval's own documents"] == 1
        assert [s["task_idx"] for s in steps] == [0, 2, 3, 4]
        assert sum(s["reward"] for s in steps) / len(steps) == result.reported == sum(STRICT) / len(STRICT)
        moved = steps[-1]
        assert orjson.loads(moved["scores"])["exact_match,flexible-extract"]["reward"] == FLEXIBLE[1], \
            "its lines under every filter are one document, joined by its content"
        assert moved["task_id"].startswith("lmeval-") and moved["prompt"].endswith(QUESTIONS[1] + "\nAnswer:")

    def test_a_line_without_its_document_is_imported_unpaired_from_its_prompt(self, tmp_path):
        write_output(tmp_path / "out", _without("doc", doc_id=2))
        [result] = import_lmeval(tmp_path / "s.duckdb", tmp_path / "out")
        steps = _steps(tmp_path / "s.duckdb", result.run_id)
        assert (result.n_tasks, result.n_skipped) == (4, 0)
        assert sum(s["reward"] for s in steps) / len(steps) == result.reported
        [no_doc] = [s for s in steps if s["task_idx"] == 2]
        assert no_doc["task_id"].startswith("lmeval-") and QUESTIONS[2] in no_doc["prompt"]
        assert "no doc: its id is a hash of its prompt and target" in dict(result.unpaired_reasons)

    def test_the_same_output_imports_to_the_same_run_and_ids(self, tmp_path):
        write_output(tmp_path / "out", _without("doc_id", doc_id=1))
        [a] = import_lmeval(tmp_path / "a.duckdb", tmp_path / "out")
        [b] = import_lmeval(tmp_path / "b.duckdb", tmp_path / "out")
        [again] = import_lmeval(tmp_path / "a.duckdb", tmp_path / "out")
        assert a.run_id == b.run_id == again.run_id and again.already_imported
        assert [s["task_id"] for s in _steps(tmp_path / "a.duckdb", a.run_id)] == \
            [s["task_id"] for s in _steps(tmp_path / "b.duckdb", b.run_id)]

    def test_a_line_that_is_not_a_sample_stays_skipped_and_named(self, tmp_path):
        write_output(tmp_path / "out", lambda line: {**line, "resps": None} if line["doc_id"] == 3 else line)
        [result] = import_lmeval(tmp_path / "s.duckdb", tmp_path / "out")
        assert result.n_tasks == 3 and result.n_skipped == 2
        assert result.skipped[0] == \
            f"samples_arith_{DATE}.jsonl:4: no resps: not a sample lm-eval's --log_samples writes"


def test_the_generation_kwargs_are_the_runs_identity_in_nels_names_and_the_exporters_read_them(tmp_path):
    from workbench.export.artifacts import build_eval_bundle
    from workbench.export.run_facts import run_params
    from workbench.store.reader import Store

    write_output(tmp_path / "out")
    [result] = import_lmeval(tmp_path / "s.duckdb", tmp_path / "out")
    [row] = open_store(tmp_path / "s.duckdb").dicts("SELECT identity FROM runs")
    identity = orjson.loads(row["identity"]) if isinstance(row["identity"], str) else row["identity"]
    assert {k: identity.get(k) for k in ("temperature", "max_tokens", "stop")} == \
        {"temperature": 0.0, "max_tokens": 512, "stop": ["Question:", "</s>"]}
    assert identity["generate_other"] == {"do_sample": False}
    params = run_params(build_eval_bundle(Store(tmp_path / "s.duckdb"), result.run_id))
    assert (params["temperature"], params["max_tokens"]) == ("0.0", "512")
    assert import_lmeval(tmp_path / "s.duckdb", tmp_path / "out")[0].already_imported

    write_output(tmp_path / "hot", generation={**GENERATION, "temperature": 0.7})
    [hot] = import_lmeval(tmp_path / "s.duckdb", tmp_path / "hot")
    assert hot.run_id != result.run_id, "the same samples at another temperature are another run"


class TestPaths:
    def test_a_file_that_is_not_a_results_file_says_it_is_a_file_and_what_is_expected(self, tmp_path):
        (tmp_path / "hostname").write_text("box\n")
        with pytest.raises(UsageError, match=r"hostname: a file, not lm-evaluation-harness output \(name the "
                                             r"--output_path directory lm_eval wrote to, or a results_\*.json in it\)"):
            import_lmeval(tmp_path / "s.duckdb", tmp_path / "hostname")

    def test_a_results_file_named_directly_imports_its_tasks(self, tmp_path):
        model_dir = write_output(tmp_path / "out")
        [direct] = import_lmeval(tmp_path / "a.duckdb", model_dir / f"results_{DATE}.json")
        [whole] = import_lmeval(tmp_path / "b.duckdb", tmp_path / "out")
        assert direct.run_id == whole.run_id and direct.n_steps == 4

    def test_a_samples_file_named_directly_points_at_its_results_file(self, tmp_path):
        model_dir = write_output(tmp_path / "out")
        with pytest.raises(UsageError, match=r"a samples file: name the results_\*.json next to it"):
            import_lmeval(tmp_path / "s.duckdb", model_dir / f"samples_arith_{DATE}.jsonl")
