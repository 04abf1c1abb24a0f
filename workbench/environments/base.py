"""The environment contract: what a benchmark must provide to the engine.

An environment turns a problem index into a prompt (``seed``) and a model
response into a reward (``verify``). The engine, the HTTP server and the shard
workers all drive environments through this one interface.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from workbench.environments.coroutines import blocking
from workbench.types import BenchmarkFigures, Message, VerifyResult
from workbench.types import SeedResult as _SeedResult

__all__ = ["AnswerKeyEntry", "BenchmarkFigures", "Capabilities", "EvalEnvironment", "Message", "ScoringMode",
           "SeedResult", "VerifyResult", "too_long"]


class SeedResult(_SeedResult):
    """One problem, ready to send to a model (``workbench.types.SeedResult``), built from as little as NeMo
    Evaluator's ``SeedResult(prompt=…, expected_answer=…, metadata=…)``: the messages default to the prompt as
    one user message, and the task id to the hash of the prompt and expected answer (content, not position, as
    the built-in benchmarks' ids are), so runs of the same problems pair whoever wrote the environment."""

    __slots__ = ()

    def __init__(self, prompt: str, messages: Sequence[Message] | None = None, *, expected_answer: str,
                 task_id: str | None = None, metadata: dict[str, Any] | None = None) -> None:
        if task_id is None:
            from workbench.environments.dataset import task_id_of  # dataset imports this module

            task_id = task_id_of({"prompt": prompt, "expected_answer": expected_answer})
        super().__init__(prompt=prompt, expected_answer=expected_answer, task_id=task_id,
                         messages=({"role": "user", "content": prompt},) if messages is None else tuple(messages),
                         metadata={} if metadata is None else metadata)


def too_long(chars: int, limit: int) -> VerifyResult:
    """The verdict on a response too long to score (``EvalEnvironment.max_response_chars``): reward 0, and why,
    so it is never mistaken for a wrong answer; a reply that long is a degenerate one (a format error)."""
    return VerifyResult(0.0, None, {"method": "too_long", "response_chars": chars, "max_response_chars": limit,
                                    "reason": f"response exceeds {limit} characters ({chars}): not scored "
                                              "(the benchmark's max_response_chars; nel serve --max-response-chars)"},
                        {"failure_category": "format_error"})


@dataclass(frozen=True, slots=True)
class AnswerKeyEntry:
    """What the built-in mock model knows about one problem.

    ``question`` is the problem text as it appears verbatim inside the prompt;
    ``solution`` is an optional worked solution the mock can echo before its
    final answer.
    """

    question: str
    answer: str
    solution: str | None = None


ScoringMode = Literal["inline", "thread", "process"]


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What an environment does beyond ``seed`` and ``verify``, declared rather than probed for."""

    remote_attempts: bool = False
    """Each attempt has a session of its own (on a server, or in a sandbox): ``attempt_worker()`` opens them and
    verifies awaitably."""
    sandboxed: bool = False
    """Attempts run in sandboxes: ``sandbox_identity()`` is part of the run's identity."""
    tools: bool = False
    """It can offer an agent its server's tools: ``offer_tools()``."""
    scoring: ScoringMode = "thread"
    """Where ``verify`` runs (``workbench.engine.verify_pool``): ``inline`` (a cheap pure function), ``thread``
    (it may block, or it is a user's code), ``process`` (CPU-heavy)."""


class EvalEnvironment(ABC):
    """A benchmark the engine can evaluate.

    Subclasses implement ``seed``, ``verify`` and ``__len__``. ``name`` and
    ``data_hash`` identify the benchmark and the exact data it serves, so a run
    can be refused when resumed against different data.
    """

    name: str = "unnamed"
    requires_sandbox: bool = False
    """The engine refuses to start a run of such a benchmark until sandboxed execution exists."""
    max_response_chars: int | None = 512 * 1024
    """The longest response worth scoring, in characters (``None``: no bound). A scorer's cost grows with
    the text (a 7 MB response costs seconds of regex), and no real answer comes near this: ``nel serve``
    answers a longer one with reward 0 and the reason rather than scoring it. A benchmark whose answers
    are long (whole programs, essays) sets its own."""

    capabilities: Capabilities = Capabilities()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """An ``async def seed`` or ``verify`` (NeMo Evaluator's way) becomes the plain call the engine, the server
        and the scoring pools make, run on one event loop of its own (``workbench.environments.coroutines``): the
        one place both kinds are reconciled."""
        super().__init_subclass__(**kwargs)
        for name in ("seed", "verify"):
            method = cls.__dict__.get(name)
            if method is not None:
                setattr(cls, name, blocking(method))

    figures_source: ClassVar[str | None] = None
    """Whose run-level figures ``benchmark_figures`` computes (``"OpenAI simple-evals"``, ``"lm-eval"``); ``None``
    (the default): the benchmark has none beyond the mean reward. Declared on the class, so the end-of-run summary
    knows without loading the benchmark's data (the class is found from the run's benchmark name:
    ``registry.environment_class``) and reads the steps' details only for a benchmark that has figures."""

    @abstractmethod
    def __len__(self) -> int: ...

    @abstractmethod
    def seed(self, idx: int) -> _SeedResult:
        """Return problem ``idx`` (0-based) as a prompt with its expected answer."""

    @abstractmethod
    def verify(self, response: str, expected: str, **metadata: Any) -> VerifyResult:
        """Score ``response`` against ``expected``."""

    @property
    def data_hash(self) -> str:
        """A hash of everything that decides prompts and expected answers."""
        return ""

    @property
    def dataset_identity(self) -> dict[str, str] | None:
        """Where a hub dataset's rows came from (``{"source": URI, "revision": commit sha}``), for the run's
        identity; ``None`` for data that is its own (a local file)."""
        return None

    def check_answer_key(self, idx: int) -> tuple[bool, str]:
        """Does problem ``idx``'s expected answer earn full marks? ``(ok, how it was checked)`` for ``nel validate``.

        The default scores the expected answer with ``verify``; a benchmark that cannot
        score here (code that needs a sandbox) overrides it with the checks it can make.
        """
        seed = self.seed(idx)
        verdict = self.verify(seed.expected_answer, seed.expected_answer, **seed.metadata)
        return verdict.reward >= 1.0, f"scores {verdict.reward:.1f} via {verdict.scoring_details.get('method')}"

    def attempt_worker(self) -> AbstractAsyncContextManager[Any]:
        """Per engine worker, what opens each attempt's session (``Capabilities.remote_attempts``)."""
        raise NotImplementedError(f"{self.name}: its attempts have no sessions of their own")

    def sandbox_identity(self) -> dict[str, Any]:
        """The sandbox its attempts run in, for the run's identity (``Capabilities.sandboxed``)."""
        raise NotImplementedError(f"{self.name}: its attempts run in no sandbox")

    def offer_tools(self) -> None:
        """Offer an agent the tools of the server behind it (``Capabilities.tools``)."""
        from workbench.errors import UsageError

        raise UsageError(f"{self.name}: only a gym:// benchmark (protocol=native) offers its server's tools")

    @classmethod
    def benchmark_figures(cls, details: Iterable[Mapping[str, Any]]) -> BenchmarkFigures | None:
        """The run's figures as the benchmark's authors report them, where they are not a mean of one per-step
        reward (``figures_source`` declares that there are some): called by the end-of-run summary
        (``workbench.analysis.figures.run_figures``, into ``summary.json``, the export's bundle, ``nel eval run``'s
        print and ``nel eval stats``).

        ``details`` is every step's scoring details (``steps.scoring_details``: the primary metric's), parsed,
        streamed from the store in no set order and once: fold them in one pass, holding counts, never the list.
        Steps that have no verdict to count (a failed exchange, a scorer or judge error) are among them; which
        count is the benchmark's to say, in ``BenchmarkFigures.over``, with the count in ``n_steps``. With repeats,
        each benchmark does as its authors' harness does with them (say which in the override's docstring).
        ``None``: no figures (the default, and when no step has what they are computed from)."""
        return None

    def answer_key(self) -> Iterator[AnswerKeyEntry]:
        """Yield the answer key the built-in mock model uses (optional)."""
        return iter(())

    def describe(self) -> dict[str, Any]:
        """Facts for ``nel list``: name, size and whatever else is known."""
        return {"name": self.name, "size": len(self)}
