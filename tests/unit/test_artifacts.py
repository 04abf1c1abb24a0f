"""Seed-compatible artifacts: what each exported file holds, checked on a small hand-built store."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest
from factories import open_shard, run_header, step_row, task_rows

from workbench import open_store
from workbench.errors import NelError, UsageError
from workbench.export import artifacts
from workbench.export.artifacts import (
    EXEMPLAR_CHARS,
    build_eval_bundle,
    bundle_file_name,
    export_run,
    redact,
)
from workbench.export.report import FORMATS, render_report
from workbench.store import ingest
from workbench.store.background import BackgroundIngest
from workbench.store.layout import segments_root
from workbench.store.queries.exported import read_bundle
from workbench.store.reader import Store

RUN = "r1"
T0 = 1_700_000_000.0

# Per task: (category in tasks.metadata, [(passed, failure_category, response), ...] one per repeat).
OUTCOMES = [
    ("algebra", [(True, None, "x = 4"), (True, None, "x = 4"), (True, None, "x = 4")]),
    ("algebra", [(True, None, "7"), (False, None, "8"), (False, "format_error", "no idea")]),
    ("geometry", [(False, "server_error", None), (False, "server_error", None), (False, None, "y" * 1000)]),
    (None, [(True, None, "ok"), (False, None, "no"), (True, None, "ok")]),  # category only in scoring_details
]


def _step(idx: int, rep: int, passed: bool, category: str | None, response: str | None, meta: dict) -> dict:
    error = category == "server_error"
    details = {"method": "exact", "expected": str(idx)}
    if meta.get("category") is None:
        details["category"] = "misc"
    return step_row(
        RUN, idx, rep, started_at=T0 + (3 * idx + rep) * 0.1,
        prompt=f"question {idx}", messages=orjson.dumps([{"role": "user", "content": f"question {idx}"}]).decode(),
        response=response, finish_reason=None if error else ("length" if category else "stop"),
        reward=1.0 if passed else 0.0, passed=passed, expected_answer=str(idx),
        extracted_answer=None if error or category else (response or "")[:10], scoring_method="exact",
        scoring_details=orjson.dumps(details).decode(), failure_category=category,
        error="HTTP 500: boom" if error else None, http_status=500 if error else 200, n_retries=2 if error else 0,
        prompt_tokens=None if error else 10, completion_tokens=None if error else 20,
        total_tokens=None if error else 30, latency_ms=50.0, seed_ms=1.0, model_ms=0.0 if error else 100.0,
        verify_ms=1.0, request_hash=f"{idx:02d}{rep:02d}" + "a" * 60, request_seed=100 + rep,
        metadata=orjson.dumps(meta).decode(),
        scores=orjson.dumps({"exact": {"reward": float(passed), "passed": passed, "extracted_answer": None,
                                       "method": "exact", "details": {}},
                             "f1": {"reward": 0.5, "passed": False, "extracted_answer": None, "method": "f1",
                                    "details": {}}}).decode(),
    )


def _write_store(store: Path, outcomes=OUTCOMES, *, finish: bool = True) -> Path:
    n_tasks, repeats = len(outcomes), len(outcomes[0][1])
    header = run_header(
        RUN, n_tasks=n_tasks, n_repeats=repeats, model_url="http://user:pw@host/v1?api_key=k123",
        identity={"benchmark": "b", "temperature": 0.7},
        config={"primary_metric": "exact", "metrics": ["exact", "f1"], "api_key": "sk-leaked"}, created_at=T0 - 1)
    metas = [{"idx": i, **({"category": c} if c else {})} for i, (c, _) in enumerate(outcomes)]
    tasks = task_rows(RUN, n_tasks, prompt=lambda i: f"question {i}", expected_answer=str,
                      metadata=lambda i: orjson.dumps(metas[i]).decode())
    w = open_shard(store, header, tasks=tasks)
    for idx, (_, attempts) in enumerate(outcomes):
        for rep, (passed, category, response) in enumerate(attempts):
            w.append(_step(idx, rep, passed, category, response, metas[idx]))
    w.finish("complete")
    if finish:
        ingest(store)
    return store


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("artifacts")
    store = _write_store(root / "nel.duckdb")
    result = export_run(store, RUN, root / "out")
    return store, result


def _lines(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


class TestResultsJsonl:
    """results.jsonl: NeMo Evaluator's documented per-problem records, plus ours."""

    def test_one_line_per_step_ordered_by_problem_then_repeat(self, exported):
        _, result = exported
        lines = _lines(result.out_dir / "results.jsonl")
        assert [(r["problem_idx"], r["repeat"]) for r in lines] == [(i, r) for i in range(4) for r in range(3)]
        assert result.n_results == result.n_trajectories == 12

    def test_carries_the_required_fields_and_the_task_identity(self, exported):
        first = _lines(exported[1].out_dir / "results.jsonl")[0]
        assert first["problem_idx"] == 0 and isinstance(first["reward"], float) and first["task_id"] == "t0"
        assert first["model_response"] == "x = 4" and first["expected_answer"] == "0"
        assert first["passed"] is True and first["failure_category"] is None

    def test_metadata_category_is_an_object_field_for_per_category_breakdowns(self, exported):
        lines = _lines(exported[1].out_dir / "results.jsonl")
        assert lines[0]["metadata"] == {"idx": 0, "category": "algebra"}
        assert lines[9]["scoring_details"]["category"] == "misc"  # NeMo's fallback when metadata has none

    def test_unknown_optional_fields_are_left_out_not_null(self, exported):
        error_line = _lines(exported[1].out_dir / "results.jsonl")[6]
        assert error_line["failure_category"] == "server_error"
        assert "model_response" not in error_line and "extracted_answer" not in error_line

    def test_per_metric_scores_come_along_when_present(self, exported):
        line = _lines(exported[1].out_dir / "results.jsonl")[0]
        assert set(line["scores"]) == {"exact", "f1"} and line["scores"]["f1"]["reward"] == 0.5


