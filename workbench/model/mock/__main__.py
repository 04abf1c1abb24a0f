"""``python -m workbench.model.mock``: run the built-in mock model (see ``cli.py``)."""

import sys

from workbench.model.mock.cli import main

sys.exit(main())
