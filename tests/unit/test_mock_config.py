"""The mock model's settings and flags: validation, and flags that round-trip a config."""

from __future__ import annotations

import argparse

import pytest

from workbench.errors import UsageError
from workbench.mock.cli import add_arguments, config_from_args, config_to_argv, ready_line
from workbench.mock.config import MockConfig


def _parse(argv: list[str]) -> MockConfig:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return config_from_args(parser.parse_args(argv))


def test_no_flags_give_the_default_config() -> None:
    assert _parse([]) == MockConfig()


def test_flags_round_trip_a_config() -> None:
    config = MockConfig(
        host="0.0.0.0",
        port=8123,
        latency_ms=12.5,
        jitter_ms=3.0,
        fail_rate=0.25,
        faults=("429", "timeout"),
        fault_seed=4,
        skill_seed=-2,
        retry_after_s=7,
        hang_s=0.5,
        context_window=100,
        model_name="demo",
        benchmarks=("gsm8k",),
    )
    assert _parse(config_to_argv(config)) == config


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"fail_rate": 1.5}, "--fail-rate must be between 0 and 1"),
        ({"fail_rate": -0.1}, "--fail-rate must be between 0 and 1"),
        ({"faults": ("429", "boom")}, "unknown fault 'boom'"),
        ({"fail_rate": 0.5, "faults": ()}, "enables no fault"),
        ({"port": 70000}, "out of range"),
        ({"latency_ms": -1.0}, "--latency-ms must be >= 0"),
        ({"context_window": 0}, "--context-window must be >= 1"),
    ],
)
def test_invalid_settings_are_refused_with_a_one_line_message(overrides: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message) as caught:
        MockConfig(**overrides).validate()
    assert "\n" not in str(caught.value)


def test_ready_line_names_the_base_url_and_skill_seed() -> None:
    assert (
        ready_line("127.0.0.1", 8000, 3)
        == "nel mock model listening on http://127.0.0.1:8000/v1 (skill-seed 3)"
    )
    assert ready_line("::1", 8000, 0).startswith("nel mock model listening on http://[::1]:8000/v1")


def test_the_echo_headers_switch_round_trips_and_is_off_by_default() -> None:
    """``--echo-headers`` (a labelled test feature: replies quote the request, API key included)."""
    assert MockConfig().echo_headers is False and "--echo-headers" not in config_to_argv(MockConfig())
    config = MockConfig(echo_headers=True)
    assert "--echo-headers" in config_to_argv(config)
    assert _parse(config_to_argv(config)) == config
