"""``python -m workbench.mock``: run the built-in mock model (see ``cli.py``)."""

import sys

from workbench.mock.cli import main

sys.exit(main())
