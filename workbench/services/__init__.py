"""Model servers nel starts itself (``services.NAME.type: vllm | sglang | trt_llm | command``).

``ServiceFleet`` starts each server before the first benchmark that calls it (its ``depends_on`` first), waits
until ``GET /v1/models`` answers, and stops it after the last one — also when the run fails or is interrupted;
a parent-death signal stops it if nel itself is killed. docs/services.md.
"""

from workbench.services.fleet import ServiceFleet, start_order
from workbench.services.server import ServerProcess

__all__ = ["ServerProcess", "ServiceFleet", "start_order"]
