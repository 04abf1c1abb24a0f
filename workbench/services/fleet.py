"""The servers of one run: which benchmark needs which, in what order they start, when each stops."""

from __future__ import annotations

import os
import re
import sys
import time
from types import TracebackType

from workbench.errors import NelError, UsageError
from workbench.services.commands import HOST, require_program, server_argv
from workbench.services.ports import check_free, free_port
from workbench.services.server import ServerProcess
from workbench.spec.models import Benchmark, RunSpec, ServerService

STARTED_ENV = "NEL_STARTED_SERVICE_"
"""``NEL_STARTED_SERVICE_<NAME>=HOST:PORT``: the server was started for this worker (by a SLURM job on its node
pool, docs/slurm.md); the worker calls it there and neither starts nor stops it."""


def started_env_name(name: str) -> str:
    return STARTED_ENV + re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def started_elsewhere(name: str) -> tuple[str, int] | None:
    """``(host, port)`` of a server this worker was handed, or None when it starts the server itself."""
    value = os.environ.get(started_env_name(name))
    if not value:
        return None
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(f"${started_env_name(name)}: expected HOST:PORT, got {value!r}")
    return host, int(port)


def start_order(spec: RunSpec, names: set[str]) -> list[str]:
    """``names`` with everything they depend on, each after its ``depends_on`` (the spec refused cycles)."""
    order: list[str] = []

    def visit(name: str) -> None:
        if name in order:
            return
        service = spec.services[name]
        for dep in getattr(service, "depends_on", ()):
            visit(dep)
        order.append(name)

    for name in sorted(names):
        visit(name)
    return [n for n in order if isinstance(spec.services[n], ServerService)]


def services_of(bench: Benchmark) -> set[str]:
    """The services a benchmark calls: its solver's and its judges'."""
    judges = {m.service for m in bench.scoring.metrics if m.service} if bench.scoring is not None else set()
    return {bench.service, *judges}


class ServiceFleet:
    """Starts a run's servers as its benchmarks need them and stops each after the last benchmark that uses it.

    A context manager: leaving it (the run done, failed or interrupted) stops every server still running."""

    def __init__(self, spec: RunSpec, announce: bool = True) -> None:
        self.spec = spec
        self.announce = announce
        self.running: dict[str, ServerProcess] = {}
        self.failed: dict[str, NelError] = {}
        self.needs = [start_order(spec, services_of(b)) for b in spec.benchmarks]
        self.last_use = {name: i for i, names in enumerate(self.needs) for name in names}
        self.ready_s: dict[str, float] = {}
        """Seconds each server took from start to its first 200 on ``GET /v1/models``."""

    def __enter__(self) -> ServiceFleet:
        ports: dict[int, str] = {}
        for name in self.last_use:  # every program there and every configured port free, before anything starts
            service = self._service(name)
            if started_elsewhere(name) is not None:
                continue
            require_program(name, service)
            if service.port is not None:
                if service.port in ports:
                    raise UsageError(f"services.{name}.port: {service.port} is also services.{ports[service.port]}"
                                     ".port; give each server its own port, or leave port unset")
                ports[service.port] = name
                check_free(HOST, service.port, f"services.{name}.port")
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop_all()

    def _service(self, name: str) -> ServerService:
        service = self.spec.services[name]
        assert isinstance(service, ServerService)
        return service

    def start_for(self, index: int) -> None:
        """Every server benchmark ``index`` needs, started (dependencies first) and answering; a server that
        failed to start for an earlier benchmark fails this one too, without a second wait."""
        for name in self.needs[index]:
            if name in self.failed:
                raise self.failed[name]
            if name not in self.running:
                try:
                    self._start(name)
                except NelError as exc:
                    self.failed[name] = exc
                    raise

    def _start(self, name: str) -> None:
        service = self._service(name)
        if (given := started_elsewhere(name)) is not None:  # a SLURM job started it and waited for it
            service.bind(given[1], given[0])
            return
        where = f"services.{name}.port"
        if service.port is not None:
            check_free(HOST, service.port, where)
        port = service.port or free_port(HOST)
        server = ServerProcess(name, server_argv(service, port), HOST, port, service.env)
        self.running[name] = server
        t0 = time.monotonic()
        self.ready_s[name] = server.wait_ready(service.startup_timeout)
        service.bind(port)
        if self.announce:
            print(f"nel: services.{name}: {service.type} server for {service.model} ready at {server.url} "
                  f"after {time.monotonic() - t0:.2f} s", file=sys.stderr, flush=True)

    def done_with(self, index: int) -> None:
        """Stop the servers no later benchmark needs (dependants before what they depend on)."""
        for name in reversed(self.needs[index]):
            if self.last_use[name] == index:
                self._stop(name)

    def stop_all(self) -> None:
        for name in reversed(list(self.running)):
            self._stop(name)

    def _stop(self, name: str) -> None:
        server = self.running.pop(name, None)
        if server is not None:
            server.close()
            self._service(name).bind(None)
