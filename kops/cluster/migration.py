"""Where a ZooKeeper -> KRaft migration (KIP-866) stands, read from ZooKeeper and the quorum.

Kafka's ``ZkMigrationState`` (metadata/.../migration/ZkMigrationState.java) lives in the KRaft
metadata log; from outside it is told by what the active KRaft controller writes in ZooKeeper:
``/migration`` (its id, epochs and the offset of the migrated metadata in its log) and
``/controller`` (``kraftControllerEpoch`` once a KRaft controller holds it). Once the migration
is finalized the controllers stop writing ZooKeeper: a quorum whose leader epoch is past the
``kraftControllerEpoch`` in ``/controller``, with every broker a KRaft broker, is finalized
(:func:`finalized_from`). Used by the sandbox's migration verbs and by the playbooks'
``migration_state`` condition (one implementation).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

#: Kafka's ZkMigrationState names, in order
NONE, PRE_MIGRATION, MIGRATION, POST_MIGRATION = "NONE", "PRE_MIGRATION", "MIGRATION", "POST_MIGRATION"
STATES = (NONE, PRE_MIGRATION, MIGRATION, POST_MIGRATION)


@dataclass(frozen=True)
class MigrationStatus:
    """Where a migration is: Kafka's ZkMigrationState name and what it was read from."""

    state: str
    controller: int | None  # the id in /controller (a broker, or a KRaft controller)
    kraft_controller_epoch: int | None  # /controller's kraftControllerEpoch (a KRaft controller holds it)
    migration_znode: dict[str, Any] | None  # /migration as the active KRaft controller wrote it

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "controller": self.controller,
                "kraft_controller_epoch": self.kraft_controller_epoch, "migration_znode": self.migration_znode}


def classify(controller_znode: dict[str, Any] | None, migration_znode: dict[str, Any] | None, *,
             finalized: bool = False) -> str:
    """Kafka's ZkMigrationState from ZooKeeper's ``/controller`` and ``/migration`` (pure).

    ``POST_MIGRATION`` when the controllers were finalized (``finalized``: ZooKeeper no longer
    tells); ``MIGRATION`` once ``/migration`` holds the offset of the migrated metadata in the
    KRaft log (Kafka's ``initialZkMigrationComplete``: offset > 0); ``PRE_MIGRATION`` while a
    KRaft controller in migration mode has written ``/migration`` or holds ``/controller`` but has
    not migrated yet; ``NONE`` otherwise."""
    if finalized:
        return POST_MIGRATION
    if migration_znode is not None and int(migration_znode.get("kraft_metadata_offset", -1)) > 0:
        return MIGRATION
    kraft_epoch = (controller_znode or {}).get("kraftControllerEpoch")
    if migration_znode is not None or (kraft_epoch is not None and int(kraft_epoch) >= 0):
        return PRE_MIGRATION
    return NONE


def at_least(state: str, want: str) -> bool:
    """``state`` is ``want`` or later in Kafka's order (NONE < PRE_MIGRATION < MIGRATION < POST_MIGRATION)."""
    return STATES.index(state) >= STATES.index(want)


def finalized_from(kraft_controller_epoch: int | None, quorum_epoch: int | None, all_kraft_brokers: bool) -> bool:
    """Whether the migration is finalized, from outside (pure): every broker is a KRaft broker and
    the quorum's leader epoch is past the epoch the last KRaft controller to hold ``/controller``
    wrote there -- a controller became active without claiming ZooKeeper, which a controller in
    migration mode always does. (While a new leader is being elected in dual write, for a moment,
    the epochs differ too: callers wait for the state, or refuse, never act on one read.)"""
    return (all_kraft_brokers and kraft_controller_epoch is not None and quorum_epoch is not None
            and quorum_epoch > kraft_controller_epoch)


def read_status(zk, *, finalized: bool = False) -> MigrationStatus:
    """:class:`MigrationStatus` read with a started kazoo client."""
    ctrl = _znode_json(zk, "/controller")
    mig = _znode_json(zk, "/migration")
    epoch = (ctrl or {}).get("kraftControllerEpoch")
    return MigrationStatus(
        state=classify(ctrl, mig, finalized=finalized),
        controller=int(ctrl["brokerid"]) if ctrl and "brokerid" in ctrl else None,
        kraft_controller_epoch=int(epoch) if epoch is not None and int(epoch) >= 0 else None,
        migration_znode=mig,
    )


def clear(zk) -> MigrationStatus:
    """Kafka's revert of a migration that is not finalized: delete ``/controller`` (a ZooKeeper
    broker becomes the controller) and ``/migration`` (a later migration starts over). What they
    held (:func:`read_status` before the deletes)."""
    before = read_status(zk)
    for path in ("/controller", "/migration"):
        if zk.exists(path):
            zk.delete(path)
    return before


def _znode_json(zk, path: str) -> dict[str, Any] | None:
    from kazoo.exceptions import NoNodeError

    try:
        data, _ = zk.get(path)
    except NoNodeError:
        return None
    try:
        doc = json.loads(data.decode() or "null")
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def zk_cluster_id(zk) -> str | None:
    """The ZooKeeper cluster's id (``/cluster/id``, written by the first broker)."""
    doc = _znode_json(zk, "/cluster/id")
    return str(doc["id"]) if doc and doc.get("id") else None


__all__ = ["MIGRATION", "MigrationStatus", "NONE", "POST_MIGRATION", "PRE_MIGRATION", "STATES", "at_least", "clear",
           "classify", "finalized_from", "read_status", "zk_cluster_id"]
