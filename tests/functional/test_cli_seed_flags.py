"""What NeMo Evaluator's CLI reference tells its users to type works here too: `nel eval run -n/-m/-o` and
`--adapter URI`, `nel eval merge DIR -n N`, `nel list --source`, `nel gate --output`, `nel validate --samples N`
(against a model: the real seed -> model -> verify loop, each verdict shown), and the seed's artifact fields
(regression.json's pass@k keys, results.jsonl's tokens and latency)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import orjson
import pytest
from nel_helpers import assert_ok, assert_one_line_error, clean_env, free_port, nel

from workbench.store import open_store


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return clean_env(XDG_CONFIG_HOME=str(tmp_path / "xdg"), **extra)  # no user defaults of the machine's


def _run(mock_url: str, out: Path, *extra: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return nel("eval", "run", "-b", "gsm8k", "--model-url", mock_url, "--model-id", "nel-mock", "-n", "2", "-m", "6",
               "-o", str(out), "--no-progress", *extra, cwd=cwd, env=_env(cwd))


def _bundle_dir(out: Path) -> Path:
    [bundle] = out.glob("runs/*/eval-*.json")
    return bundle.parent


class TestEvalRunShortFlags:
    """`-n` is --repeats, `-m` --max-problems, `-o` --output-dir (and -O stays the config override)."""

    def test_short_flags_set_repeats_problems_and_the_output_dir(self, mock, tmp_path):
        proc = _run(mock.base_url, tmp_path / "short", cwd=tmp_path)
        assert_ok(proc)
        run = open_store(tmp_path / "short" / "nel.duckdb").dicts("SELECT n_repeats, n_tasks FROM runs")
        assert run == [{"n_repeats": 2, "n_tasks": 6}]
        rows = (_bundle_dir(tmp_path / "short") / "results.jsonl").read_text().splitlines()
        assert len(rows) == 12

    def test_results_lines_carry_tokens_and_latency(self, mock, tmp_path):
        assert_ok(_run(mock.base_url, tmp_path / "o", cwd=tmp_path))
        line = orjson.loads((_bundle_dir(tmp_path / "o") / "results.jsonl").read_text().splitlines()[0])
        assert line["prompt_tokens"] > 0 and line["completion_tokens"] > 0
        assert line["total_tokens"] == line["prompt_tokens"] + line["completion_tokens"]
        assert line["latency_ms"] > 0 and line["model_ms"] > 0 and line["latency_ms"] >= line["model_ms"]


class TestAdapter:
    """`--adapter URI` names the benchmark as `-b URI` does; what it cannot mean is one line, exit 2."""

    def test_adapter_gym_url_runs_like_bench_gym_url(self, mock, nel_serve, tmp_path):
        via_adapter = nel("eval", "run", "--adapter", nel_serve, "--model-url", mock.base_url, "--model-id",
                          "nel-mock", "-n", "1", "-m", "4", "-o", "a", "--no-progress", cwd=tmp_path,
                          env=_env(tmp_path))
        assert_ok(via_adapter)
        via_bench = nel("eval", "run", "-b", nel_serve, "--model-url", mock.base_url, "--model-id", "nel-mock",
                        "-n", "1", "-m", "4", "-o", "b", "--no-progress", cwd=tmp_path, env=_env(tmp_path))
        assert_ok(via_bench)
        rewards = [open_store(tmp_path / d / "nel.duckdb").dicts(
            "SELECT task_id, reward FROM steps ORDER BY task_idx") for d in ("a", "b")]
        assert rewards[0] == rewards[1] and len(rewards[0]) == 4

    @pytest.mark.parametrize(("args", "said"), [
        (("--adapter", "skills://gpqa"), "skills:// is not supported"),
        (("--adapter", "gsm8k"), "a benchmark name goes in -b/--bench"),
        (("--adapter", "gym://127.0.0.1:9", "-b", "gsm8k"), "names another benchmark"),
    ])
    def test_what_an_adapter_cannot_mean_is_refused(self, mock, tmp_path, args, said):
        proc = nel("eval", "run", *args, "--model-url", mock.base_url, "--model-id", "nel-mock", "--no-progress",
                   cwd=tmp_path, env=_env(tmp_path))
        assert said in assert_one_line_error(proc, 2)


class TestMergeRepeats:
    """`nel eval merge DIR -n N`: the merged runs must have N repeats (default: each its own)."""

    def test_merge_checks_the_repeats_of_a_sharded_run(self, mock, tmp_path):
        for idx in (0, 1):
            env = _env(tmp_path, NEL_SHARD_IDX=str(idx), NEL_TOTAL_SHARDS="2")
            assert_ok(nel("eval", "run", "-b", "gsm8k", "--model-url", mock.base_url, "--model-id", "nel-mock",
                          "-n", "2", "-m", "6", "-o", "out", "--run-id", "sharded", "--no-progress",
                          cwd=tmp_path, env=env))
        right = nel("eval", "merge", "out", "--repeats", "2", cwd=tmp_path, env=_env(tmp_path))
        assert_ok(right)
        assert "run sharded: complete" in right.stdout
        wrong = nel("eval", "merge", "out", "-n", "3", cwd=tmp_path, env=_env(tmp_path))
        assert "--repeats 3: run sharded has 2 repeats per problem" in assert_one_line_error(wrong, 2)


class TestListSource:
    """`nel list --source`: builtin, hf, byob, or text of the SOURCE column."""

    def test_origins_filter_the_list(self, tmp_path):
        (tmp_path / "words.jsonl").write_text('{"word": "w0"}\n')
        (tmp_path / "mine.py").write_text(
            "from workbench.environments.byob import ScorerInput, benchmark, scorer\n"
            "@benchmark(name='mine', dataset='words.jsonl', prompt='Say {word}.', target_field='word')\n"
            "@scorer\n"
            "def said_it(sample: ScorerInput) -> dict:\n"
            "    return {'correct': bool(sample.response.strip())}\n")
        by = {}
        for source in ("builtin", "hf", "byob"):
            proc = nel("list", "--json", "--source", source, "--benchmark-file", "mine.py", cwd=tmp_path,
                       env=_env(tmp_path))
            assert_ok(proc)
            by[source] = {i["name"]: i["origin"] for i in orjson.loads(proc.stdout)}
        assert "gsm8k" in by["builtin"] and "mmlu" in by["hf"] and by["byob"] == {"mine": "byob"}
        assert set(by["builtin"].values()) == {"builtin"} and set(by["hf"].values()) == {"hf"}

    def test_lm_eval_says_how_its_tasks_run(self, tmp_path):
        proc = nel("list", "--source", "lm-eval", cwd=tmp_path, env=_env(tmp_path))
        assert_ok(proc)
        assert "-b 'lm-eval://TASK'" in proc.stderr


class TestGateOutput:
    """`nel gate --output FILE` writes the gate's JSON report, as `nel compare --output` writes regression.json."""

    def test_gate_and_compare_write_their_reports(self, mock, tmp_path):
        for side in ("base", "cand"):
            assert_ok(_run(mock.base_url, tmp_path / side, cwd=tmp_path))
        (tmp_path / "policy.yaml").write_text("benchmarks:\n  gsm8k: {tier: critical, max_drop: 0.5}\n")
        gate = nel("gate", "base", "cand", "--policy", "policy.yaml", "--output", "reports/", cwd=tmp_path,
                   env=_env(tmp_path))
        assert_ok(gate)
        report = orjson.loads((tmp_path / "reports" / "gate.json").read_bytes())
        assert report["format"] == "nel-gate" and report["decision"] in ("GO", "INCONCLUSIVE")
        compare = nel("compare", "base", "cand", "-o", "reports/", cwd=tmp_path, env=_env(tmp_path))
        assert_ok(compare)
        regression = orjson.loads((tmp_path / "reports" / "regression.json").read_bytes())
        for k in ("pass@1", "pass@2"):
            entry = regression["score_deltas"][k]
            assert {"baseline", "candidate", "delta", "ci_overlap", "p_value", "significant"} <= set(entry)
            assert entry["delta"] == 0.0 and entry["significant"] is False
        assert set(regression["runtime_deltas"]["tokens_per_second"]) >= {"baseline", "candidate", "delta"}

    def test_an_unwritable_output_is_one_line(self, mock, tmp_path):
        assert_ok(_run(mock.base_url, tmp_path / "base", cwd=tmp_path))
        (tmp_path / "policy.yaml").write_text("benchmarks:\n  gsm8k: {tier: critical, max_drop: 0.5}\n")
        (tmp_path / "file").write_text("")
        proc = nel("gate", "base", "base", "--policy", "policy.yaml", "--output", "file/gate.json", cwd=tmp_path,
                   env=_env(tmp_path))
        assert "--output file/gate.json: cannot write the report" in assert_one_line_error(proc, 2)


