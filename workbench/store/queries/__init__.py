"""The SQL the analysis needs, as functions returning rows or polars frames.

``workbench.analysis`` computes over what these return and holds no SQL of its own; the queries read a store
(``Store``) or an exported run directory (``results.jsonl``/``trajectories.jsonl``, read by DuckDB).
"""
