"""The mock model's skill profile: per-task pass probabilities and deterministic attempts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from workbench.environments import get_environment
from workbench.mock.skill import P_HIGH, P_LOW, SkillProfile


@pytest.fixture(scope="module")
def gsm8k_keys() -> list[str]:
    env = get_environment("gsm8k")
    return [f"gsm8k:{env.seed(i).task_id}" for i in range(len(env))]


def test_profile_over_gsm8k_has_always_never_and_sometimes_tasks(gsm8k_keys: list[str]) -> None:
    profile = SkillProfile(0)
    ps = [profile.pass_probability(k) for k in gsm8k_keys]
    always = sum(p == 1.0 for p in ps) / len(ps)
    never = sum(p == 0.0 for p in ps) / len(ps)
    sometimes = [p for p in ps if 0.0 < p < 1.0]
    assert len(ps) == 1319
    assert 0.15 < always < 0.25
    assert 0.10 < never < 0.20
    assert len(sometimes) / len(ps) > 0.55
    assert all(P_LOW < p < P_HIGH for p in sometimes)
    # spread over the interval, not bunched
    assert min(sometimes) < 0.15 and max(sometimes) > 0.85


def test_different_skill_seeds_give_different_profiles(gsm8k_keys: list[str]) -> None:
    a, b = SkillProfile(0), SkillProfile(1)
    differ = sum(a.pass_probability(k) != b.pass_probability(k) for k in gsm8k_keys)
    assert differ > len(gsm8k_keys) // 2


def test_same_task_seed_and_attempt_always_get_the_same_verdict(gsm8k_keys: list[str]) -> None:
    first, second = SkillProfile(3), SkillProfile(3)
    for key in gsm8k_keys[:200]:
        for attempt in range(4):
            assert first.attempt(key, 7, attempt) == second.attempt(key, 7, attempt)


def test_verdicts_do_not_depend_on_the_process_hash_seed(gsm8k_keys: list[str]) -> None:
    key = gsm8k_keys[5]
    code = (
        "from workbench.mock.skill import SkillProfile;"
        f"a = SkillProfile(11).attempt({key!r}, None, 2); print(a.correct, a.choice)"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        ).stdout
        for seed in ("1", "2")
    }
    here = SkillProfile(11).attempt(key, None, 2)
    assert outputs == {f"{here.correct} {here.choice}\n"}


def test_always_tasks_always_pass_and_never_tasks_never_pass(gsm8k_keys: list[str]) -> None:
    profile = SkillProfile(0)
    always = [k for k in gsm8k_keys if profile.pass_probability(k) == 1.0][:50]
    never = [k for k in gsm8k_keys if profile.pass_probability(k) == 0.0][:50]
    for attempt in range(20):
        assert all(profile.attempt(k, None, attempt).correct for k in always)
        assert not any(profile.attempt(k, None, attempt).correct for k in never)


def test_sometimes_task_passes_at_about_its_probability(gsm8k_keys: list[str]) -> None:
    profile = SkillProfile(0)
    key = min(gsm8k_keys, key=lambda k: abs(profile.pass_probability(k) - 0.5))
    rate = sum(profile.attempt(key, None, a).correct for a in range(4000)) / 4000
    assert abs(rate - profile.pass_probability(key)) < 0.04


def test_request_seed_and_attempt_both_change_the_draw(gsm8k_keys: list[str]) -> None:
    profile = SkillProfile(0)
    key = gsm8k_keys[0]
    by_attempt = {profile.attempt(key, None, a).choice for a in range(10)}
    by_seed = {profile.attempt(key, s, 0).choice for s in range(10)}
    assert len(by_attempt) == 10 and len(by_seed) == 10
