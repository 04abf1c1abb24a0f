"""`scoring:` in a config: several metrics per benchmark, a judge on a second service, strict checks."""

import textwrap

import pytest

from workbench.engine.metrics import DEFAULT, MetricSpec
from workbench.errors import UsageError
from workbench.scoring.judge import DEFAULT_TEMPLATE
from workbench.spec import load_config, metric_specs

BASE = """\
services:
  solver:
    url: http://127.0.0.1:8000/v1
    model: model-under-test
  judge:
    url: http://127.0.0.1:8001/v1
    model: judge-model
    generation: {temperature: 0}
benchmarks:
  - name: element_symbols_qa
    solver: {type: simple, service: solver}
    scoring:
      metrics:
        - type: f1
          params: {threshold: 0.5}
        - type: exact
          name: exact_ci
          params: {case_sensitive: false}
        - type: judge
          name: correctness
          service: judge
"""


def load(tmp_path, text):
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(text))
    return load_config(path)


def listed_specs(config) -> list[MetricSpec]:
    """The metrics of the config's first benchmark, which lists ``scoring:``."""
    specs = metric_specs(config, config.benchmarks[0])
    assert specs is not None
    return specs


def error_of(tmp_path, text):
    with pytest.raises(UsageError) as info:
        load(tmp_path, text)
    return str(info.value)


def test_metrics_become_specs_with_the_benchmark_scorer_first(tmp_path):
    config, _ = load(tmp_path, BASE)
    specs = listed_specs(config)
    assert [(s.name, s.type) for s in specs] == [("normalized", DEFAULT), ("f1", "f1"), ("exact_ci", "exact"),
                                                 ("correctness", "judge")]
    assert specs[1].params == {"threshold": 0.5} and specs[2].params == {"case_sensitive": False}
    judge = specs[3].judge
    assert judge is not None and (judge.model_id, judge.temperature) == ("judge-model", 0.0)
    assert specs[3].template == DEFAULT_TEMPLATE


def test_without_defaults_the_first_listed_metric_is_primary(tmp_path):
    config, _ = load(tmp_path, BASE.replace("    scoring:\n", "    scoring:\n      include_defaults: false\n"))
    assert listed_specs(config)[0].name == "f1"


def test_a_benchmark_without_scoring_keeps_its_own_scorer_alone(tmp_path):
    config, _ = load(tmp_path, BASE.split("    scoring:")[0])
    assert metric_specs(config, config.benchmarks[0]) is None


@pytest.mark.parametrize(("old", "new", "where", "what"), [
    ("        - type: f1\n", "        - type: bleu\n", ":14: benchmarks.0.scoring.metrics.0.type", "expected one of"),
    ("{threshold: 0.5}", "{thresh: 0.5}", ":15: benchmarks.0.scoring.metrics.0.params.thresh",
     "has no parameter 'thresh'; its parameters: threshold"),
    ("{case_sensitive: false}", "{case_sensitive: 1}", "benchmarks.0.scoring.metrics.1.params.case_sensitive",
     "expected true or false"),
    ("          service: judge\n", "          service: nobody\n", ":21: benchmarks.0.scoring.metrics.2.service",
     "no service named 'nobody'"),
    ("          service: judge\n", "", ":19: benchmarks.0.scoring.metrics.2", "missing required key 'service'"),
    ("          service: judge\n", "          service: solver\n", ":21: benchmarks.0.scoring.metrics.2.service",
     "would grade itself"),
    ("          name: exact_ci\n", "          name: f1\n", ":17: benchmarks.0.scoring.metrics.1.name",
     "already named 'f1'"),
    ("          name: exact_ci\n", "          name: normalized\n", ":17: benchmarks.0.scoring.metrics.1.name",
     "already names the benchmark's own scorer"),
    ("          params: {threshold: 0.5}\n", "          service: judge\n",
     ":15: benchmarks.0.scoring.metrics.0.service", "only a judge metric takes 'service'"),
    ("          service: judge\n", "          service: judge\n          prompt: Grade this.\n",
     ":22: benchmarks.0.scoring.metrics.2.prompt", "must contain {response}"),
    ("          service: judge\n", "          service: judge\n          params: {temperature: 0}\n",
     "benchmarks.0.scoring.metrics.2.params.temperature", "a judge metric takes no params"),
    ("    scoring:\n", "    scoring:\n      weights: 1\n", ":13: benchmarks.0.scoring.weights", "unknown key"),
])
def test_each_scoring_mistake_is_named_by_file_line_and_dot_path(tmp_path, old, new, where, what):
    assert old in BASE
    message = error_of(tmp_path, BASE.replace(old, new))
    assert where in message and what in message, message


def test_the_same_model_under_another_service_name_is_still_self_judging(tmp_path):
    text = BASE.replace("http://127.0.0.1:8001/v1\n    model: judge-model",
                        "http://127.0.0.1:8000/v1\n    model: model-under-test")
    assert "would grade itself" in error_of(tmp_path, text)


def test_allow_self_judge_lets_the_solver_grade_its_own_answers(tmp_path):
    text = BASE.replace("          service: judge\n", "          service: solver\n          allow_self_judge: true\n")
    config, _ = load(tmp_path, text)
    assert listed_specs(config)[-1].judge.model_id == "model-under-test"


def test_no_metric_at_all_is_refused(tmp_path):
    text = BASE.split("    scoring:")[0] + "    scoring: {include_defaults: false}\n"
    assert "nothing would score the answers" in error_of(tmp_path, text)


def test_a_custom_judge_prompt_is_kept(tmp_path):
    prompt = "          prompt: 'Grade: {response}'\n"
    text = BASE.replace("          service: judge\n", "          service: judge\n" + prompt)
    config, _ = load(tmp_path, text)
    assert listed_specs(config)[-1].template == "Grade: {response}"
