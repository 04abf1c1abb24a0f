"""A run's end-of-run ingest in a thread, while the run's own files are read for its summary and export.

At the end of a small run most of its wall time is fixed cost: DuckDB copying the steps in and checkpointing the
file (~0.2 s for GSM8K's 5,276 steps), then a reader opening it again for the summary and the export. The ingest
runs in C++ with the GIL released, so on a second core it can overlap the Python that formats the export, if that
reads the run from its own shard files (``Store(files_only=True)``, a snapshot held in memory) rather than the
database file being written. The files stay until the snapshot is taken: the ingest waits for ``files_read`` before
it removes them, still under its lock, as an ingest in the foreground does.
"""

from __future__ import annotations

import threading
from pathlib import Path

from workbench.store.ingest import IngestReport, ingest
from workbench.store.reader import Store


class BackgroundIngest:
    """``ingest(store)`` in a thread of its own; ``files`` is run ``run_id``'s own files (``Store(files_only=True)``)
    for the caller to read meanwhile. Call ``files_read`` once they have been read, and ``join`` before the process
    ends (it also releases the files): it returns the report or raises what the ingest raised. The thread is not a
    daemon: an interpreter that exits early still lets the ingest finish."""

    def __init__(self, store: Path, run_id: str) -> None:
        self.files = Store(store, runs=[run_id], files_only=True)
        self._released = threading.Event()
        self._report: IngestReport | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(store,), name="nel-ingest")
        self._thread.start()

    def _run(self, store: Path) -> None:
        try:
            self._report = ingest(store, before_removing=self._released.wait)
        except BaseException as exc:  # handed to the caller by join
            self._error = exc

    def files_read(self) -> None:
        """The shard files may go: the caller holds what it needs of them."""
        self._released.set()

    def join(self) -> IngestReport:
        self._released.set()
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._report is not None
        return self._report
