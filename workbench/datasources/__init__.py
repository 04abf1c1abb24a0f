"""Where a benchmark's rows come from: local files (.jsonl, .csv, .parquet) and the Hugging Face hub (``hf://``).

``parse_hub_uri`` reads a reference, ``load_hub``/``load_local`` give the rows and their identity, ``pull``
freezes a built-in benchmark's data, ``presence`` says whether it is here without reading it.
"""

from workbench.datasources.frozen import Manifest, data_dir
from workbench.datasources.load import Loaded, Pulled, load_hub, load_local, presence, pull
from workbench.datasources.problems import DataNotPresent
from workbench.datasources.uri import HubRef, is_hub_uri, parse_hub_uri

__all__ = ["DataNotPresent", "HubRef", "Loaded", "Manifest", "Pulled", "data_dir", "is_hub_uri", "load_hub",
           "load_local", "parse_hub_uri", "presence", "pull"]
