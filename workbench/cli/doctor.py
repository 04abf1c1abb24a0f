"""``nel doctor``: what this machine can run, one line per check, each with what it enables and its fix.

Checks the store (opens? schema version? live segments?) and the disk under it, the Docker engine and the
sandbox image, bubblewrap, SLURM, Ray, NeMo Gym and the optional Python packages. Only what the default path
needs (the store's directory writable, the store readable, room on its disk) is ``error`` and makes the exit
status 1; everything else is ``ok``, ``missing`` or ``warn``, and exits 0.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from workbench.cli.paths import store_path
from workbench.extras import install_command

Status = Literal["ok", "missing", "warn", "error"]
GIB = 1024**3
LOW_DISK = 1 * GIB
"""Below this, a warning: a long run's segments and exports need room."""
NO_DISK = 100 * 1024**2
"""Below this, an error: writing the store fails part way."""
COMMAND_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Check:
    """One line of the report."""

    name: str
    status: Status
    detail: str
    enables: str
    fix: str = ""

    def line(self) -> str:
        text = f"{self.status:<8} {self.name:<14} {self.detail} — enables {self.enables}"
        return text + (f" — fix: {self.fix}" if self.fix and self.status != "ok" else "")


@dataclass(frozen=True)
class Extra:
    """An optional Python package: its import name, distribution, what it enables and how to install it."""

    module: str
    distribution: str
    enables: str
    install: str


EXTRAS = (
    Extra("textual", "textual", "nel tui", install_command("tui")),
    Extra("ipywidgets", "ipywidgets", "the notebook widgets (workbench.widgets)", install_command("notebook")),
    Extra("altair", "altair", "the widgets' charts", install_command("notebook")),
    Extra("docker", "docker", "--sandbox docker (the engine's API)", install_command("docker")),
    Extra("fastapi", "fastapi", "nel serve", install_command("serve")),
    Extra("uvicorn", "uvicorn", "nel serve (its HTTP server)", install_command("serve")),
    Extra("lm_eval", "lm-eval", "nothing in nel yet (lm-eval harness tasks are planned)", "pip install lm-eval"),
    Extra("inspect_ai", "inspect-ai", "nel import inspect, nel eval export --to inspect", install_command("inspect")),
    Extra("mlflow", "mlflow", "nel eval export --to mlflow, output.export: [mlflow]", install_command("mlflow")),
    Extra("wandb", "wandb", "nel eval export --to wandb, output.export: [wandb]", install_command("wandb")),
)


def cmd_doctor(args: argparse.Namespace) -> int:
    checks = list(run_checks(store_path(args)))
    if args.format == "json":
        print(json.dumps({"ok": not any(c.status == "error" for c in checks), "checks": [asdict(c) for c in checks]},
                         indent=2))
    else:
        for check in checks:
            print(check.line(), flush=True)
    return 1 if any(c.status == "error" for c in checks) else 0


def run_checks(store: Path) -> Iterator[Check]:
    """Every check, in report order; a check that itself fails is a ``warn`` naming the failure, not a crash."""
    steps: list[tuple[str, Callable[[], list[Check]]]] = [
        ("store", lambda: check_store(store)), ("disk", lambda: [check_disk(store)]), ("docker", check_docker),
        ("bubblewrap", lambda: [check_bwrap()]), ("slurm", lambda: [check_slurm()]), ("ray", lambda: [check_ray()]),
        ("nemo gym", lambda: [check_gym()]), ("extras", check_extras),
    ]
    for name, step in steps:
        try:
            yield from step()
        except Exception as exc:  # a doctor that crashes helps nobody
            yield Check(name, "warn", f"the check itself failed ({type(exc).__name__}: {exc})", "-")


# --- the store and its disk ---------------------------------------------------------------------------------------


