"""``nel tui``: open the terminal UI on a store (its problems are shown inside the app)."""

from __future__ import annotations

import argparse


def cmd_tui(args: argparse.Namespace) -> int:
    from workbench.extras import require

    require("tui")
    from workbench.cli.paths import store_path
    from workbench.tui.app import NelApp

    NelApp(store_path(args)).run()
    return 0
