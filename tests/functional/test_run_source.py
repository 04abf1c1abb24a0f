"""Each run's source (nel, gym, lm-eval, inspect) is derived once, by the store's ``run_source`` macro from what the
importers write into a run's identity, and every listing of runs shows it: ``run_metrics``, ``nel sql --named
runs``, the TUI's runs list and the notebooks' run picker.

The store holds a native ``nel eval run`` against the mock, a ``nel import gym`` of Gym rollouts, a ``nel import
lm-eval`` of lm-eval output and a ``nel import inspect`` of an inspect_ai ``.eval`` log: the real run and the real
importers, on small files.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import orjson
import pytest
from nel_helpers import assert_ok, eval_args, nel

from workbench import open_store
from workbench.analysis.triage import runs_table
from workbench.gym.importer import import_gym
from workbench.importers.inspect_log import import_inspect
from workbench.importers.lmeval import import_lmeval
from workbench.mock.process import MockHandle
from workbench.store.reader import Store

pytestmark = pytest.mark.timeout(120)

_QUESTIONS = ("What is 2 + 2?", "What is 3 + 5?", "What is 10 - 4?")


def _gym_rollouts(path: Path) -> Path:
    """Gym's rollouts, two tasks of one rollout each, as ng_collect_rollouts writes them."""
    rows = []
    for task, question in enumerate(_QUESTIONS[:2]):
        rows.append({
            "responses_create_params": {"input": [{"role": "user", "content": question}], "model": "policy"},
            "expected_answer": "4", "agent_ref": {"name": "math_simple_agent"},
            "_ng_task_index": task, "_ng_rollout_index": 0, "reward": 1.0, "extracted_answer": "4",
            "response": {"id": f"resp_{task}", "object": "response", "model": "policy", "status": "completed",
                         "output": [{"id": f"msg_{task}", "type": "message", "role": "assistant",
                                     "status": "completed",
                                     "content": [{"type": "output_text", "text": "4", "annotations": []}]}]},
        })
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


def _lm_eval_output(out: Path) -> Path:
    """lm-eval 0.4's --log_samples layout: OUT/<model>/results_<date>.json and samples_<task>_<date>.jsonl."""
    model_dir = out / "nel-mock"
    model_dir.mkdir(parents=True)
    date = "2026-01-01T00-00-00.000000"
    with open(model_dir / f"samples_arith_{date}.jsonl", "w", encoding="utf-8") as fh:
        for doc_id, question in enumerate(_QUESTIONS):
            chat = json.dumps([{"role": "user", "content": question}])
            fh.write(json.dumps({"doc_id": doc_id, "doc": {"question": question, "answer": "4"}, "target": "4",
                                 "arguments": {"gen_args_0": {"arg_0": chat, "arg_1": {}}}, "resps": [["4"]],
                                 "filtered_resps": ["4"], "filter": "none", "metrics": ["exact_match"],
                                 "exact_match": float(doc_id == 0)}) + "\n")
    results = {"results": {"arith": {"alias": "arith", "exact_match,none": 1 / 3}},
               "configs": {"arith": {"task": "arith", "output_type": "generate_until"}}, "versions": {"arith": 1.0},
               "config": {"model": "local-chat-completions"}, "model_name": "nel-mock", "lm_eval_version": "0.4.13"}
    (model_dir / f"results_{date}.json").write_text(json.dumps(results), encoding="utf-8")
    return out


def _inspect_log(path: Path) -> Path:
    """An inspect_ai ``.eval`` log as inspect 0.3 writes one: a zip of ``header.json`` and one
    ``samples/<id>_epoch_<n>.json`` entry per sample (two samples, one epoch)."""
    spec = {"eval_id": "e1", "run_id": "r1", "created": "2026-01-01T00:00:00+00:00", "task": "arith",
            "dataset": {"name": "arith", "samples": 2}, "model": "openai/nel-mock"}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for sid, question in enumerate(_QUESTIONS[:2], 1):
            zf.writestr(f"samples/{sid}_epoch_1.json", orjson.dumps({
                "id": sid, "epoch": 1, "input": question, "target": "4",
                "messages": [{"role": "user", "content": question}, {"role": "assistant", "content": "4"}],
                "scores": {"match": {"value": "C" if sid == 1 else "I", "answer": "4"}}}))
        zf.writestr("header.json", orjson.dumps({"version": 2, "status": "success", "eval": spec,
                                                 "plan": {"steps": []}, "results": None}))
    return path


