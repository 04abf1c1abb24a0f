"""A lean core and its extras: without an extra, the command that needs it says so in one line (with the install
command) and exits 2 before anything starts; importing the core imports none of them.

Each case runs in a subprocess in which the extra's modules are absent (``sys.modules[name] = None``: what
``importlib`` sees once a package is uninstalled), so the test does not depend on what this venv has.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.extras import EXTRA_OF, MODULES_OF, MissingExtra, install_command, needs_extra

HIDE_AND_RUN = """\
import sys
for name in sys.argv[1].split(","):
    if name:
        sys.modules[name] = None
from workbench.cli import main
sys.exit(main(sys.argv[2:]))
"""

HEAVY = ("textual", "ipywidgets", "altair", "anywidget", "vl_convert", "fastapi", "uvicorn", "starlette", "docker",
         "math_verify", "ray", "sympy")
"""What a front end or an integration brings; none of it is imported by the core."""

MODEL = ("--model-url", "http://127.0.0.1:9/v1", "--model-id", "m")


def nel_without(extra: str, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``nel ARGV`` in a process where the modules of ``extra`` are not installed."""
    return subprocess.run([sys.executable, "-c", HIDE_AND_RUN, ",".join(MODULES_OF[extra]), *argv], cwd=cwd,
                          env={**os.environ, "NO_COLOR": "1"}, capture_output=True, text=True, timeout=120)


def one_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.parametrize(("extra", "argv", "line"), [
    ("tui", ("tui",), "nel tui: needs the [tui] extra: pip install 'nel-workbench[tui]'"),
    ("serve", ("serve", "-b", "gsm8k"),
     "nel serve: needs the [serve] extra: pip install 'nel-workbench[serve]'"),
    ("docker", ("sandbox", "image"),
     "nel sandbox image: needs the [docker] extra: pip install 'nel-workbench[docker]'"),
    ("docker", ("sandbox", "clean"),
     "nel sandbox clean: needs the [docker] extra: pip install 'nel-workbench[docker]'"),
    ("docker", ("sandbox", "engine", "start"),
     "nel sandbox engine start: needs the [docker] extra: pip install 'nel-workbench[docker]'"),
    ("docker", ("serve", "-b", "humaneval", "--sandbox", "docker"),
     "nel serve: the docker sandbox needs the [docker] extra: pip install 'nel-workbench[docker]'"),
    ("ray", ("eval", "run", "-b", "gsm8k", "--engine", "ray", "--shards", "2", "--no-progress", *MODEL),
     "nel eval run: --engine ray needs the [ray] extra: pip install 'nel-workbench[ray]'"),
    ("hub", ("benchmarks", "pull", "mmlu"),
     "nel benchmarks: pull needs the [hub] extra: pip install 'nel-workbench[hub]'"),
])
def test_a_command_without_its_extra_says_so_in_one_line(extra: str, argv: tuple[str, ...], line: str,
                                                           tmp_path: Path) -> None:
    assert one_line(nel_without(extra, *argv, cwd=tmp_path)) == line
    assert list(tmp_path.iterdir()) == []  # nothing started: no store, no output directory


def test_a_hub_benchmark_not_pulled_names_the_hub_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Frozen data and local files load without huggingface_hub; the hub itself needs it."""
    monkeypatch.setenv("NEL_DATA_DIR", str(tmp_path / "data"))
    line = one_line(nel_without("hub", "eval", "run", "-b", "mmlu", "--no-progress", *MODEL, cwd=tmp_path))
    assert line == ("nel eval run: dataset hf://cais/mmlu?split=test&subset=all&revision=main needs the [hub] extra: "
                    "pip install 'nel-workbench[hub]'")


def test_a_run_in_a_docker_sandbox_fails_before_it_starts(tmp_path: Path) -> None:
    proc = nel_without("docker", "eval", "run", "-b", "humaneval", "--sandbox", "docker", "--no-progress", *MODEL,
                       cwd=tmp_path)
    assert one_line(proc) == ("nel eval run: the docker sandbox needs the [docker] extra: "
                              "pip install 'nel-workbench[docker]'")
    assert not (tmp_path / "nel-results" / "nel.duckdb").exists()


SUITE = """\
services:
  solver: {type: api, url: "http://127.0.0.1:9/v1", model: m}
benchmarks:
  - name: gsm8k
    max_problems: 2
    solver: {type: simple, service: solver}
  - name: gsm8k
    max_problems: 2
    solver: {type: simple, service: solver}
    scoring:
      metrics:
        - {type: math}