class TestTrajectoriesJsonl:
    """trajectories.jsonl: the whole step, with a fixed set of keys."""

    def test_every_line_has_the_same_keys(self, exported):
        lines = _lines(exported[1].out_dir / "trajectories.jsonl")
        assert len({tuple(line) for line in lines}) == 1

    def test_carries_tokens_latency_hash_and_an_iso_utc_start(self, exported):
        t = _lines(exported[1].out_dir / "trajectories.jsonl")[1]
        assert t["tokens"] == {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30,
                               "reasoning_tokens": None}
        assert t["latency"] == {"seed_ms": 1.0, "model_ms": 100.0, "verify_ms": 1.0, "latency_ms": 50.0}
        assert len(t["request_hash"]) == 64 and t["request_seed"] == 101
        assert t["started_at"] == "2023-11-14T22:13:20.100000Z"
        assert t["messages"] == [{"role": "user", "content": "question 0"}]
        assert t["scoring_method"] == "exact" and t["scoring_details"]["method"] == "exact"

    def test_transport_failures_keep_their_error_and_status(self, exported):
        t = _lines(exported[1].out_dir / "trajectories.jsonl")[6]
        assert (t["failure_category"], t["error"], t["http_status"], t["n_retries"]) == (
            "server_error", "HTTP 500: boom", 500, 2)


