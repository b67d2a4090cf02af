"""The rollback's ZooKeeper writes (kops.cluster.migration.clear) against a real ZooKeeper: the
session sandbox's, in a chroot of the test's own (its cluster's znodes are never touched). What a
KRaft controller of a migration leaves there is written by hand: a raft epoch past ZooKeeper's
controller epoch (KAFKA-20488) is what a quorum that lost its leader a few times leaves behind,
which a sandbox run does not reach in a test's time."""

from __future__ import annotations

import json
import uuid

import pytest

from kops.cluster import migration as zkm
from kops.errors import ClusterError
from kops.sandbox.probe import zk_client

pytestmark = pytest.mark.cluster

KRAFT = json.dumps({"version": 2, "brokerid": 3000, "timestamp": "1", "kraftControllerEpoch": 17}).encode()


@pytest.fixture
def chroot(zk_connect):
    """``zk_connect`` with a fresh chroot, removed afterwards."""
    root = f"/kops-test-clear-{uuid.uuid4().hex[:8]}"
    with zk_client(zk_connect) as zk:
        zk.ensure_path(root)
        try:
            yield zk_connect.split("/")[0] + root
        finally:
            zk.delete(root, recursive=True)


def _seed(zk, epoch: bytes) -> None:
    zk.create("/controller", KRAFT)
    zk.create("/controller_epoch", epoch)
    zk.create("/migration", json.dumps({"kraft_metadata_offset": 40}).encode())


def test_clear_raises_the_controller_epoch_and_deletes_controller_in_one_transaction(chroot):
    with zk_client(chroot) as zk:
        _seed(zk, b"9")
        done = zkm.clear(zk)
        assert (done.before.controller, done.before.kraft_controller_epoch, done.controller_epoch, done.raised_to) == \
            (3000, 17, 9, 18)
        assert not zk.exists("/controller") and not zk.exists("/migration")
        data, stat = zk.get("/controller_epoch")
        assert data == b"18" and stat.version == 1  # one write, Kafka's decimal text


def test_a_kraft_controller_writing_in_between_leaves_everything_as_it_was(chroot):
    """A KRaft controller still running rewrites /controller (its next claim) between kops' reads
    and its transaction: the transaction fails as a whole (ZooKeeper's multi), nothing changed."""
    with zk_client(chroot) as zk, zk_client(chroot) as other:
        _seed(zk, b"30")
        real = zk.transaction

        def meddled():
            other.set("/controller", KRAFT)  # the version kops read is gone
            return real()

        zk.transaction = meddled
        with pytest.raises(ClusterError, match="is a KRaft controller of the migration still running"):
            zkm.clear(zk)
        assert zk.get("/controller")[0] == KRAFT and zk.get("/controller_epoch")[0] == b"30"
        assert zk.exists("/migration")
