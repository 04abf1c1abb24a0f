"""lm-eval is the oracle of ``lm-eval://``: on the same task, data and mock model, ``nel eval run`` scores exactly
what ``lm_eval.simple_evaluate`` with ``local-chat-completions`` and ``apply_chat_template=True`` scores, document
by document, from the same prompts.

Why the two runs get the same answers: the mock decides an attempt from (its skill seed, the task, the request's
``seed``, the ``X-Nel-Attempt`` header). lm-eval sends ``seed: 1234`` and no header (attempt 0); nel is given
``--seed 1234``, and its first repeat sends ``seed: 1234 + 0`` with attempt 0. Temperature, ``stop`` and
``max_tokens`` come from the task on both sides (nel reads the task's ``generation_kwargs``).

The task is a user's YAML (``tests/fixtures/lmeval``) over local JSONL files, found through ``include_path`` as
``lm_eval --include_path`` finds it; its data paths are relative, so both sides run from that directory.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest.mock import patch

import orjson
import pytest
from nel_helpers import ROOT, assert_ok, clean_env, nel

from workbench.errors import UsageError
from workbench.mock import mock_model
from workbench.mock.process import MockHandle
from workbench.store import open_store

pytestmark = pytest.mark.timeout(240)

FIXTURES = ROOT / "tests" / "fixtures" / "lmeval"
TASK = "nel_gsm8k_mini"
URI = f"lm-eval://{TASK}?include_path=."
N_DOCS = 30
PRIMARY = "exact_match,final-answer"
LM_EVAL_SEED = 1234
"""What lm-eval's API models send as the request's ``seed`` (``TemplateAPI(seed=1234)``)."""


@pytest.fixture(scope="module")
def offline_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The hub unreachable, as here; the datasets cache (the JSON files' Arrow form) in a temporary directory."""
    cache = tmp_path_factory.mktemp("hf")
    extra = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_DATASETS_CACHE": str(cache / "datasets"),
             "TQDM_DISABLE": "1"}
    saved = {k: os.environ.get(k) for k in extra}
    os.environ.update(extra)
    try:
        yield clean_env(**extra)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module")
def mock(offline_env: dict[str, str]) -> Iterator[MockHandle]:
    """The mock model, answering the fixture task (it builds the task from the fixture directory)."""
    cwd = Path.cwd()
    os.chdir(FIXTURES)
    try:
        with mock_model(benchmarks=(URI,)) as handle:
            os.chdir(cwd)
            yield handle
    finally:
        os.chdir(cwd)


def lm_eval_run(mock: MockHandle, num_fewshot: int | None) -> dict[str, Any]:
    """lm-eval's own run of the fixture task against the mock: results and per-document samples. lm-eval's own
    code throughout: a build in this process (the refusal tests) memoises its Jinja templates
    (``workbench.lmeval.loading.memoise_templates``), so its own ``apply_template`` is put back for the run."""
    import lm_eval
    from lm_eval import utils
    from lm_eval.tasks import TaskManager

    cwd = Path.cwd()
    os.chdir(FIXTURES)
    try:
        own = getattr(utils.apply_template, "__wrapped__", utils.apply_template)
        with patch.object(utils, "apply_template", own):
            return lm_eval.simple_evaluate(
                model="local-chat-completions",
                model_args=f"base_url={mock.base_url}/chat/completions,model=nel-mock,num_concurrent=4,max_retries=1",
                tasks=[TASK], num_fewshot=num_fewshot, apply_chat_template=True, log_samples=True,
                task_manager=TaskManager(include_path="."))
    finally:
        os.chdir(cwd)


def nel_run(mock: MockHandle, uri: str, out: Path, env: dict[str, str], *extra: str) -> Any:
    return nel("eval", "run", "-b", uri, "--model-url", mock.base_url, "--model-id", "nel-mock",
               "--seed", str(LM_EVAL_SEED), "--output-dir", str(out), "--no-progress", *extra,
               cwd=FIXTURES, env=env, timeout=180)


def nel_steps(out: Path) -> list[dict[str, Any]]:
    rows = open_store(out).rows("SELECT task_idx, repeat, reward, messages, metadata, request_seed FROM steps "
                                "ORDER BY task_idx, repeat")
    return [{"task_idx": r[0], "repeat": r[1], "reward": r[2], "messages": orjson.loads(r[3]),
             "doc_id": orjson.loads(r[4])["doc_id"], "request_seed": r[5]} for r in rows]


@pytest.mark.parametrize("num_fewshot", [None, 3], ids=["zero-shot", "3-shot"])
def test_nel_scores_exactly_what_lm_eval_scores_from_the_same_prompts(mock, offline_env, tmp_path, num_fewshot):
    uri = URI if num_fewshot is None else f"{URI}&num_fewshot={num_fewshot}"
    proc = nel_run(mock, uri, tmp_path, offline_env)
    assert_ok(proc)
    theirs = lm_eval_run(mock, num_fewshot)
    score = theirs["results"][TASK][PRIMARY]
    samples = {s["doc_id"]: s for s in theirs["samples"][TASK] if s["filter"] == "final-answer"}
    steps = nel_steps(tmp_path)

    assert len(steps) == len(samples) == N_DOCS
    assert 0 < score < 1, "a mock that solves some and misses some: a real comparison"
    assert sum(s["reward"] for s in steps) / N_DOCS == pytest.approx(score, abs=1e-12)
    assert {s["doc_id"]: s["reward"] for s in steps} == {i: float(s["exact_match"]) for i, s in samples.items()}
    for step in steps:  # the same request: lm-eval's chat history, as its JSON prompt holds it
        # lm-eval's JsonChatStr; with some of its dependencies' versions the in-memory sample holds it as the plain
        # one-tuple a NamedTuple becomes once copied through a serialiser
        context = samples[step["doc_id"]]["arguments"][0][0]
        prompt = context.prompt if hasattr(context, "prompt") else context[0]
        assert step["messages"] == json.loads(prompt), step["doc_id"]
    shots = sum(m["role"] == "assistant" for m in steps[0]["messages"])
    assert shots == (num_fewshot or 0), "few-shot examples are chat turns (fewshot_as_multiturn), as lm-eval's"


