"""Fixtures every test directory shares."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from hypothesis import settings

# the rows of docs/reliability.md: the fault lab's and the cluster tests' that record one
from tests.recording import fresh_results, pytest_runtest_makereport, record  # noqa: F401

# Property tests assert what the code does, never how fast: hypothesis' default 200 ms deadline
# per example fails them on a loaded machine (a round trip of client properties did, once, next
# to two test suites), so no example has a deadline. (Loaded here, before any test module makes
# its own settings, which inherit it.)
settings.register_profile("kops", deadline=None)
settings.load_profile("kops")


@pytest.fixture
def unique_topic() -> Callable[[str], str]:
    """Factory of fresh topic names: ``unique_topic("health")`` -> ``"health-<uuid8>"``."""

    def make(prefix: str = "t") -> str:
        return f"{prefix}-{uuid.uuid4().hex[:8]}"

    return make
