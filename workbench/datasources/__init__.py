"""Where a benchmark's rows come from: local files (.jsonl, .csv, .parquet) and the Hugging Face hub (``hf://``)."""