class TestBundle:
    """eval-{run_id}.json: config, pass@k with intervals, per-metric and per-category scores."""

    def test_is_written_last_under_the_run_id_and_reads_back_equal(self, exported):
        store, result = exported
        assert result.bundle.name == "eval-r1.json" and result.paths[-1] == result.bundle
        assert read_bundle(result.bundle) == build_eval_bundle(open_store(store), RUN)

    def test_pass_at_k_matches_the_hand_computed_estimates(self, exported):
        bundle = read_bundle(exported[1].bundle)
        assert sorted(bundle["pass_at_k"]) == ["1", "2", "3"]
        assert bundle["pass_at_k"]["1"]["value"] == pytest.approx((1 + 1 / 3 + 0 + 2 / 3) / 4)
        assert bundle["pass_at_k"]["2"]["value"] == pytest.approx((1 + 2 / 3 + 0 + 1) / 4)
        p1 = bundle["pass_at_k"]["1"]
        assert p1["low"] < p1["value"] < p1["high"] and p1["n_tasks"] == 4

    def test_categories_come_from_metadata_else_scoring_details(self, exported):
        cats = read_bundle(exported[1].bundle)["categories"]
        assert list(cats) == ["algebra", "geometry", "misc"]
        assert cats["algebra"]["n_tasks"] == 2 and cats["algebra"]["n_steps"] == 6
        assert cats["algebra"]["pass_at_k"]["1"]["value"] == pytest.approx((1 + 1 / 3) / 2)
        assert cats["algebra"]["pass_at_k"]["2"]["value"] == pytest.approx((1 + 2 / 3) / 2)
        assert cats["geometry"]["pass_at_k"]["1"]["value"] == 0.0
        assert cats["misc"]["mean_reward"] == pytest.approx(2 / 3)

    def test_per_metric_scores_and_the_primary_metric(self, exported):
        bundle = read_bundle(exported[1].bundle)
        assert bundle["primary_metric"] == "exact" and bundle["metrics"] == ["exact", "f1"]
        assert bundle["scores"]["exact"]["mean_reward"] == pytest.approx(0.5)
        assert bundle["scores"]["f1"]["mean_reward"] == pytest.approx(0.5)
        assert bundle["scores"]["f1"]["pass_rate"] == 0.0

    def test_counts_agree_with_the_store(self, exported):
        store, result = exported
        bundle = read_bundle(result.bundle)
        metrics = open_store(store).runs()
        assert bundle["n_steps"] == 12 and bundle["n_pass"] == metrics["n_pass"][0] == 6
        assert bundle["pass_at_k"]["1"]["value"] == pytest.approx(metrics["pass_at_1"][0])
        assert (bundle["n_failed"], bundle["n_errors"], bundle["n_wrong"]) == (3, 2, 3)
        assert bundle["created_at"].endswith("Z") and bundle["status"] == "complete"

    def test_no_secret_reaches_any_file(self, exported):
        out = exported[1].out_dir
        for path in out.iterdir():
            text = path.read_text()
            assert "sk-leaked" not in text and "pw@" not in text and "k123" not in text, path.name
        bundle = read_bundle(exported[1].bundle)
        assert bundle["config"]["run"]["api_key"] == "<redacted>"
        assert bundle["model_url"] == "http://<redacted>@host/v1?api_key=<redacted>"


class TestRuntimeStats:
    """runtime_stats.json: latency, throughput, finish reasons, errors."""

    def test_latency_tokens_and_throughput(self, exported):
        stats = orjson.loads((exported[1].out_dir / "runtime_stats.json").read_bytes())
        assert stats["latency_p50_ms"] == stats["latency_p99_ms"] == 50.0
        assert stats["wall_time_s"] == pytest.approx(11 * 0.1 + 0.05)
        assert stats["completion_tokens"] == 200 and stats["completion_tokens_per_s"] == pytest.approx(200 / 1.15)
        assert stats["mean_request_completion_tokens_per_s"] == pytest.approx(200.0)
        assert stats["latency_breakdown_ms"]["model_ms"]["p50"] == 100.0

    def test_finish_reasons_and_errors(self, exported):
        stats = orjson.loads((exported[1].out_dir / "runtime_stats.json").read_bytes())
        assert stats["finish_reasons"] == {"stop": 9, "none": 2, "length": 1}
        assert (stats["n_errors"], stats["error_rate"], stats["n_retries"]) == (2, pytest.approx(2 / 12), 4)


