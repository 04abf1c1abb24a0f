"""Talking to models: the OpenAI-compatible client, its transport, and the built-in mock."""
