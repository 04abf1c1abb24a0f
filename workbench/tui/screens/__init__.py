"""The TUI's screens: runs, tasks of a run, one task, a trajectory diff, SQL and a live run."""