class TestFailureAnalysis:
    """failure_analysis.json: categories, shares and exemplars; wrong answers apart."""

    def test_categories_with_counts_percentages_and_kinds(self, exported):
        fa = orjson.loads((exported[1].out_dir / "failure_analysis.json").read_bytes())
        assert [(c["category"], c["kind"], c["count"]) for c in fa["categories"]] == [
            ("server_error", "error", 2), ("format_error", "answer", 1)]
        assert fa["categories"][0]["percent"] == pytest.approx(100 * 2 / 12)
        assert fa["n_failed"] == 3 and fa["wrong_answers"]["count"] == 3

    def test_exemplars_name_the_step_and_truncate_long_responses(self, exported):
        fa = orjson.loads((exported[1].out_dir / "failure_analysis.json").read_bytes())
        wrong = fa["wrong_answers"]["exemplars"]
        assert [(e["problem_idx"], e["repeat"]) for e in wrong] == [(1, 1), (2, 2), (3, 1)]
        long = wrong[1]
        assert len(long["model_response"]) == EXEMPLAR_CHARS and long["response_truncated"] is True
        assert long["expected_answer"] == "2" and long["task_id"] == "t2"
        assert fa["categories"][0]["exemplars"][0]["error"] == "HTTP 500: boom"

    def test_at_most_three_exemplars_per_category(self, tmp_path):
        many = [("c", [(False, "timeout", None)] * 2) for _ in range(4)]
        export_run(_write_store(tmp_path / "nel.duckdb", many), RUN, tmp_path / "out")
        fa = orjson.loads((tmp_path / "out" / "failure_analysis.json").read_bytes())
        assert fa["categories"][0]["count"] == 8
        assert [(e["problem_idx"], e["repeat"]) for e in fa["categories"][0]["exemplars"]] == [(0, 0), (0, 1), (1, 0)]


