"""Background workers: runs that outlive the terminal or TUI that started them.

``local`` starts, finds, stops and resumes launches on this machine; ``supervise`` is the process
that runs one; ``request`` is what a launch is asked to do.
"""

from workbench.workers.local import (
    LaunchState,
    WorkerState,
    find_launch,
    launch,
    launches,
    resume,
    stop,
    workers_root,
)
from workbench.workers.request import MOCK, RunRequest

__all__ = [
    "MOCK",
    "LaunchState",
    "RunRequest",
    "WorkerState",
    "find_launch",
    "launch",
    "launches",
    "resume",
    "stop",
    "workers_root",
]
