"""``turn_counter``: at most ``max_turns`` model calls per attempt, whatever the solver.

The call past the limit is not sent: the attempt ends there with ``max_turns_exhausted`` (a failed answer, not an
error). The tool-calling solver has its own ``max_turns`` (turns it plans for, ending the same way when the model
still calls tools at the last one); this one bounds any solver from outside, so whichever limit is lower decides and
both end with the same category.
"""

from __future__ import annotations

from typing import Any, ClassVar

from workbench.model.client import ModelResponse
from workbench.model.failures import FailureCategory
from workbench.model.interceptors.base import InterceptorContext, ModelCall
from workbench.model.interceptors.config import only_keys, positive_int

MAX_TURNS_EXHAUSTED: FailureCategory = "max_turns_exhausted"


class TurnCounter:
    """Counts model calls per attempt; refuses the one past ``max_turns``."""

    name = "turn_counter"
    affects_answers: ClassVar[bool] = True

    def __init__(self, config: dict[str, Any], context: InterceptorContext) -> None:
        only_keys(config, ("max_turns",), required=("max_turns",))
        self.max_turns = positive_int(config, "max_turns")
        self.exhausted = 0
        """Attempts this run that it ended."""

    async def before(self, call: ModelCall) -> ModelResponse | None:
        state = call.state(self)
        turns = state.get("turns", 0) + 1
        state["turns"] = turns
        if turns <= self.max_turns:
            return None
        if turns == self.max_turns + 1:
            self.exhausted += 1
        return ModelResponse(failure=MAX_TURNS_EXHAUSTED,
                             error=f"{MAX_TURNS_EXHAUSTED}: turn_counter allows {self.max_turns} model calls per "
                                   "attempt; this attempt asked for another")

    async def after(self, call: ModelCall, response: ModelResponse) -> None:
        return None

    def close(self) -> None:
        return None