class TestExport:
    """export_run: where and how the files are written."""

    def test_a_live_run_exports_the_same_steps_as_after_ingest(self, tmp_path):
        store = _write_store(tmp_path / "nel.duckdb", finish=False)
        live = export_run(store, RUN, tmp_path / "live")
        ingest(store)
        merged = export_run(store, RUN, tmp_path / "merged")
        for name in ("results.jsonl", "trajectories.jsonl"):
            assert (live.out_dir / name).read_bytes() == (merged.out_dir / name).read_bytes()

    def test_a_runs_own_files_export_what_the_store_does_while_an_ingest_writes_it(self, tmp_path):
        # A run's end: its summary and export read a snapshot of its shard files while the ingest, in a thread,
        # copies them into the database file; the files stay until the snapshot is taken, then go.
        store = _write_store(tmp_path / "nel.duckdb", finish=False)
        job = BackgroundIngest(store, RUN)
        with job.files.pinned() as files:
            time.sleep(0.3)  # the ingest has committed by now, and waits
            assert (segments_root(store) / RUN).is_dir(), "the shard files went before they were read"
            job.files_read()
            job.join()
            assert not (segments_root(store) / RUN).exists()
            live = export_run(files, RUN, tmp_path / "live")  # the snapshot outlives the files
        merged = export_run(store, RUN, tmp_path / "merged")
        for name in ("results.jsonl", "trajectories.jsonl", "runtime_stats.json", "failure_analysis.json",
                     bundle_file_name(RUN)):
            assert (live.out_dir / name).read_bytes() == (merged.out_dir / name).read_bytes(), name

    def test_a_background_ingest_that_fails_raises_when_joined(self, tmp_path):
        store = tmp_path / "nel.duckdb"
        store.write_bytes(b"not a duckdb file")
        segments_root(store).mkdir()
        with pytest.raises(NelError, match=r"nel\.duckdb"):
            BackgroundIngest(store, RUN).join()

    def test_files_only_names_its_runs(self, tmp_path):
        with pytest.raises(ValueError, match="runs="):
            Store(_write_store(tmp_path / "nel.duckdb"), files_only=True)

    @pytest.mark.parametrize(("max_steps", "max_bytes", "ranges"), [
        (4, 1 << 30, [(0, 0), (1, 1), (2, 2), (3, 3)]),
        (6, 1 << 30, [(0, 1), (2, 3)]),
        (1 << 20, 1, [(0, 0), (1, 1), (2, 2), (3, 3)]),
    ])
    def test_steps_are_sorted_one_bounded_range_of_problems_at_a_time(self, exported, tmp_path, monkeypatch,
                                                                      max_steps, max_bytes, ranges):
        store, whole = exported
        monkeypatch.setattr(artifacts, "_RANGE_STEPS", max_steps)
        monkeypatch.setattr(artifacts, "_RANGE_BYTES", max_bytes)
        assert artifacts.step_ranges(open_store(store), RUN) == ranges
        split = export_run(store, RUN, tmp_path / "split")
        for name in ("results.jsonl", "trajectories.jsonl"):
            assert (split.out_dir / name).read_bytes() == (whole.out_dir / name).read_bytes()

    def test_a_run_without_steps_exports_empty_files_and_undefined_numbers(self, tmp_path):
        store = _write_store(tmp_path / "nel.duckdb", [("c", [])])
        result = export_run(store, RUN, tmp_path / "out")
        assert result.n_results == 0 and (result.out_dir / "results.jsonl").read_bytes() == b""
        bundle = read_bundle(result.bundle)
        assert bundle["n_steps"] == 0 and bundle["buckets"]["missing"] == 1
        assert bundle["pass_at_k"]["1"]["value"] is None and bundle["runtime_stats"]["wall_time_s"] is None
        assert bundle["failure_analysis"]["categories"] == [] and bundle["categories"] == {}
        assert all(render_report(bundle, fmt) for fmt in FORMATS)

    def test_leaves_no_temporary_files(self, exported):
        names = sorted(p.name for p in exported[1].out_dir.iterdir())
        assert names == ["eval-r1.json", "failure_analysis.json", "results.jsonl", "runtime_stats.json",
                         "trajectories.jsonl"]

    def test_an_unknown_run_names_the_store(self, exported):
        store, _ = exported
        with pytest.raises(UsageError, match=r"nel\.duckdb: no run 'nope'"):
            export_run(store, "nope", store.parent / "x")

    def test_an_output_path_that_is_a_file_is_refused(self, exported, tmp_path):
        target = tmp_path / "file"
        target.write_text("")
        with pytest.raises(UsageError, match="is a file"):
            export_run(exported[0], RUN, target)

    def test_is_fast_enough_to_run_at_the_end_of_every_run(self, exported, tmp_path):
        start = time.perf_counter()
        export_run(exported[0], RUN, tmp_path / "again")
        assert time.perf_counter() - start < 5.0


def test_bundle_file_names_keep_only_safe_characters():
    assert bundle_file_name("gsm8k-20260101-000000-abc") == "eval-gsm8k-20260101-000000-abc.json"
    assert bundle_file_name("a/b c") == "eval-a_b_c.json"


def test_redact_replaces_credentials_and_keeps_everything_else():
    data = {"api_key": "s", "Authorization": "Bearer s", "max_tokens": 5, "nested": [{"hf_token": "s"}],
            "url": "https://u:p@h/v1?key=s&x=1", "model_id": "m"}
    assert redact(data) == {"api_key": "<redacted>", "Authorization": "<redacted>", "max_tokens": 5,
                            "nested": [{"hf_token": "<redacted>"}], "url": "https://<redacted>@h/v1?key=<redacted>&x=1",
                            "model_id": "m"}


def test_json_stored_with_newlines_still_gives_one_line_per_step():
    step = dict.fromkeys(artifacts._STEP_NAMES)
    step.update(task_idx=0, repeat=0, reward=1.0, passed=True, scoring_details='{\n  "method": "x\\ny"\n}',
                metadata='{"category": "a"}')
    for line in (artifacts.results_line(step), artifacts.trajectory_line(RUN, step)):
        text = orjson.dumps(line)
        assert b"\n" not in text and orjson.loads(text)["scoring_details"] == {"method": "x\ny"}
