"""Datasets placed in the Hugging Face cache exactly as ``huggingface_hub`` lays them out, for offline tests.

``place_dataset(hf_home, "org/name", {"data/test.parquet": b"..."})`` writes
``hf_home/hub/datasets--org--name/{blobs/<sha256>, snapshots/<commit>/<path> -> ../../blobs/<sha256>,
refs/<branch>}``: the library's own ``scan_cache_dir`` and ``snapshot_download(local_files_only=True)`` read it
as a real download. ``hub_environment`` points the process (and an already imported ``huggingface_hub``,
which reads its settings once at import) at such a cache, offline.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest


def _commit_of(files: Mapping[str, bytes]) -> str:
    """A deterministic 40-hex commit id for a set of files (as a git commit sha looks)."""
    h = hashlib.sha1()
    for path in sorted(files):
        h.update(path.encode() + b"\0" + hashlib.sha256(files[path]).digest())
    return h.hexdigest()


def place_dataset(hf_home: Path, repo: str, files: Mapping[str, bytes], *, revision: str | None = None,
                  branch: str = "main") -> str:
    """Write ``files`` (path in repo → bytes) as commit ``revision`` (default: derived from the files) of dataset
    ``repo`` in the cache under ``hf_home``, point ``refs/<branch>`` at it, and return the commit sha."""
    commit = revision or _commit_of(files)
    storage = Path(hf_home) / "hub" / ("datasets--" + repo.replace("/", "--"))
    blobs = storage / "blobs"
    snapshot = storage / "snapshots" / commit
    blobs.mkdir(parents=True, exist_ok=True)
    for path, data in files.items():
        etag = hashlib.sha256(data).hexdigest()  # LFS files' etag is their sha256
        (blobs / etag).write_bytes(data)
        link = snapshot / path
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(os.path.relpath(blobs / etag, link.parent))
    (storage / "refs").mkdir(exist_ok=True)
    (storage / "refs" / branch).write_text(commit)
    return commit


def parquet_bytes(rows: Iterable[Mapping[str, Any]], schema: Any = None) -> bytes:
    """Rows as a Parquet file's bytes (``schema``: the upstream arrow schema, when the types matter)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(list(rows), schema=schema)
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


def jsonl_bytes(rows: Iterable[Mapping[str, Any]]) -> bytes:
    import orjson

    return b"".join(orjson.dumps(dict(r)) + b"\n" for r in rows)


def hub_environment(monkeypatch: pytest.MonkeyPatch, root: Path, *, offline: bool = True,
                    endpoint: str | None = None) -> Path:
    """HF_HOME, NEL_DATA_DIR (and HF_HUB_OFFLINE, HF_ENDPOINT) for this test, in the environment and in
    ``huggingface_hub.constants``; returns HF_HOME."""
    from huggingface_hub import constants

    hf_home = root / "hf"
    hf_home.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("NEL_DATA_DIR", str(root / "nel"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1" if offline else "0")
    monkeypatch.setattr(constants, "HF_HOME", str(hf_home))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hf_home / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", offline)
    if endpoint is not None:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        monkeypatch.setattr(constants, "ENDPOINT", endpoint)
        monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE",  # the download URLs, made from it at import
                            endpoint + "/{repo_id}/resolve/{revision}/{filename}")
    return hf_home


class FakeHub:
    """A real HTTP server on 127.0.0.1 answering the few endpoints ``huggingface_hub`` calls to download a dataset's
    files (``HF_ENDPOINT`` points at it): the repo info at a revision, and each file's HEAD and GET by commit, with
    the hub's own error headers (``X-Error-Code``: RepoNotFound, RevisionNotFound, GatedRepo).

    ``commit(repo, files)`` adds a commit and moves ``main`` to it; ``gate(repo, token)`` makes the repo answer only
    requests carrying ``Authorization: Bearer <token>``; ``authorizations`` records every such header it saw.
    """

    def __init__(self) -> None:
        import threading
        from http.server import ThreadingHTTPServer

        self.commits: dict[str, dict[str, dict[str, bytes]]] = {}
        self.refs: dict[str, dict[str, str]] = {}
        self.tokens: dict[str, str] = {}
        self.authorizations: list[str] = []
        self.requests: list[str] = []
        hub = self
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(hub))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeHub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def commit(self, repo: str, files: Mapping[str, bytes], branch: str = "main") -> str:
        sha = _commit_of({**files, ".parent": (self.refs.get(repo, {}).get(branch) or "").encode()})
        self.commits.setdefault(repo, {})[sha] = dict(files)
        self.refs.setdefault(repo, {})[branch] = sha
        return sha

    def gate(self, repo: str, token: str) -> None:
        self.tokens[repo] = token


def _handler_for(hub: FakeHub) -> type:
    import json
    import re
    from http.server import BaseHTTPRequestHandler
    from urllib.parse import unquote

    info_path = re.compile(r"^/api/datasets/([^/]+/[^/]+)/revision/([^/?]+)")
    file_path = re.compile(r"^/datasets/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet: the tests read hub.requests
            return

        def _error(self, status: int, code: str, message: str) -> None:
            body = json.dumps({"error": message}).encode()
            self.send_response(status)
            self.send_header("X-Error-Code", code)
            self.send_header("X-Error-Message", message)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _resolve(self, repo: str, revision: str) -> str | None:
            """The commit a revision names, or ``None`` after answering the error the hub gives."""
            auth = self.headers.get("Authorization")
            if auth:
                hub.authorizations.append(auth)
            if repo not in hub.commits:
                self._error(401, "RepoNotFound", "Repository not found")
                return None
            token = hub.tokens.get(repo)
            if token is not None and auth != f"Bearer {token}":
                self._error(401, "GatedRepo", f"Access to dataset {repo} is restricted. You must have access to it "
                            "and be authenticated to access it. Please log in.")
                return None
            revision = unquote(revision)
            sha = hub.refs[repo].get(revision) or (revision if revision in hub.commits[repo] else None)
            if sha is None:
                self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
            return sha

        def do_GET(self) -> None:
            self._serve(body=True)

        def do_HEAD(self) -> None:
            self._serve(body=False)

        def _serve(self, body: bool) -> None:
            hub.requests.append(f"{self.command} {self.path}")
            path = self.path.split("?", 1)[0]
            if (m := info_path.match(path)) is not None:
                sha = self._resolve(m.group(1), m.group(2))
                if sha is None:
                    return
                files = hub.commits[m.group(1)][sha]
                data = json.dumps({"id": m.group(1), "sha": sha, "private": False, "gated": False,
                                   "siblings": [{"rfilename": f} for f in sorted(files)]}).encode()
                self._ok(data, "application/json", {}, body)
                return
            if (m := file_path.match(path)) is not None:
                sha = self._resolve(m.group(1), m.group(2))
                if sha is None:
                    return
                data_file = hub.commits[m.group(1)][sha].get(unquote(m.group(3)))
                if data_file is None:
                    self._error(404, "EntryNotFound", "Entry not found")
                    return
                etag = hashlib.sha256(data_file).hexdigest()
                self._ok(data_file, "application/octet-stream",
                         {"X-Repo-Commit": sha, "ETag": f'"{etag}"'}, body)
                return
            self._error(404, "NotFound", f"no route {path}")

        def _ok(self, data: bytes, content_type: str, headers: Mapping[str, str], body: bool) -> None:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            if body:
                self.wfile.write(data)

    return Handler
