"""Fixtures every test directory shares."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest


@pytest.fixture
def unique_topic() -> Callable[[str], str]:
    """Factory of fresh topic names: ``unique_topic("health")`` -> ``"health-<uuid8>"``."""

    def make(prefix: str = "t") -> str:
        return f"{prefix}-{uuid.uuid4().hex[:8]}"

    return make
