"""``lm-eval://TASK[?…]``: the grammar is checked before anything heavy is imported, and each mistake is one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from workbench.environments.schemes import check_uri, known_schemes
from workbench.errors import UsageError
from workbench.lmeval.environment import generation_settings
from workbench.lmeval.uri import DEFAULT_FEWSHOT_SEED, LmEvalUri, parse_lmeval_uri

ROOT = Path(__file__).resolve().parents[2]


def test_a_bare_task_takes_simple_evaluates_defaults():
    assert parse_lmeval_uri("lm-eval://gsm8k") == LmEvalUri(task="gsm8k", num_fewshot=None, include_path=None,
                                                            fewshot_seed=DEFAULT_FEWSHOT_SEED,
                                                            fewshot_as_multiturn=True)


def test_every_query_key_is_read(tmp_path):
    uri = parse_lmeval_uri(f"lm-eval://my_task?num_fewshot=5&include_path={tmp_path}&fewshot_seed=7"
                           "&fewshot_as_multiturn=false")
    assert (uri.task, uri.num_fewshot, uri.include_path, uri.fewshot_seed, uri.fewshot_as_multiturn) == (
        "my_task", 5, tmp_path, 7, False)


@pytest.mark.parametrize(("uri", "says"), [
    ("lm-eval://gsm8k?shots=5", "unknown query key 'shots'; known keys: num_fewshot, include_path, fewshot_seed"),
    ("lm-eval://gsm8k?num_fewshot=-1", "num_fewshot: expected an integer >= 0, got '-1'"),
    ("lm-eval://gsm8k?num_fewshot=five", "num_fewshot: expected an integer >= 0, got 'five'"),
    ("lm-eval://gsm8k?num_fewshot=1&num_fewshot=2", "num_fewshot is given twice"),
    ("lm-eval://gsm8k?fewshot_as_multiturn=maybe", "fewshot_as_multiturn: expected true or false"),
    ("lm-eval://", "expected lm-eval://TASK with one task or group name"),
    ("lm-eval://a/b", "expected lm-eval://TASK with one task or group name"),
    ("lm-eval://gsm8k?include_path=/no/such/dir", "include_path: /no/such/dir is not a directory"),
])
def test_a_malformed_uri_is_one_line_naming_the_part(uri, says):
    with pytest.raises(UsageError) as caught:
        check_uri(uri)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_lm_eval_is_a_known_scheme():
    assert "lm-eval" in known_schemes()


def test_checking_a_uri_imports_no_part_of_lm_eval():
    code = ("import sys; from workbench.environments.schemes import check_uri; check_uri('lm-eval://gsm8k?num_fewshot=3');"
            "sys.exit('lm_eval imported' if any(m.split('.')[0] == 'lm_eval' for m in sys.modules) else 0)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


class TestGenerationSettings:
    """A task's generation_kwargs become the request's settings exactly as LocalChatCompletion maps them."""

    def test_until_is_stop_and_max_gen_toks_is_max_tokens(self):
        assert generation_settings({"until": ["Q:", "</s>"], "max_gen_toks": 512, "do_sample": False,
                                    "temperature": 0.0}) == {"max_tokens": 512, "temperature": 0.0,
                                                             "stop": ("Q:", "</s>")}

    def test_unset_limits_are_lm_evals_defaults_and_only_four_stops_are_sent(self):
        assert generation_settings({"until": ["a", "b", "c", "d", "e"]}) == {
            "max_tokens": 256, "temperature": 0, "stop": ("a", "b", "c", "d")}

    def test_a_single_until_string_and_other_keys_are_sent_as_they_are(self):
        assert generation_settings({"until": "\n\n", "max_tokens": 9, "top_p": 0.5, "top_k": 3}) == {
            "max_tokens": 9, "temperature": 0, "stop": ("\n\n",), "top_p": 0.5, "extra_body": {"top_k": 3}}
