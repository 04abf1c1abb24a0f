"""Widgets of the TUI: long texts that render only their visible lines, and the runs/tasks tables."""
