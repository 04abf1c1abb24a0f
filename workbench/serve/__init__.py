"""``nel serve``: any benchmark over HTTP, speaking NeMo Gym's resources-server protocol.

``create_app(env)`` is the ASGI app (``/health``, ``/seed_session``, ``/verify``);
``export_data(env, dir)`` writes the JSONL Gym's ``ng_collect_rollouts`` reads;
``serve_process`` runs ``nel serve`` as a subprocess for tests and benchmarks.
"""

from workbench.serve.app import create_app
from workbench.serve.export import export_data, gym_row, gym_rows
from workbench.serve.gym_format import FormatError, ParsedResponse, parse_response

__all__ = ["FormatError", "ParsedResponse", "create_app", "export_data", "gym_row", "gym_rows", "parse_response"]
