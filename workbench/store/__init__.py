"""The DuckDB store: append-only steps, live segments, ingest and readers."""

from workbench.store.ingest import IngestReport, ingest
from workbench.store.layout import DEFAULT_STORE_NAME, resolve_store_path, segments_root
from workbench.store.reader import Store, open_store
from workbench.store.writer import ShardWriter

__all__ = [
    "DEFAULT_STORE_NAME",
    "IngestReport",
    "ShardWriter",
    "Store",
    "ingest",
    "open_store",
    "resolve_store_path",
    "segments_root",
]
