"""Benchmark URI schemes: found without the caller importing the package that serves them, and pluggable
by other packages through the ``nel_workbench.schemes`` entry points."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from workbench.environments import schemes
from workbench.environments.registry import UnknownBenchmark, get_environment, resolve_benchmark
from workbench.errors import UsageError


@pytest.fixture
def clean_schemes(monkeypatch):
    monkeypatch.setattr(schemes, "_SCHEMES", {})


def test_gym_is_found_without_importing_gym_first():
    code = ("import sys; from workbench.environments.registry import resolve_benchmark;"
            "assert 'workbench.gym' not in sys.modules;"
            "print(resolve_benchmark('gym://127.0.0.1:80'));"
            "assert 'workbench.gym.remote' not in sys.modules")  # checking a URL builds nothing
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "gym://127.0.0.1:80"


def test_builtin_fallback_without_entry_points(clean_schemes, monkeypatch):
    monkeypatch.setattr(schemes, "_entry_points", dict)
    from workbench.gym.scheme import GYM_SCHEME

    assert schemes.find_scheme("gym") is GYM_SCHEME
    assert schemes.known_schemes() == ["gym", "lm-eval"]


def test_unknown_scheme_message_is_unchanged(clean_schemes, monkeypatch):
    monkeypatch.setattr(schemes, "_entry_points", dict)
    with pytest.raises(UsageError, match=r"^bad benchmark URL 'gum://h:1': scheme: 'gum' is not gym:// or lm-eval://$"):
        resolve_benchmark("gum://h:1")
    with pytest.raises(UnknownBenchmark):
        get_environment.__wrapped__("gum://h:1")


def test_register_scheme_in_process(clean_schemes):
    built: list[str] = []

    def build(uri: str):
        built.append(uri)
        return get_environment("gsm8k")

    def check(uri: str) -> None:
        if uri.endswith("/bad"):
            raise UsageError(f"bad benchmark URL {uri!r}: path: no")

    schemes.register_scheme("demo", build, check)
    assert resolve_benchmark("demo://x") == "demo://x"
    with pytest.raises(UsageError, match="path: no"):
        resolve_benchmark("demo://x/bad")
    assert get_environment.__wrapped__("demo://y").name == "gsm8k"
    assert built == ["demo://y"]


def test_a_third_party_entry_point(clean_schemes, tmp_path: Path, monkeypatch):
    (tmp_path / "demo_plugin.py").write_text(
        "from workbench.environments import get_environment\n"
        "from workbench.environments.schemes import Scheme\n"
        "SCHEME = Scheme(build=lambda uri: get_environment('gsm8k'))\n")
    dist = tmp_path / "demo_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: demo-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[nel_workbench.schemes]\ndemo = demo_plugin:SCHEME\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "demo" in schemes.known_schemes()
    assert resolve_benchmark("demo://anything") == "demo://anything"
    assert get_environment.__wrapped__("demo://anything").name == "gsm8k"
    with pytest.raises(UsageError, match=r"scheme: 'gum' is not demo:// or gym:// or lm-eval://$"):
        resolve_benchmark("gum://h:1")
