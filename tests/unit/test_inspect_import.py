"""The inspect_ai log mapping, on small hand-written logs: scores, transcripts, failures, unpaired and damaged
samples, bad input."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import orjson
import pytest

from workbench.errors import UsageError
from workbench.importers.inspect_log import import_inspect
from workbench.importers.inspect_sample import score_value
from workbench.store import open_store

SPEC = {"eval_id": "e1", "run_id": "r1", "created": "2026-01-01T00:00:00+00:00", "task": "arith",
        "dataset": {"name": "arith", "samples": 4}, "model": "openai/gpt-x",
        "model_base_url": "https://user:pw@example.com/v1?key=SECRET", "model_args": {"api_key": "sk-SECRET"},
        "config": {"epochs": 2}, "packages": {"inspect_ai": "0.3.285"}}


def _sample(sid: Any, epoch: int, scores: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"id": sid, "epoch": epoch, "input": f"What is {sid}?", "target": str(sid),
            "messages": [{"role": "user", "content": f"What is {sid}?"},
                         {"role": "assistant", "content": f"It is {sid}."}],
            "output": {"choices": [{"stop_reason": "stop"}]}, "scores": scores,
            "model_usage": {"m": {"input_tokens": 5, "output_tokens": 3, "total_tokens": 8}},
            "total_time": 1.5, "working_time": 1.25, **extra}


def write_eval(path: Path, samples: list[Any], *, version: int = 2, status: str = "success",
               damaged: str | None = None, spec: dict[str, Any] | None = None,
               plan: dict[str, Any] | None = None) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for n, sample in enumerate(samples):
            zf.writestr(f"samples/{n}.json", orjson.dumps(sample))
        if damaged:
            zf.writestr(f"samples/{damaged}.json", b"{not json")
        zf.writestr("header.json", orjson.dumps({"version": version, "status": status, "eval": spec or SPEC,
                                                 "plan": plan or {"steps": []}, "results": None}))
    return path


def _steps(store: Path) -> dict[tuple[int, int], dict[str, Any]]:
    rows = open_store(store).dicts("SELECT * FROM steps")
    return {(r["task_idx"], r["repeat"]): r for r in rows}


def test_letters_numbers_and_booleans_read_as_inspects_value_to_float():
    assert [score_value(v) for v in ("C", "P", "I", "N", "yes", "false", "0.25", 3, True, [1], "x")] == \
        [1.0, 0.5, 0.0, 0.0, 1.0, 0.0, 0.25, 3.0, 1.0, None, None]


def test_every_score_is_kept_the_first_is_primary_and_dict_scores_flatten(tmp_path):
    log = write_eval(tmp_path / "a.eval", [
        _sample(1, 1, {"match": {"value": "C", "answer": "1", "explanation": "ok"},
                       "rubric": {"value": {"style": 0.5, "facts": 1}}}),
        _sample(1, 2, {"match": {"value": "I", "answer": "2"}, "rubric": {"value": {"style": 0, "facts": 0}}})])
    [result] = import_inspect(tmp_path / "s.duckdb", log, use_reader=False)
    steps = _steps(tmp_path / "s.duckdb")
    first = steps[(0, 0)]
    assert result.metric == "match" and (first["reward"], first["passed"]) == (1.0, True)
    assert first["extracted_answer"] == "1" and orjson.loads(first["scoring_details"])["explanation"] == "ok"
    assert set(orjson.loads(first["scores"])) == {"match", "rubric/style", "rubric/facts"}
    assert orjson.loads(first["scores"])["rubric/style"]["reward"] == 0.5
    assert (steps[(0, 1)]["reward"], steps[(0, 1)]["passed"]) == (0.0, False)
    assert (first["prompt_tokens"], first["completion_tokens"], first["latency_ms"], first["model_ms"]) == \
        (5, 3, 1500.0, 1250.0)
    assert first["response"] == "It is 1." and orjson.loads(first["messages"]) == \
        [{"role": "user", "content": "What is 1?"}]


def test_errors_and_limits_become_failure_categories(tmp_path):
    log = write_eval(tmp_path / "a.eval", [
        _sample(1, 1, {}, error={"message": "Request timed out", "traceback": ""}),
        _sample(2, 1, {"m": {"value": "I"}}, limit={"type": "token", "limit": 100}),
        _sample(3, 1, {"m": {"value": "I"}}, limit={"type": "context", "limit": 8}),
    ])
    import_inspect(tmp_path / "s.duckdb", log, use_reader=False)
    steps = _steps(tmp_path / "s.duckdb")
    assert [(steps[(i, 0)]["failure_category"], steps[(i, 0)]["error"]) for i in range(3)] == [
        ("timeout", "Request timed out"), ("max_turns_exhausted", "token limit of 100 reached"),
        ("context_window", "context limit of 8 reached")]


def test_tool_calls_go_to_the_transcript_and_turns(tmp_path):
    messages = [{"role": "user", "content": "add 2 and 2"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "c1", "function": "add", "arguments": {"a": 2, "b": 2}}]},
                {"role": "tool", "content": "4", "tool_call_id": "c1", "function": "add"},
                {"role": "assistant", "content": "4"}]
    events = [{"event": "tool", "id": "c1", "function": "add", "result": "4", "working_time": 0.01}]
    log = write_eval(tmp_path / "a.eval", [_sample(1, 1, {"m": {"value": "C"}}, messages=messages, events=events)])
    import_inspect(tmp_path / "s.duckdb", log, use_reader=False)
    step = _steps(tmp_path / "s.duckdb")[(0, 0)]
    sent = orjson.loads(step["messages"])
    assert sent[1]["tool_calls"][0]["function"] == {"name": "add", "arguments": '{"a":2,"b":2}'}
    assert sent[2] == {"role": "tool", "content": "4", "tool_call_id": "c1"} and step["response"] == "4"
    [turn, last] = orjson.loads(step["turns"])
    assert turn["tool_calls"][0]["name"] == "add" and turn["tool_calls"][0]["output"] == "4"
    assert turn["tool_calls"][0]["latency_ms"] == 10.0 and last["tool_calls"] == []


def test_samples_without_id_or_input_and_damaged_entries_are_counted_never_dropped(tmp_path):
    no_id = {k: v for k, v in _sample(7, 1, {"m": {"value": "C"}}).items() if k != "id"}
    no_input = {**_sample(8, 1, {"m": {"value": "C"}}), "input": ""}
    log = write_eval(tmp_path / "a.eval", [_sample(1, 1, {"m": {"value": "C"}}), no_id, no_input], damaged="bad")
    [result] = import_inspect(tmp_path / "s.duckdb", log, use_reader=False)
    assert result.n_tasks == 3 and result.n_steps == 3 and result.n_unpaired_tasks == 3
    assert dict(result.unpaired_reasons)["the sample has no input"] == 1
    assert result.n_skipped == 1 and result.skipped[0].startswith("a.eval:samples/bad.json: damaged entry")
    ids = {r["task_id"] for r in _steps(tmp_path / "s.duckdb").values()}
    assert all(i.startswith("inspect-") for i in ids) and len(ids) == 3


def test_secrets_in_the_eval_spec_never_reach_the_store(tmp_path):
    log = write_eval(tmp_path / "a.eval", [_sample(1, 1, {"m": {"value": "C"}})])
    import_inspect(tmp_path / "s.duckdb", log, use_reader=False)
    [row] = open_store(tmp_path / "s.duckdb").dicts("SELECT config::VARCHAR AS c, model_url FROM runs")
    assert "SECRET" not in row["c"] and "pw" not in row["c"] and row["model_url"] == "https://example.com/v1"


def test_a_log_that_did_not_finish_imports_its_samples_and_the_run_says_so(tmp_path):
    log = write_eval(tmp_path / "a.eval", [_sample(1, 1, {"m": {"value": "C"}})], status="cancelled")
    [result] = import_inspect(tmp_path / "s.duckdb", log, use_reader=False)
    [run] = open_store(tmp_path / "s.duckdb").dicts("SELECT status, config->>'status' AS s FROM runs")
    assert result.n_steps == 1 and run == {"status": "incomplete", "s": "cancelled"}
    assert import_inspect(tmp_path / "s.duckdb", log, use_reader=False)[0].already_imported


def test_a_newer_format_version_names_it_and_what_is_supported(tmp_path):
    log = write_eval(tmp_path / "a.eval", [], version=3)
    with pytest.raises(UsageError, match=r"a.eval: inspect_ai log format version 3; supported: versions 1 to 2"):
        import_inspect(tmp_path / "s.duckdb", log)


@pytest.mark.parametrize(("name", "content", "says"), [
    ("x.eval", b"hello", "not an inspect_ai .eval log (not a zip archive)"),
    ("x.json", b"[1, 2]", "not an inspect_ai log (no 'version' and 'eval' in its header)"),
    ("x.json", b"{oops", "not an inspect_ai log (neither a zip archive nor JSON)"),
])
def test_a_file_that_is_not_an_inspect_log_says_what_it_is_not(tmp_path, name, content, says):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(UsageError, match=re_escape(says)):
        import_inspect(tmp_path / "s.duckdb", tmp_path / name)


def re_escape(text: str) -> str:
    import re

    return re.escape(text)


def test_samples_pair_with_nels_gsm8k_by_the_question_inside_their_template_once_each(tmp_path):
    from workbench.environments import get_environment
    from workbench.environments.dataset import DatasetEnvironment

    env = get_environment("gsm8k")
    assert isinstance(env, DatasetEnvironment)
    question = env.rows[3]["question"]
    wrapped = f"Solve this step by step.\n\n{question.upper()}\n\nANSWER: $ANSWER"
    log = write_eval(tmp_path / "a.eval", [
        {**_sample(1, 1, {"m": {"value": "C"}}), "input": [{"role": "system", "content": "be brief"},
                                                         {"role": "user", "content": wrapped}]},
        {**_sample(2, 1, {"m": {"value": "C"}}), "input": "  ".join(question.split())},
        _sample(3, 1, {"m": {"value": "C"}})])
    [result] = import_inspect(tmp_path / "s.duckdb", log, benchmark="gsm8k", use_reader=False)
    ids = [r["task_id"] for r in open_store(tmp_path / "s.duckdb").dicts("SELECT task_id FROM steps ORDER BY task_idx")]
    assert ids[0] == env.seed(3).task_id and result.metric == "numeric"
    assert ids[1].startswith("inspect-") and ids[2].startswith("inspect-")
    reasons = dict(result.unpaired_reasons)
    assert reasons == {"its question is also that of sample 1 (nel's task is that sample's)": 1,
                       "the prompt is none of gsm8k's problems": 1}


def test_tasks_are_numbered_in_inspects_sample_order_whatever_order_the_archive_holds(tmp_path):
    """inspect writes samples as they finish; its reader sorts them (epoch, id). Numbering by first appearance
    gave the two readers different task_idx for the same sample (CI caught it on a real log)."""
    finished = [(10, 1), (2, 2), (2, 1), (10, 2), (3, 1), (3, 2)]
    log = write_eval(tmp_path / "a.eval", [_sample(sid, ep, {"m": {"value": "C"}}) for sid, ep in finished])
    import_inspect(tmp_path / "s.duckdb", log, use_reader=False)
    steps = _steps(tmp_path / "s.duckdb")
    by_idx = {idx: steps[(idx, 0)]["expected_answer"] for idx in range(3)}
    assert by_idx == {0: "2", 1: "3", 2: "10"}
    assert {r["expected_answer"] for (idx, rep), r in steps.items() if idx == 2} == {"10"}


def test_a_question_two_samples_share_goes_to_the_first_in_id_order_not_the_first_read(tmp_path):
    from workbench.environments import get_environment
    from workbench.environments.dataset import DatasetEnvironment

    env = get_environment("gsm8k")
    assert isinstance(env, DatasetEnvironment)
    question = env.rows[5]["question"]
    log = write_eval(tmp_path / "a.eval", [{**_sample(sid, 1, {"m": {"value": "C"}}), "input": question}
                                           for sid in ("b", "a")])
    [result] = import_inspect(tmp_path / "s.duckdb", log, benchmark="gsm8k", use_reader=False)
    rows = open_store(tmp_path / "s.duckdb").dicts("SELECT task_idx, task_id FROM steps ORDER BY task_idx")
    assert rows[0]["task_id"] == env.seed(5).task_id and rows[1]["task_id"].startswith("inspect-")
    assert dict(result.unpaired_reasons) == {"its question is also that of sample 'a' (nel's task is that sample's)": 1}


class TestEvalSetDirectories:
    """``inspect eval-set`` writes ``eval-set.json`` (and ``logs.json``) beside its logs."""

    def test_files_that_are_not_inspect_logs_are_skipped_and_named(self, tmp_path):
        write_eval(tmp_path / "a.eval", [_sample(1, 1, {"m": {"value": "C"}})])
        (tmp_path / "eval-set.json").write_bytes(orjson.dumps({"eval_set_id": "x", "tasks": [{"name": "arith"}]}))
        (tmp_path / "logs.json").write_bytes(orjson.dumps({"a.eval": {"version": 2}}))
        (tmp_path / "sub").mkdir()
        (tmp_path / "sub" / "notes.json").write_bytes(b"[1, 2]")
        [result] = import_inspect(tmp_path / "s.duckdb", tmp_path, use_reader=False)
        assert result.n_steps == 1
        assert [line.split(":")[0] for line in result.not_logs] == ["eval-set.json", "logs.json", "sub/notes.json"]
        assert "not an inspect_ai log" in result.not_logs[0]

    def test_a_directory_with_no_log_at_all_is_one_error_naming_what_it_holds(self, tmp_path):
        (tmp_path / "eval-set.json").write_bytes(orjson.dumps({"eval_set_id": "x"}))
        says = r"no inspect_ai logs here \(1 .eval/.json file that is not one: eval-set.json\)"
        with pytest.raises(UsageError, match=says):
            import_inspect(tmp_path / "s.duckdb", tmp_path)

    def test_a_newer_log_in_a_directory_is_still_refused_not_skipped(self, tmp_path):
        write_eval(tmp_path / "a.eval", [_sample(1, 1, {"m": {"value": "C"}})], version=3)
        with pytest.raises(UsageError, match="format version 3"):
            import_inspect(tmp_path / "s.duckdb", tmp_path)


def write_json_log(path: Path, samples: list[Any]) -> Path:
    path.write_bytes(orjson.dumps({"version": 2, "status": "success", "eval": SPEC, "plan": {"steps": []},
                                   "results": None, "samples": samples}))
    return path


def test_a_json_log_with_a_sample_without_id_imports_alike_through_either_reader(tmp_path):
    """inspect_ai's reader refuses a sample without an id (its EvalSample requires one): the file format reads it,
    as it does on the zip path, and the sample is imported unpaired, never dropped."""
    no_id = {k: v for k, v in _sample(7, 1, {"m": {"value": "C"}}).items() if k != "id"}
    no_id_no_input = {**no_id, "input": ""}
    log = write_json_log(tmp_path / "a.json", [_sample(1, 1, {"m": {"value": "I"}}), no_id, no_id_no_input])
    [a] = import_inspect(tmp_path / "a.duckdb", log, use_reader=True)
    [b] = import_inspect(tmp_path / "b.duckdb", log, use_reader=False)
    assert (a.n_tasks, a.n_steps, a.n_unpaired_tasks, a.n_skipped) == (3, 3, 3, 0) and a.run_id == b.run_id
    assert dict(a.unpaired_reasons)["the sample has neither id nor input"] == 1

    def rows(store: Path) -> list[dict[str, Any]]:
        return open_store(store).dicts("SELECT * EXCLUDE (started_at) FROM steps ORDER BY task_idx, repeat")
    assert rows(tmp_path / "a.duckdb") == rows(tmp_path / "b.duckdb")


def _journalled_eval(path: Path, samples: list[Any]) -> tuple[Path, list[int]]:
    """An .eval written as inspect writes one: ``_journal/start.json`` first, the samples as they finish, the
    header last; returns it and where each sample entry ends."""
    ends = []
    start = {"version": 2, "eval": SPEC, "plan": {"steps": []}}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("_journal/start.json", orjson.dumps(start))
        for n, sample in enumerate(samples):
            zf.writestr(f"samples/{n}_epoch_1.json", orjson.dumps(sample))
            zf.fp.flush()  # type: ignore[union-attr]
            ends.append(zf.fp.tell())  # type: ignore[union-attr]
        zf.writestr("header.json", orjson.dumps({**start, "status": "success", "results": None}))
    return path, ends


@pytest.mark.parametrize("use_reader", [True, False])
def test_a_truncated_eval_log_imports_its_complete_samples_and_names_what_was_lost(tmp_path, use_reader):
    log, ends = _journalled_eval(tmp_path / "a.eval", [_sample(i, 1, {"m": {"value": "C"}}) for i in range(4)])
    data = log.read_bytes()
    log.write_bytes(data[: ends[2] - 20])  # the third sample's entry cut short, the fourth and the header lost
    [result] = import_inspect(tmp_path / "s.duckdb", log, use_reader=use_reader)
    assert (result.n_tasks, result.n_steps) == (2, 2)
    assert result.n_skipped == 1 and result.skipped[0].startswith("a.eval:samples/2_epoch_1.json: cut short")
    [run] = open_store(tmp_path / "s.duckdb").dicts("SELECT status, config->>'damage' AS damage FROM runs")
    assert run["status"] == "incomplete" and "truncated" in run["damage"]


def test_a_truncated_eval_log_without_a_header_says_it_is_truncated_not_that_it_is_not_a_zip(tmp_path):
    log, _ = _journalled_eval(tmp_path / "a.eval", [_sample(1, 1, {"m": {"value": "C"}})])
    log.write_bytes(log.read_bytes()[:20])
    with pytest.raises(UsageError, match=r"a.eval: a truncated or damaged inspect_ai .eval log \("):
        import_inspect(tmp_path / "s.duckdb", log)


def test_the_generate_config_is_the_runs_identity_in_nels_names_and_the_exporters_read_it(tmp_path):
    from workbench.export.artifacts import build_eval_bundle
    from workbench.export.run_facts import run_params
    from workbench.store.reader import Store

    log = write_eval(tmp_path / "a.eval", [_sample(1, 1, {"m": {"value": "C"}})],
                     spec={**SPEC, "model_generate_config": {"temperature": 0.5, "max_connections": 8}},
                     plan={"steps": [], "config": {"max_tokens": 300, "seed": 7, "stop_seqs": ["###"], "top_k": 40,
                                                   "max_retries": 3}})
    [result] = import_inspect(tmp_path / "s.duckdb", log, use_reader=False)
    [run] = open_store(tmp_path / "s.duckdb").dicts("SELECT identity FROM runs")
    identity = orjson.loads(run["identity"]) if isinstance(run["identity"], str) else run["identity"]
    assert {k: identity.get(k) for k in ("temperature", "max_tokens", "seed", "stop")} == \
        {"temperature": 0.5, "max_tokens": 300, "seed": 7, "stop": ["###"]}
    assert identity["generate_other"] == {"top_k": 40}, "operational settings (connections, retries) are not identity"
    params = run_params(build_eval_bundle(Store(tmp_path / "s.duckdb"), result.run_id))
    assert (params["temperature"], params["max_tokens"], params["seed"]) == ("0.5", "300", "7")
    assert import_inspect(tmp_path / "s.duckdb", log, use_reader=False)[0].already_imported


def test_a_large_eval_log_is_read_from_the_file_format_unless_the_reader_is_asked_for(tmp_path, monkeypatch):
    """inspect_ai's reader peaks over 300 MB at 100,000 samples: above READER_MAX_ENTRIES entries the default is the
    file format (bounded memory); an explicit choice, or $NEL_INSPECT_READER, still wins."""
    pytest.importorskip("inspect_ai")
    from workbench.importers import inspect_files

    log = write_eval(tmp_path / "a.eval", [_sample(i, 1, {"m": {"value": "C"}}) for i in range(4)])
    monkeypatch.delenv(inspect_files.USE_READER_ENV, raising=False)
    assert inspect_files.LogFile(log).use_reader  # 5 entries: inspect's own reader
    monkeypatch.setattr(inspect_files, "READER_MAX_ENTRIES", 4)
    assert not inspect_files.LogFile(log).use_reader
    assert inspect_files.LogFile(log, use_reader=True).use_reader
    monkeypatch.setenv(inspect_files.USE_READER_ENV, "1")
    assert inspect_files.LogFile(log).use_reader


def test_an_eval_log_written_epoch_by_epoch_is_stored_task_by_task_one_shard_at_a_time(tmp_path, monkeypatch):
    """inspect writes a log epoch by epoch; read in that order every shard stayed open to the end (and each ingest
    copied them all: 306 MB for 100,000 samples). The file format reads it task by task: each ingest adds one
    whole shard, and the rows are those inspect's reader stores."""
    from workbench.importers import inspect_log

    samples = [_sample(sid, ep, {"m": {"value": "C" if (sid + ep) % 2 else "I"}}) for ep in (1, 2) for sid in range(5)]
    log = write_eval(tmp_path / "a.eval", samples)
    monkeypatch.setattr(inspect_log, "_SHARD_TASKS", 2)
    seen: list[set[tuple[int, int]]] = []
    real_ingest = inspect_log.ingest

    def ingest(store: Path, **kwargs: Any) -> Any:
        report = real_ingest(store, **kwargs)
        seen.append(set(_steps(store)))
        return report

    monkeypatch.setattr(inspect_log, "ingest", ingest)
    (result,) = import_inspect(tmp_path / "s.duckdb", log, use_reader=False)
    assert result.n_steps == 10
    assert seen == [{(i, r) for i in range(n) for r in (0, 1)} for n in (2, 4, 5)]
    pytest.importorskip("inspect_ai")
    monkeypatch.setattr(inspect_log, "ingest", real_ingest)
    import_inspect(tmp_path / "r.duckdb", log, use_reader=True)
    keep = ("task_id", "reward", "passed", "response", "expected_answer")
    assert {k: {c: v[c] for c in keep} for k, v in _steps(tmp_path / "s.duckdb").items()} == \
        {k: {c: v[c] for c in keep} for k, v in _steps(tmp_path / "r.duckdb").items()}
