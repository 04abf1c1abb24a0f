"""Benchmarks as environments: ``seed`` a prompt, ``verify`` a response."""

from workbench.environments.base import (
    AnswerKeyEntry,
    EvalEnvironment,
    Message,
    SeedResult,
    VerifyResult,
)
from workbench.environments.registry import (
    UnknownBenchmark,
    benchmark_names,
    get_environment,
    register,
)

__all__ = [
    "AnswerKeyEntry",
    "EvalEnvironment",
    "Message",
    "SeedResult",
    "UnknownBenchmark",
    "VerifyResult",
    "benchmark_names",
    "get_environment",
    "register",
]
