"""Ordering of the KRaft suite (fixtures ``kraft_sandbox`` / ``kraft_bootstrap`` live in
tests/cluster/conftest.py).

Every test that uses the KRaft cluster runs in one block at the end of the session, so that
cluster is started once (by the first of them) and lives only while they run; the ZooKeeper-mode
cluster of the other tests is idle meanwhile. With ``KOPS_TEST_CLUSTER=kraft`` both are one
cluster and the order does not matter for its lifetime.

``trylast``: this runs after any other ordering hook and keeps that order for every other test.
"""

from __future__ import annotations

import pytest


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    kraft = [i for i in items if "kraft_sandbox" in getattr(i, "fixturenames", ())]
    if kraft:
        ids = {id(i) for i in kraft}
        items[:] = [i for i in items if id(i) not in ids] + kraft