class TestSeedCommandNames:
    """NeMo Evaluator's `nel regression BASELINE CANDIDATE --threshold X` is `nel compare`; its `nel package` is one
    line saying what to use instead."""

    def test_regression_is_compare_with_threshold_as_max_drop(self, mock, tmp_path):
        for side in ("base", "cand"):
            assert_ok(_run(mock.base_url, tmp_path / side, cwd=tmp_path))
        same = nel("compare", "base", "cand", "--max-drop", "0.3", cwd=tmp_path, env=_env(tmp_path))
        alias = nel("regression", "base", "cand", "--threshold", "0.3", "--output", "r.json", cwd=tmp_path,
                    env=_env(tmp_path))
        assert_ok(alias)
        assert [line for line in alias.stdout.splitlines() if "r.json" not in line] == same.stdout.splitlines()
        assert orjson.loads((tmp_path / "r.json").read_bytes())["max_drop"] == 0.3

    def test_package_says_what_to_use_instead(self, tmp_path):
        line = assert_one_line_error(nel("package", "my_bench.py", cwd=tmp_path, env=_env(tmp_path)), 2)
        assert "deploy/build-image.sh" in line and "nel eval run -b ./my_benchmark.py" in line


class TestValidateWithAModel:
    """`nel validate -b NAME --samples N --model-url URL --model-id ID`: the engine's loop on N problems."""

    def test_each_verdict_is_shown_with_a_summary(self, mock, tmp_path):
        proc = nel("validate", "-b", "gsm8k", "--samples", "4", "--model-url", mock.base_url, "--model-id",
                   "nel-mock", cwd=tmp_path, env=_env(tmp_path))
        assert_ok(proc)
        lines = [x for x in proc.stdout.splitlines() if x.startswith("problem")]
        assert [int(x.split()[1]) for x in lines] == [0, 1, 2, 3]
        assert all(re.search(r"(PASS|FAIL) +reward [01]\.00  extracted '.*'  expected '.*'", x) for x in lines)
        n_pass = sum(" PASS " in x for x in lines)
        assert f"gsm8k: {n_pass}/4 problems passed against nel-mock" in proc.stdout
        assert list(tmp_path.iterdir()) == [], "validation leaves no store behind"

    def test_the_verdicts_are_the_engines(self, mock, tmp_path):
        """The same rewards as `nel eval run` of those problems: one loop, not a second one."""
        proc = nel("validate", "-b", "gsm8k", "--samples", "5", "--model-url", mock.base_url, "--model-id",
                   "nel-mock", cwd=tmp_path, env=_env(tmp_path))
        assert_ok(proc)
        shown = [(int(x.split()[1]), x.split()[4]) for x in proc.stdout.splitlines() if x.startswith("problem")]
        assert_ok(nel("eval", "run", "-b", "gsm8k", "--model-url", mock.base_url, "--model-id", "nel-mock", "-n",
                      "1", "-m", "5", "-o", "run", "--no-progress", cwd=tmp_path, env=_env(tmp_path)))
        stored = open_store(tmp_path / "run" / "nel.duckdb").dicts("SELECT task_idx, passed FROM steps ORDER BY 1")
        assert shown == [(r["task_idx"], "PASS" if r["passed"] else "FAIL") for r in stored]

    def test_an_unreachable_model_fails_the_validation(self, tmp_path):
        proc = nel("validate", "-b", "gsm8k", "--samples", "2", "--model-url", f"http://127.0.0.1:{free_port()}/v1",
                   "--model-id", "m", cwd=tmp_path, env=_env(tmp_path))
        assert_one_line_error(proc, 1)

    def test_half_a_model_is_one_line(self, tmp_path):
        proc = nel("validate", "-b", "gsm8k", "--model-id", "m", cwd=tmp_path, env=_env(tmp_path))
        assert "--model-url: needed to run the samples" in assert_one_line_error(proc, 2)

    def test_without_a_model_ten_answer_keys_are_checked(self, tmp_path):
        proc = nel("validate", "-b", "gsm8k", cwd=tmp_path, env=_env(tmp_path))
        assert_ok(proc)
        assert "10/10 sampled expected answers score 1.0" in proc.stdout