def test_repeats_sample_again_and_resume_adds_nothing_to_a_complete_run(mock, offline_env, tmp_path):
    first = nel_run(mock, URI, tmp_path, offline_env, "--repeats", "3", "--max-problems", "4", "--run-id", "r")
    assert_ok(first)
    steps = nel_steps(tmp_path)
    assert [(s["task_idx"], s["repeat"]) for s in steps] == [(i, r) for i in range(4) for r in range(3)]
    assert {s["request_seed"] for s in steps} == {LM_EVAL_SEED, LM_EVAL_SEED + 1, LM_EVAL_SEED + 2}
    again = nel_run(mock, URI, tmp_path, offline_env, "--repeats", "3", "--max-problems", "4", "--run-id", "r",
                    "--resume")
    assert_ok(again)
    assert len(nel_steps(tmp_path)) == 12


def test_resuming_with_other_prompts_is_refused(mock, offline_env, tmp_path):
    assert_ok(nel_run(mock, URI, tmp_path, offline_env, "--max-problems", "2", "--run-id", "r"))
    other = nel_run(mock, f"{URI}&num_fewshot=1", tmp_path, offline_env, "--max-problems", "2", "--run-id", "r",
                    "--resume")
    assert other.returncode == 2, other.stdout + other.stderr


def test_memoised_templates_render_what_lm_eval_renders():
    """nel keeps lm-eval's compiled Jinja templates by their source (lm-eval compiles one per field per document);
    each string is still the one lm-eval's own ``apply_template`` renders, an undefined field still fails."""
    from jinja2 import UndefinedError
    from lm_eval import utils

    from workbench.lmeval.loading import memoise_templates

    before = utils.apply_template
    try:
        memoise_templates()
        memoised = utils.apply_template
        memoise_templates()
        assert utils.apply_template is memoised, "installed once"
        own = memoised.__wrapped__
        docs = [json.loads(line) for line in (FIXTURES / f"{TASK}.test.jsonl").read_text().splitlines()[:5]]
        for template in ("Question: {{question}}\nAnswer:", "{{answer}}",
                         "{{answer | regex_replace('#### ', '')}}", "{{question.split(' ')[0]}}"):
            for doc in docs:
                assert memoised(template, doc) == own(template, doc)
        with pytest.raises(UndefinedError):
            memoised("{{no_such_field}}", docs[0])
    finally:
        utils.apply_template = before


class TestRefusals:
    """What nel cannot run, or cannot find, is one line naming it (exit 2 at the CLI), before any model call."""

    def test_an_unknown_task_names_the_closest(self, offline_env):
        line = refusal(f"lm-eval://nel_gsm8k_mni?include_path={FIXTURES}")
        assert "unknown lm-eval task 'nel_gsm8k_mni'" in line and "closest: nel_gsm8k_mini" in line

    def test_a_log_likelihood_task_is_refused_saying_why_before_its_data_is_read(self, offline_env, tmp_path):
        (tmp_path / "mc.yaml").write_text(
            (FIXTURES / "nel_gsm8k_mini.yaml").read_text().replace(f"task: {TASK}", "task: nel_mc_fixture")
            .replace("output_type: generate_until", "output_type: multiple_choice"))
        line = refusal(f"lm-eval://nel_mc_fixture?include_path={tmp_path}")
        assert "is multiple_choice" in line and "only generate_until tasks run here" in line

    def test_data_that_cannot_be_loaded_offline_names_the_dataset(self, offline_env, tmp_path):
        (tmp_path / "hub.yaml").write_text(
            "task: nel_hub_fixture\ndataset_path: nel-test-org/not-cached\noutput_type: generate_until\n"
            "test_split: test\ndoc_to_text: '{{q}}'\ndoc_to_target: '{{a}}'\n"
            "metric_list:\n  - metric: exact_match\n")
        line = refusal(f"lm-eval://nel_hub_fixture?include_path={tmp_path}")
        assert "cannot load the data of lm-eval task 'nel_hub_fixture' (dataset nel-test-org/not-cached)" in line
        assert "HF_HUB_OFFLINE" in line

    def test_without_lm_eval_the_line_names_the_extra(self, offline_env, tmp_path):
        # lm_eval as if it were not installed: find_spec finds no such package
        code = ("import importlib.util, sys\n"
                "real = importlib.util.find_spec\n"
                "importlib.util.find_spec = lambda name, *a: None if name == 'lm_eval' else real(name, *a)\n"
                "from workbench.cli import main\n"
                f"sys.exit(main(['eval', 'run', '-b', {URI!r}, '--model-url', 'http://127.0.0.1:9/v1',"
                " '--model-id', 'm', '--no-progress']))\n")
        import subprocess
        import sys

        proc = subprocess.run([sys.executable, "-c", code], cwd=FIXTURES, env=offline_env, capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.strip() == (f"nel eval run: {URI}: needs the [lm-eval] extra: "
                                       "pip install 'nel-workbench[lm-eval]'")


def refusal(uri: str) -> str:
    """The one line building ``uri`` fails with (in this process: lm-eval is imported once)."""
    from workbench.lmeval.scheme import LMEVAL_SCHEME

    with pytest.raises(UsageError) as caught:
        LMEVAL_SCHEME.build(uri)
    assert "\n" not in str(caught.value)
    return str(caught.value)