def check_store(store: Path) -> list[Check]:
    from workbench.errors import NelError
    from workbench.store.database import SCHEMA_VERSION, store_facts
    from workbench.store.live import scan

    enables = "every run (its steps are written there)"
    fix = "pass --store PATH (or set NEL_STORE) to a writable place"
    folder = _existing_parent(store)
    if not store.exists():
        if folder.is_dir() and os.access(folder, os.W_OK | os.X_OK):
            return [Check("store", "ok", f"{store}: not created yet; the first run creates it", enables)]
        return [Check("store", "error", f"{store}: cannot be created ({folder} is not a writable directory)",
                      enables, fix)]
    if not os.access(store.parent, os.W_OK | os.X_OK):
        return [Check("store", "error", f"{store}: its directory is not writable (runs write segments beside it)",
                      enables, fix)]
    try:
        version, n_runs = store_facts(store)
    except NelError as exc:
        return [Check("store", "error", str(exc), enables, "point --store at a nel store, or move this file away")]
    live = scan(store)
    running = sum(1 for shard in live.shards if shard.status == "running")
    segments = f"; live segments: {len(live.shards)} shard(s) of {len(live.run_ids())} run(s), {running} running" \
        if live.shards else "; no live segments"
    detail = f"{store}: opens, schema version {version}, {n_runs} run(s){segments}"
    if version < SCHEMA_VERSION:
        return [Check("store", "warn", detail + f" (this nel writes version {SCHEMA_VERSION}: the next write "
                      "migrates it, adding only)", enables)]
    return [Check("store", "ok", detail, enables)]


def check_disk(store: Path) -> Check:
    folder = _existing_parent(store)
    free = shutil.disk_usage(folder).free
    detail = f"{free / GIB:.1f} GiB free under {folder}"
    enables = "the store, its live segments and run outputs"
    fix = "free space there, or pass --store/--output-dir on a larger disk"
    if free < NO_DISK:
        return Check("disk", "error", detail, enables, fix)
    if free < LOW_DISK:
        return Check("disk", "warn", detail + " (little room for a long run)", enables, fix)
    return Check("disk", "ok", detail, enables)


def _existing_parent(path: Path) -> Path:
    folder = path.absolute().parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


# --- sandboxes ---------------------------------------------------------------------------------------------------


def check_docker() -> list[Check]:
    from workbench.errors import UsageError
    from workbench.sandbox.daemon import connect, engine_address
    from workbench.sandbox.image import DEFAULT_IMAGE, IMAGE_LABEL, VERSION

    enables = "--sandbox docker (a container per attempt)"
    if importlib.util.find_spec("docker") is None:
        fix = install_command("docker")
        return [Check("docker engine", "missing", "the docker SDK is not installed", enables, fix),
                Check("sandbox image", "missing", "unknown (no docker SDK)", enables, fix)]
    try:
        client = connect("docker", timeout=5)
    except UsageError as exc:
        reason = str(exc).split(": ", 1)[-1]
        fix = "nel sandbox engine start" if shutil.which("dockerd") else "apt-get install docker.io"
        return [Check("docker engine", "missing", reason.split("; ")[0], enables, fix),
                Check("sandbox image", "missing", "unknown (no engine)", enables, "start the engine first")]
    try:
        version = client.version().get("Version", "?")
        images = {tag: image for image in client.images.list() for tag in image.tags}
    finally:
        client.close()
    engine = Check("docker engine", "ok", f"Docker {version} answers at {engine_address()}", enables)
    image = images.get(DEFAULT_IMAGE)
    if image is None:
        return [engine, Check("sandbox image", "missing", f"{DEFAULT_IMAGE} is not built", enables,
                              "nel sandbox image (debootstrap, about a minute; nothing is pulled)")]
    if (image.labels or {}).get(IMAGE_LABEL) != VERSION:
        return [engine, Check("sandbox image", "warn", f"{DEFAULT_IMAGE} is from an older recipe", enables,
                              "nel sandbox image --force")]
    return [engine, Check("sandbox image", "ok", f"{DEFAULT_IMAGE} ({VERSION})", enables)]


