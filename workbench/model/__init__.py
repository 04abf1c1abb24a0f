"""Talking to models: the OpenAI-compatible client and its transport (the built-in mock is workbench.mock)."""
