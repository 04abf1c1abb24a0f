#!/usr/bin/env python3
"""nel-healthcheck: exit 0 when a `nel serve` answers GET /health with status "ok", else 1.

Any other URL is healthy when it answers 200 (e.g. the mock model's /v1/models).

The probe of the image (Docker HEALTHCHECK, docker-compose healthcheck, Kubernetes exec probe). Standard library
only, so it costs no extra package. `nel serve` requires its bearer token on every request, /health included:
the token is read from $NEL_SERVE_TOKEN (the same variable `nel serve` reads), never from the command line.

    nel-healthcheck                              http://127.0.0.1:9090/health
    nel-healthcheck http://127.0.0.1:8080/health
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request


def main(argv: list[str]) -> int:
    url = argv[1] if len(argv) > 1 else os.environ.get("NEL_HEALTH_URL", "http://127.0.0.1:9090/health")
    request = urllib.request.Request(url)
    token = os.environ.get("NEL_SERVE_TOKEN")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=float(os.environ.get("NEL_HEALTH_TIMEOUT", "3"))) as reply:
            body = json.load(reply)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        print(f"unhealthy: {url}: {exc}", file=sys.stderr)
        return 1
    if isinstance(body, dict) and body.get("status", "ok") != "ok":
        print(f"unhealthy: {url}: {body}", file=sys.stderr)
        return 1
    served = isinstance(body, dict) and "benchmark" in body
    what = f"{body['benchmark']} ({body.get('dataset_size')} problems)" if served else "answering"
    print(f"ok: {url}: {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