@pytest.fixture(scope="module")
def mixed(mock: MockHandle, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A store with one run of each source; returns it and ``{run_id: expected source}``."""
    root = tmp_path_factory.mktemp("sources")
    store = root / "nel.duckdb"
    assert_ok(nel(*eval_args(mock.base_url, problems=3, repeats=1, store=store, extra=["--run-id", "native"]),
                  cwd=root))
    gym = import_gym(store, _gym_rollouts(root / "rollouts.jsonl")).run_id
    (lm_eval,) = import_lmeval(store, _lm_eval_output(root / "lm-eval-out"))
    (inspect,) = import_inspect(store, _inspect_log(root / "arith.eval"))
    return store, {"native": "nel", gym: "gym", lm_eval.run_id: "lm-eval", inspect.run_id: "inspect"}


def test_run_metrics_says_which_harness_produced_each_run(mixed):
    store, expected = mixed
    assert dict(open_store(store).rows("SELECT run_id, source FROM run_metrics")) == expected


def test_nel_sql_lists_runs_with_their_source(mixed):
    store, expected = mixed
    proc = nel("sql", "--named", "runs", "--store", str(store), "--format", "csv", cwd=store.parent)
    assert_ok(proc)
    header, *rows = [line.split(",") for line in proc.stdout.strip().splitlines()]
    assert header[:2] == ["run_id", "source"]
    assert {r[0]: r[1] for r in rows} == expected


def test_an_inspect_import_reads_inspect_and_an_unknown_source_reads_as_written(mixed):
    """The macro is the one derivation: inspect_ai's importer writes source inspect_ai; a newer one's stays."""
    store, _ = mixed
    got = open_store(store).rows(
        "SELECT run_source(CAST(? AS JSON)), run_source(CAST(? AS JSON)), run_source(CAST('{}' AS JSON))",
        ['{"source": "inspect_ai"}', '{"source": "helm"}'])
    assert got == [("inspect", "helm", "nel")]


def test_the_triage_rows_behind_the_tui_and_the_notebooks_carry_the_source(mixed):
    store, expected = mixed
    assert {r.run_id: r.source for r in runs_table(Store(store))} == expected


def test_the_run_pickers_options_name_each_runs_source(mixed):
    from workbench.widgets.run_picker import RunPicker

    store, expected = mixed
    picker = RunPicker(store)
    labels = {run_id: label for label, run_id in picker.dropdown.options}
    assert set(labels) == set(expected)
    for run_id, source in expected.items():
        assert labels[run_id].startswith(f"{run_id} [{source}] · ")
    assert "<th>source</th>" in picker.table.value


@pytest.mark.asyncio
async def test_the_tui_runs_list_has_a_source_column(mixed):
    from textual.widgets import DataTable

    from workbench.tui.app import NelApp

    store, expected = mixed
    app = NelApp(store)
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(100):
            await app.workers.wait_for_complete()
            await pilot.pause()
            table = app.screen.query_one("#runs", DataTable)
            if table.row_count == len(expected):
                break
        keys = [row.key.value for row in table.ordered_rows]
        shown = dict(zip(keys, table.get_column("source"), strict=True))
        assert shown == expected
        filt = app.screen.query_one("#filter")
        filt.value = "lm-eval"  # type: ignore[attr-defined]
        await pilot.pause()
        assert [row.key.value for row in table.ordered_rows] == [k for k, v in expected.items() if v == "lm-eval"]
