"""The terminal UI (``nel tui``): Textual screens over the store, for failure triage.

Only the front end lives here; queries and diffs are in ``workbench.analysis.triage``.
"""
