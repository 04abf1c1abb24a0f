"""Several metrics per benchmark, an LLM judge on a second service, and reverify with scorer parameters."""

import orjson
import pytest
from nel_helpers import assert_ok, assert_one_line_error, nel

from workbench import open_store

SUITE = """\
services:
  solver: {{type: api, url: "{url}", model: nel-mock}}
  judge: {{type: api, url: "{url}", model: nel-mock-judge, generation: {{temperature: 0}}}}
benchmarks:
  - name: gsm8k
    max_problems: 40
    repeats: 3
    max_concurrent: 8
    solver: {{type: simple, service: solver}}
    scoring:
      metrics:
        - {{type: numeric, name: numeric_tol, params: {{abs_tol: 0.5}}}}
        - {{type: judge, name: correctness, service: judge}}
output: {{dir: out}}
"""


@pytest.fixture(scope="module")
def judged_run(mock, tmp_path_factory):
    root = tmp_path_factory.mktemp("metrics")
    (root / "suite.yaml").write_text(SUITE.format(url=mock.base_url))
    proc = nel("eval", "run", "suite.yaml", "--no-progress", cwd=root)
    assert_ok(proc)
    store = open_store(root / "out")
    run_id = store.sql("SELECT run_id FROM runs")["run_id"][0]
    return root, store, run_id, proc.stdout


def test_every_metric_is_stored_for_every_step(judged_run):
    _, store, run_id, stdout = judged_run
    counts = dict(store.rows("SELECT metric, count(*) FROM step_scores WHERE run_id = ? GROUP BY metric", [run_id]))
    assert counts == {"numeric": 120, "numeric_tol": 120, "correctness": 120}
    config = orjson.loads(store.rows("SELECT config FROM runs WHERE run_id = ?", [run_id])[0][0])
    assert config["primary_metric"] == "numeric" and config["metrics"] == ["numeric", "numeric_tol", "correctness"]
    for name in ("numeric (primary)", "numeric_tol", "correctness"):
        assert f"metric   {name}" in stdout


def test_the_primary_metric_is_the_steps_reward(judged_run):
    _, store, run_id, _ = judged_run
    mismatches = store.rows(
        "SELECT count(*) FROM steps s JOIN step_scores m USING (run_id, task_idx, repeat) "
        "WHERE s.run_id = ? AND m.metric = 'numeric' AND (m.reward <> s.reward OR m.passed <> s.passed)", [run_id])
    assert mismatches == [(0,)]


def test_the_judge_prompt_and_its_raw_reply_are_kept_with_each_judged_step(judged_run):
    _, store, run_id, _ = judged_run
    judged = store.dicts(
        "SELECT s.response, s.expected_answer, m.reward, m.extracted_answer, m.scoring_details AS d "
        "FROM steps s JOIN step_scores m USING (run_id, task_idx, repeat) "
        "WHERE s.run_id = ? AND m.metric = 'correctness'", [run_id])
    sent = [r for r in judged if r["response"].strip()]
    assert sent and all(r["response"] in orjson.loads(r["d"])["judge_prompt"] for r in sent)
    for r in sent:
        details = orjson.loads(r["d"])
        assert details["judge_model"] == "nel-mock-judge" and details["judge_response"].endswith(
            "VERDICT: CORRECT" if r["reward"] == 1.0 else "VERDICT: INCORRECT")
        assert r["extracted_answer"] == ("CORRECT" if r["reward"] == 1.0 else "INCORRECT")
    # the mock judge agrees with the numeric scorer on answers it can read
    agree = store.rows(
        "SELECT avg(CAST(a.reward = b.reward AS DOUBLE)) FROM step_scores a JOIN step_scores b "
        "USING (run_id, task_idx, repeat) WHERE a.run_id = ? AND a.metric = 'numeric' AND b.metric = 'correctness'",
        [run_id])[0][0]
    assert agree > 0.9


def test_an_empty_response_is_never_sent_to_the_judge_nor_judged_correct(judged_run):
    _, store, run_id, _ = judged_run
    empty = store.dicts(
        "SELECT m.reward, m.scoring_details AS d FROM steps s JOIN step_scores m USING (run_id, task_idx, repeat) "
        "WHERE s.run_id = ? AND m.metric = 'correctness' AND trim(coalesce(s.response, '')) = ''", [run_id])
    assert empty, "the mock gives some empty replies in a run this size"
    for r in empty:
        details = orjson.loads(r["d"])
        assert r["reward"] == 0.0 and "judge_prompt" not in details and "not sent to the judge" in details["reason"]