def check_bwrap() -> Check:
    from workbench.sandbox.local import bwrap_problem
    from workbench.sandbox.uids import PROBE_UID

    enables = "--sandbox local with namespaces: no network, no host files, a private /tmp"
    problem = bwrap_problem(PROBE_UID if os.geteuid() == 0 else None)
    if problem is None:
        return Check("bubblewrap", "ok", f"{shutil.which('bwrap')} isolates commands here", enables)
    status: Status = "missing" if shutil.which("bwrap") is None else "warn"
    fix = "apt-get install bubblewrap" if status == "missing" else "allow unprivileged user namespaces " \
        "(sysctl kernel.unprivileged_userns_clone=1), or use --sandbox docker"
    return Check("bubblewrap", status, f"{problem}: --sandbox local runs without it (weaker)", enables, fix)


# --- clusters and integrations ------------------------------------------------------------------------------------


def check_slurm() -> Check:
    enables = "cluster: {type: slurm} configs submitting shard arrays with sbatch"
    sbatch, squeue = shutil.which("sbatch"), shutil.which("squeue")
    if sbatch is None or squeue is None:
        return Check("slurm", "missing", "sbatch/squeue are not on PATH", enables,
                     "run on a SLURM submit host (apt-get install slurm-client); submit: false only writes scripts")
    try:
        done = subprocess.run([squeue, "-h", "-o", "%i"], capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT_S, stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired:
        return Check("slurm", "warn", f"squeue did not answer within {COMMAND_TIMEOUT_S:g} s", enables,
                     "check slurmctld and munge")
    if done.returncode != 0:
        said = [line for line in done.stderr.splitlines() if line.strip()][-1:] or [f"exit {done.returncode}"]
        return Check("slurm", "warn", f"sbatch is installed but squeue cannot reach a controller ({said[0].strip()})",
                     enables, "set SLURM_CONF to the cluster's slurm.conf, or start slurmctld and munge "
                     "(docs/slurm.md)")
    version = subprocess.run([squeue, "--version"], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S,
                             check=False).stdout.strip()
    jobs = len(done.stdout.split())
    return Check("slurm", "ok", f"{version or 'slurm'}: the controller answers ({jobs} job(s) queued)", enables)


def check_ray() -> Check:
    enables = "nel eval run --engine ray (shards as Ray tasks; ray job submit)"
    fix = install_command("ray")
    if importlib.util.find_spec("ray") is None:
        return Check("ray", "missing", "not installed", enables, fix)
    try:
        module = importlib.import_module("ray")
    except Exception as exc:
        return Check("ray", "warn", f"installed but does not import ({type(exc).__name__}: {exc})", enables, fix)
    return Check("ray", "ok", f"ray {getattr(module, '__version__', '?')} imports", enables)


def check_gym() -> Check:
    enables = "NeMo Gym's own resources servers beside nel (gym://…?protocol=native, the interop tests)"
    fix = "make gym (a .venv-gym with nemo-gym; needs Python 3.13)"
    if importlib.util.find_spec("nemo_gym") is not None:
        return Check("nemo gym", "ok", f"nemo-gym {_version('nemo-gym')} in this environment", enables)
    source_root = Path(__file__).resolve().parents[2]
    for venv in dict.fromkeys((Path.cwd() / ".venv-gym", source_root / ".venv-gym")):
        found = sorted(venv.glob("lib/python*/site-packages/nemo_gym-*.dist-info"))
        if (venv / "bin" / "python").exists() and found:
            version = found[-1].name.removeprefix("nemo_gym-").removesuffix(".dist-info")
            return Check("nemo gym", "ok", f"nemo-gym {version} in {venv}", enables)
    return Check("nemo gym", "missing", "neither importable here nor in a .venv-gym", enables, fix)


def check_extras() -> list[Check]:
    checks = []
    for extra in EXTRAS:
        if importlib.util.find_spec(extra.module) is None:
            checks.append(Check(extra.module, "missing", "not installed", extra.enables, extra.install))
        else:
            checks.append(Check(extra.module, "ok", f"{extra.distribution} {_version(extra.distribution)}",
                                extra.enables))
    return checks


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "(version unknown)"
