"""The images one run's prompts carried, read for its export (``images/<sha256>.<ext>`` beside the trajectories,
whose messages reference them by hash)."""

from __future__ import annotations

from workbench.store.reader import Store

_ANY_QUERY = "SELECT count(*) > 0 FROM (SELECT 1 FROM images LIMIT 1)"
_RUN_QUERY = """
SELECT i.sha256, i.mime, i.data FROM images i
WHERE i.sha256 IN (
    SELECT unnest(json_extract_string(messages, '$[*].content[*].sha256')) FROM steps
    WHERE run_id = ? AND contains(messages::VARCHAR, '"type":"image"')
)
ORDER BY i.sha256
"""


def run_images(store: Store, run_id: str) -> list[tuple[str, str, bytes]]:
    """``(sha256, mime, bytes)`` of each image ``run_id``'s steps reference; nothing is scanned in a store that holds
    no image at all (every text-only store)."""
    row = store.rows(_ANY_QUERY)
    if not (row and row[0][0]):
        return []
    return [(sha, mime, bytes(data)) for sha, mime, data in store.rows(_RUN_QUERY, [run_id])]
