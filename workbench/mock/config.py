"""Settings of the built-in mock model, shared by the server, its CLI and ``mock_model()``."""

from __future__ import annotations

from dataclasses import dataclass

from workbench.errors import UsageError

FAULT_KINDS: tuple[str, ...] = ("429", "500", "timeout", "malformed", "truncated")
"""Every fault the mock can inject, in the order ``--faults`` documents them."""


@dataclass(frozen=True, slots=True)
class MockConfig:
    """How the mock model listens, how fast and how reliably it answers, and how skilled it is.

    ``fail_rate`` is the probability that a model request gets one of ``faults``
    (drawn from ``random.Random(fault_seed)``, so a retry can succeed);
    ``skill_seed`` picks the per-task pass probabilities; ``benchmarks`` limits
    the answer key to some built-in benchmarks (``None``: all of them).
    ``echo_headers`` is a labelled test feature: every model reply is the request
    line and headers (a model that repeats its input back, API key included), and
    an unknown URL's 404 quotes the whole request target, query string included,
    so tests can check that no credential the client sent reaches what nel keeps.
    """

    host: str = "127.0.0.1"
    port: int = 0
    latency_ms: float = 0.0
    jitter_ms: float = 0.0
    fail_rate: float = 0.0
    faults: tuple[str, ...] = FAULT_KINDS
    fault_seed: int = 0
    skill_seed: int = 0
    retry_after_s: int = 1
    hang_s: float = 30.0
    context_window: int = 8192
    model_name: str = "nel-mock"
    benchmarks: tuple[str, ...] | None = None
    echo_headers: bool = False

    def validate(self) -> None:
        """Raise ``UsageError`` with a one-line message for the first invalid setting."""
        if not self.host:
            raise UsageError("mock model: --host must not be empty")
        if not 0 <= self.port <= 65535:
            raise UsageError(f"mock model: --port {self.port} is out of range 0..65535")
        if self.latency_ms < 0:
            raise UsageError(f"mock model: --latency-ms must be >= 0, got {self.latency_ms:g}")
        if self.jitter_ms < 0:
            raise UsageError(f"mock model: --jitter must be >= 0, got {self.jitter_ms:g}")
        if not 0.0 <= self.fail_rate <= 1.0:
            raise UsageError(f"mock model: --fail-rate must be between 0 and 1, got {self.fail_rate:g}")
        unknown = [f for f in self.faults if f not in FAULT_KINDS]
        if unknown:
            raise UsageError(
                f"mock model: unknown fault {unknown[0]!r}; known faults: {', '.join(FAULT_KINDS)}"
            )
        if self.fail_rate > 0 and not self.faults:
            raise UsageError("mock model: --fail-rate is above 0 but --faults enables no fault")
        if self.retry_after_s < 0:
            raise UsageError(f"mock model: --retry-after must be >= 0, got {self.retry_after_s}")
        if self.hang_s < 0:
            raise UsageError(f"mock model: --hang-seconds must be >= 0, got {self.hang_s:g}")
        if self.context_window < 1:
            raise UsageError(f"mock model: --context-window must be >= 1, got {self.context_window}")
        if not self.model_name:
            raise UsageError("mock model: --model-name must not be empty")
        if self.benchmarks is not None and not self.benchmarks:
            raise UsageError("mock model: --benchmarks names no benchmark")
