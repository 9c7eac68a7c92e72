"""Fixtures of the reliability suite."""

from __future__ import annotations

import pytest

from .faults import stable_seed


@pytest.fixture
def seed(request: pytest.FixtureRequest) -> int:
    """This test's random seed: stable across runs and processes (a CRC-32 of the test's
    id, not ``hash()``), or ``$XOR_ACK_SEED``. Printed, so that a failure's report shows
    how to replay it."""
    value = stable_seed(request.node.nodeid)
    print(f"seed {value}: replay with XOR_ACK_SEED={value} pytest '{request.node.nodeid}'")
    return value
