"""Bring your own benchmark: @benchmark + @scorer in the user's own file."""

import textwrap

import pytest

from workbench.environments import get_environment
from workbench.environments.byob import load_benchmark_file
from workbench.errors import UsageError


def user_file(tmp_path, body, name="my_bench.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


HEADER = "from workbench.environments.byob import ScorerInput, benchmark, scorer\n"


def test_a_jsonl_benchmark_seeds_prompts_and_scores_with_the_users_function(tmp_path):
    (tmp_path / "rows.jsonl").write_text('{"question": "2+2?", "answer": "4"}\n{"question": "3+3?", "answer": "6"}\n')
    path = user_file(tmp_path, HEADER + """
        @benchmark(name="byob-add", dataset="rows.jsonl", prompt="Q: {question}\\nA:", target_field="answer",
                   system_prompt="Be terse.")
        @scorer
        def contains(sample: ScorerInput) -> dict:
            \"\"\"Addition facts.\"\"\"
            return {"correct": sample.target in sample.response, "length": len(sample.response)}
        """.replace("\n        ", "\n"))
    assert load_benchmark_file(path) == ["byob-add"]
    env = get_environment("byob-add")
    seed = env.seed(1)
    assert seed.prompt == "Q: 3+3?\nA:" and seed.expected_answer == "6"
    assert seed.messages[0] == {"role": "system", "content": "Be terse."}
    good = env.verify("It is 6.", seed.expected_answer, **seed.metadata)
    assert good.reward == 1.0 and good.scoring_details["metrics"] == {"correct": 1.0, "length": 8.0}
    assert env.verify("It is 5.", seed.expected_answer, **seed.metadata).reward == 0.0
    assert env.verify("", seed.expected_answer, **seed.metadata).reward == 0.0
    assert env.describe()["description"] == "Addition facts." and len(env) == 2


def test_csv_and_callable_datasets_work_too(tmp_path):
    (tmp_path / "rows.csv").write_text("word,target\ncat,c\ndog,d\n")
    path = user_file(tmp_path, HEADER + """
        @benchmark(name="byob-csv", dataset="rows.csv", prompt="First letter of {word}?")
        @scorer
        def first(sample: ScorerInput) -> bool:
            return sample.response.strip().lower() == sample.target

        def rows():
            return [{"n": i, "target": str(i * i)} for i in range(5)]

        @benchmark(name="byob-callable", dataset=rows, prompt="Square {n}")
        @scorer
        def square(sample: ScorerInput) -> float:
            return float(sample.response.strip() == sample.target)
        """.replace("\n        ", "\n"))
    assert load_benchmark_file(path) == ["byob-csv", "byob-callable"]
    csv_env, fn_env = get_environment("byob-csv"), get_environment("byob-callable")
    assert csv_env.seed(0).prompt == "First letter of cat?"
    assert csv_env.verify("C", "c", **csv_env.seed(0).metadata).reward == 1.0
    assert len(fn_env) == 5 and fn_env.verify("16", "16", **fn_env.seed(4).metadata).reward == 1.0


def test_a_row_without_the_target_field_names_the_file_and_line(tmp_path):
    (tmp_path / "rows.jsonl").write_text('{"question": "a", "answer": "1"}\n{"question": "b"}\n')
    user_file(tmp_path, HEADER + """
        @benchmark(name="byob-missing", dataset="rows.jsonl", prompt="{question}", target_field="answer")
        @scorer
        def s(sample):
            return 1.0
        """.replace("\n        ", "\n"))
    load_benchmark_file(tmp_path / "my_bench.py")
    with pytest.raises(UsageError, match=r"rows.jsonl:2: row has no field 'answer'"):
        get_environment("byob-missing")


def test_a_file_that_raises_on_import_reports_the_users_own_traceback(tmp_path):
    path = user_file(tmp_path, "import os\n\ndef helper():\n    return 1 / 0\n\nhelper()\n", name="broken.py")
    with pytest.raises(UsageError) as info:
        load_benchmark_file(path)
    message = str(info.value)
    assert "broken.py raised while loading" in message and "ZeroDivisionError" in message
    assert 'broken.py", line 4, in helper' in message
    assert "importlib" not in message and "workbench" not in message.split("raised")[1]


def test_misuse_of_the_decorators_is_caught_when_the_file_loads(tmp_path):
    user_file(tmp_path, HEADER + "@scorer\ndef two(a, b):\n    return 1\n", name="bad_scorer.py")
    with pytest.raises(UsageError, match="takes exactly one argument"):
        load_benchmark_file(tmp_path / "bad_scorer.py")
    user_file(tmp_path, HEADER + "@benchmark(name='x', dataset='r.jsonl', prompt='{q}')\ndef plain(s):\n    return 1\n",
              name="no_scorer.py")
    with pytest.raises(UsageError, match="decorate a @scorer function"):
        load_benchmark_file(tmp_path / "no_scorer.py")
    user_file(tmp_path, "x = 1\n", name="empty.py")
    with pytest.raises(UsageError, match="defines no @benchmark"):
        load_benchmark_file(tmp_path / "empty.py")


def test_a_scorer_that_fails_on_a_response_scores_it_zero_and_records_why(tmp_path):
    (tmp_path / "rows.jsonl").write_text('{"q": "x", "target": "1"}\n')
    user_file(tmp_path, HEADER + """
        @benchmark(name="byob-raises", dataset="rows.jsonl", prompt="{q}")
        @scorer
        def picky(sample):
            return {"correct": int(sample.response) == 1}
        """.replace("\n        ", "\n"), name="raises.py")
    load_benchmark_file(tmp_path / "raises.py")
    env = get_environment("byob-raises")
    verdict = env.verify("not a number", "1", **env.seed(0).metadata)
    assert verdict.reward == 0.0 and verdict.scoring_details["error"].startswith("ValueError")
    assert env.verify("1", "1", **env.seed(0).metadata).reward == 1.0
