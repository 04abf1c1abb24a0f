"""Fixtures of the functional tests (helpers live in ``nel_helpers``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from workbench.model.mock import MockHandle, mock_model


@pytest.fixture(scope="module")
def mock() -> Iterator[MockHandle]:
    """The mock model, answering at once, shared by a test module."""
    with mock_model(latency_ms=0) as handle:
        yield handle
