"""The command line that starts each kind of server, and what to say when its program is not installed here.

vLLM: ``vllm serve MODEL --host H --port P --tensor-parallel-size N``; SGLang: ``python -m sglang.launch_server
--model-path MODEL --host H --port P --tensor-parallel-size N``; TensorRT-LLM: ``trtllm-serve MODEL --host H --port P
--tp_size N`` (each tool's own CLI; docs/services.md cites them).
"""

from __future__ import annotations

import importlib.util
import shutil
import sys

from workbench.errors import UsageError
from workbench.spec.models import ServerService

HOST = "127.0.0.1"
"""Where a started server listens: this machine only (the run calls it from here)."""


def server_argv(service: ServerService, port: int, host: str = HOST) -> list[str]:
    """The argv that starts ``service`` on ``host:port``: ``extra_args`` last, so they may add any flag. ``host``
    is 0.0.0.0 only for a server on a SLURM node pool other than the evaluation's (its job reaches it there)."""
    tp = service.tensor_parallel_size
    if service.type == "command":
        assert service.command is not None
        return [_fill(arg, port, service.model, host) for arg in service.command]
    if service.type == "vllm":
        argv = ["vllm", "serve", service.model, "--host", host, "--port", str(port)]
        argv += ["--tensor-parallel-size", str(tp)] if tp else []
    elif service.type == "sglang":
        argv = [sys.executable, "-m", "sglang.launch_server", "--model-path", service.model, "--host", host,
                "--port", str(port)]
        argv += ["--tensor-parallel-size", str(tp)] if tp else []
    else:  # trt_llm
        argv = ["trtllm-serve", service.model, "--host", host, "--port", str(port)]
        argv += ["--tp_size", str(tp)] if tp else []
    return argv + list(service.extra_args)


def _fill(arg: str, port: int, model: str, host: str = HOST) -> str:
    """``{port}``, ``{model}`` and ``{host}`` replaced; any other text (a literal ``{}`` of a JSON argument) kept."""
    return arg.replace("{port}", str(port)).replace("{model}", model).replace("{host}", host)


def require_program(name: str, service: ServerService) -> None:
    """One line (exit 2) when the program ``service`` needs is not installed where nel runs."""
    if service.type == "command":
        assert service.command is not None
        program = service.command[0]
        if shutil.which(program) is None:
            raise UsageError(f"services.{name}.command: {program!r} is not a program found on PATH here")
        return
    missing = {"vllm": shutil.which("vllm") is None,
               "sglang": importlib.util.find_spec("sglang") is None,
               "trt_llm": shutil.which("trtllm-serve") is None}[service.type]
    if missing:
        what = {"vllm": "vLLM (the `vllm` command)", "sglang": "SGLang (the `sglang` package of this Python)",
                "trt_llm": "TensorRT-LLM (the `trtllm-serve` command)"}[service.type]
        raise UsageError(f"services.{name}: type {service.type} needs {what}, which is not installed here; "
                         "install it, or start the server with type: command (command: [..., \"{port}\"]), "
                         "or point type: api at a server running elsewhere")
