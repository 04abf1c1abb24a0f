"""The live progress bar of ``nel eval run`` (rich), fed by the engine's counters.

The engine only bumps counters; this bar reads them four times a second, so
drawing never slows the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator

from workbench.engine.progress import RunProgress


def _stats(p: RunProgress) -> str:
    rate = p.running_pass_rate
    pass_text = f"{rate:.3f}" if rate is not None else "-"
    return f"{p.steps_per_s:7.1f} steps/s  pass@1 {pass_text}  errors {p.n_errors}"


@contextlib.asynccontextmanager
async def progress_bar(enabled: bool, label: str) -> AsyncIterator[list[RunProgress]]:
    """Yield a one-slot list; put the run's ``RunProgress`` in it once the run starts."""
    holder: list[RunProgress] = []
    if not enabled or not sys.stderr.isatty():
        yield holder
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(file=sys.stderr)
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[stats]}"),
        TimeElapsedColumn(),
        console=console,
        auto_refresh=False,
    )
    task = bar.add_task(label, total=None, stats="")

    async def refresh() -> None:
        while True:
            if holder:
                p = holder[0]
                bar.update(task, total=p.total, completed=p.completed, stats=_stats(p))
            bar.refresh()
            await asyncio.sleep(0.25)

    with bar:
        ticker = asyncio.create_task(refresh())
        try:
            yield holder
        finally:
            ticker.cancel()
            if holder:
                p = holder[0]
                bar.update(task, total=p.total, completed=p.completed, stats=_stats(p))
            bar.refresh()