def test_tolerance_metric_accepts_what_exact_numeric_rejects(judged_run):
    _, store, run_id, _ = judged_run
    rows = dict(store.rows("SELECT metric, sum(reward) FROM step_scores WHERE run_id = ? GROUP BY metric", [run_id]))
    assert rows["numeric_tol"] >= rows["numeric"]


def test_a_judge_prompt_the_judge_cannot_answer_strictly_scores_zero_as_judge_error(mock, tmp_path):
    text = SUITE.format(url=mock.base_url).replace(
        "service: judge}", "service: judge, prompt: 'Is this right? {response}'}").replace(
        "    scoring:\n", "    scoring:\n      include_defaults: false\n").replace(
        "        - {type: numeric, name: numeric_tol, params: {abs_tol: 0.5}}\n", "")
    (tmp_path / "suite.yaml").write_text(text.replace("max_problems: 40", "max_problems: 5"))
    assert_ok(nel("eval", "run", "suite.yaml", "--no-progress", cwd=tmp_path))
    store = open_store(tmp_path / "out")
    rows = store.rows("SELECT DISTINCT s.reward, s.failure_category, m.scoring_details ->> 'reason' FROM steps s "
                      "JOIN step_scores m USING (run_id, task_idx, repeat) WHERE trim(s.response) <> ''")
    assert {(r[0], r[1]) for r in rows} == {(0.0, "judge_error")}
    assert all("last line" in r[2] for r in rows)


def test_a_judge_that_cannot_be_reached_stops_the_run_before_any_step(mock, tmp_path):
    text = SUITE.format(url=mock.base_url).replace(
        'judge: {type: api, url: "' + mock.base_url, 'judge: {type: api, url: "http://127.0.0.1:9')
    (tmp_path / "suite.yaml").write_text(text)
    proc = nel("eval", "run", "suite.yaml", "--no-progress", cwd=tmp_path)
    assert proc.returncode == 1 and "cannot reach the model at http://127.0.0.1:9" in proc.stderr
    assert not (tmp_path / "out" / "nel.duckdb").exists() or open_store(tmp_path / "out").rows(
        "SELECT count(*) FROM steps") == [(0,)]


def test_a_self_judging_config_runs_nothing(mock, tmp_path):
    text = SUITE.format(url=mock.base_url).replace("service: judge}", "service: solver}")
    (tmp_path / "suite.yaml").write_text(text)
    line = assert_one_line_error(nel("eval", "run", "suite.yaml", cwd=tmp_path), 2)
    assert "suite.yaml:13: benchmarks.0.scoring.metrics.1.service" in line and "allow_self_judge: true" in line
    assert not (tmp_path / "out").exists()


def test_reverify_with_a_scorer_parameter_writes_a_single_metric_run(judged_run):
    root, store, run_id, _ = judged_run
    proc = nel("eval", "reverify", run_id, "-O", "scoring.abs_tol=0.5", "--store", "out/nel.duckdb", cwd=root)
    assert_ok(proc)
    assert "scoring.abs_tol=0.5" in proc.stdout
    store = open_store(root / "out")
    new_id = store.sql("SELECT run_id FROM runs ORDER BY created_at DESC LIMIT 1")["run_id"][0]
    new = dict(store.rows("SELECT metric, sum(reward) FROM step_scores WHERE run_id = ? GROUP BY metric", [new_id]))
    old = dict(store.rows("SELECT metric, sum(reward) FROM step_scores WHERE run_id = ? GROUP BY metric", [run_id]))
    assert new == {"numeric": old["numeric_tol"]}
    identity = orjson.loads(store.rows("SELECT identity FROM runs WHERE run_id = ?", [new_id])[0][0])
    assert identity["scorer_params"] == {"abs_tol": 0.5} and "metrics" not in identity


@pytest.mark.parametrize(("args", "message"), [
    (["-O", "scoring.bogus=1"], "scoring.bogus: scorer 'numeric' has no parameter 'bogus'; its parameters: abs_tol"),
    (["-O", "abs_tol=1"], "expected scoring.PARAM=VALUE"),
    (["--scorer", "exact", "-O", "scoring.case_sensitive=maybe"], "scoring.case_sensitive: expected true or false"),
])
def test_bad_reverify_parameters_are_one_line_errors(judged_run, args, message):
    root, _, run_id, _ = judged_run
    line = assert_one_line_error(nel("eval", "reverify", run_id, *args, "--store", "out/nel.duckdb", cwd=root), 2)
    assert message in line


def test_humaneval_runs_are_refused_until_code_can_be_run_in_a_sandbox(mock, tmp_path):
    line = assert_one_line_error(nel("eval", "run", "-b", "humaneval", "--model-url", mock.base_url, "--model-id",
                                     "m", "--no-progress", cwd=tmp_path), 2)
    assert "humaneval" in line and "sandbox" in line