output: {dir: out}
"""


def test_a_suite_with_a_math_metric_fails_before_its_first_benchmark(tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text(SUITE)
    proc = nel_without("math", "eval", "run", "suite.yaml", "--no-progress", cwd=tmp_path)
    assert one_line(proc) == "nel eval run: the math scorer needs the [math] extra: pip install 'nel-workbench[math]'"
    assert not (tmp_path / "out").exists()


def test_a_benchmark_scored_by_math_verify_fails_as_it_is_built(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from workbench.environments.dataset import DatasetEnvironment
    from workbench.scoring import get_scorer

    (tmp_path / "rows.jsonl").write_text('{"q": "1/2?", "a": "0.5"}\n')
    (tmp_path / "benchmark.toml").write_text('name = "halves"\ndataset = "rows.jsonl"\ninput_field = "q"\n'
                                             'target_field = "a"\nscorer = "math"\nprompt = "{q}"\n')
    monkeypatch.setitem(sys.modules, "math_verify", None)
    message = "the math scorer needs the [math] extra: pip install 'nel-workbench[math]'"
    with pytest.raises(MissingExtra) as caught:
        DatasetEnvironment.from_definition(tmp_path / "benchmark.toml")
    assert str(caught.value) == message and caught.value.exit_code == 2
    with pytest.raises(MissingExtra, match=r"needs the \[math\] extra"):
        get_scorer("math")


def test_the_ray_engine_says_so_where_it_imports_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    from workbench.workers.ray_engine import import_ray

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(MissingExtra) as caught:
        import_ray()
    assert str(caught.value) == "--engine ray needs the [ray] extra: pip install 'nel-workbench[ray]'"


@pytest.mark.parametrize("module", MODULES_OF["notebook"])
def test_importing_the_widgets_without_the_notebook_extra_is_an_import_error_naming_it(module: str) -> None:
    code = (f"import sys; sys.modules[{module!r}] = None\n"
            "try:\n    import workbench.widgets\n"
            "except ImportError as exc:\n    print(type(exc).__name__, exc.name, exc, sep='|')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert proc.stdout.strip() == (f"MissingExtra|{module}|workbench.widgets needs the [notebook] extra: "
                                   "pip install 'nel-workbench[notebook]'")


def test_every_extra_is_one_of_the_distribution() -> None:
    import tomllib

    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"]
    assert set(EXTRA_OF.values()) <= set(extras)
    assert extras["all"] == [f"nel-workbench[{','.join(sorted(set(EXTRA_OF.values()), key=list(extras).index))}]"]
    core = " ".join(pyproject["project"]["dependencies"]).lower()
    for heavy in ("textual", "ipywidgets", "altair", "anywidget", "vl-convert", "fastapi", "uvicorn", "docker",
                  "math-verify", "ray"):
        assert heavy not in core
    assert "pydantic" in core


def test_needs_extra_turns_only_an_extras_import_into_one() -> None:
    with pytest.raises(MissingExtra) as caught, needs_extra("the thing"):
        raise ModuleNotFoundError("No module named 'fastapi'", name="fastapi.responses")
    assert (caught.value.extra, caught.value.name) == ("serve", "fastapi.responses")
    with pytest.raises(ModuleNotFoundError), needs_extra("the thing"):
        raise ModuleNotFoundError("No module named 'nothing_of_ours'", name="nothing_of_ours")
    assert install_command("all") == "pip install 'nel-workbench[all]'"


def test_importing_the_core_imports_no_front_end_or_integration() -> None:
    code = ("import sys\n"
            "import workbench, workbench.cli, workbench.engine, workbench.store, workbench.runs, workbench.spec\n"
            "import workbench.scoring, workbench.stats, workbench.analysis, workbench.sandbox, workbench.workers\n"
            "import workbench.mock, workbench.types, workbench.export, workbench.gym, workbench.environments\n"
            "import workbench.solvers, workbench.model, workbench.model.client\n"
            f"print(','.join(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert proc.stdout.strip() == ""


def test_the_cli_parser_imports_no_front_end_or_integration() -> None:
    code = ("import sys\nfrom workbench.cli import build_parser\n"
            "build_parser().parse_args(['eval', 'run', '-b', 'gsm8k'])\n"
            f"print(','.join(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert proc.stdout.strip() == ""


def test_the_demo_runs_with_no_extra_installed(tmp_path: Path) -> None:
    """The core alone evaluates: the mock model, the engine, the store, the summary and the export."""
    every = ",".join(EXTRA_OF)
    proc = subprocess.run([sys.executable, "-c", HIDE_AND_RUN, every, "demo"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "NO_COLOR": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "steps    800/800" in proc.stdout and (tmp_path / "nel-demo" / "nel.duckdb").exists()


def test_environ_set_holds_a_variable_for_the_block_and_restores_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from workbench.extras import environ_set

    monkeypatch.delenv("NEL_TEST_VAR", raising=False)
    monkeypatch.setenv("NEL_TEST_SET", "before")
    with environ_set("NEL_TEST_VAR", "1"), environ_set("NEL_TEST_SET", "during"):
        assert os.environ["NEL_TEST_VAR"] == "1" and os.environ["NEL_TEST_SET"] == "during"
    assert "NEL_TEST_VAR" not in os.environ and os.environ["NEL_TEST_SET"] == "before"
