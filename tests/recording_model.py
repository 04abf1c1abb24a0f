"""An OpenAI-compatible endpoint that keeps every request body it is sent: to check what reaches a model."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Recorder(ThreadingHTTPServer):
    """An OpenAI-compatible endpoint that keeps every request body it is sent."""

    bodies: list[dict[str, Any]]


class _Answer(BaseHTTPRequestHandler):
    server: Recorder

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.bodies.append(body)
        reply = json.dumps({"id": "r", "object": "chat.completion", "model": body["model"],
                            "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": "The answer is 42."}}],
                            "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def recording_model() -> Iterator[Recorder]:
    """A running ``Recorder`` on a free loopback port; it answers every chat request "The answer is 42."."""
    server = Recorder(("127.0.0.1", 0), _Answer)
    server.bodies = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def url_of(server: Recorder) -> str:
    """The endpoint's base URL (``…/v1``)."""
    return f"http://127.0.0.1:{server.server_address[1]}/v1"
