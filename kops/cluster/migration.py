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
    return _status(_znode_json(zk, "/controller"), _znode_json(zk, "/migration"), finalized)


def _status(ctrl: dict[str, Any] | None, mig: dict[str, Any] | None, finalized: bool = False) -> MigrationStatus:
    epoch = (ctrl or {}).get("kraftControllerEpoch")
    return MigrationStatus(
        state=classify(ctrl, mig, finalized=finalized),
        controller=int(ctrl["brokerid"]) if ctrl and "brokerid" in ctrl else None,
        kraft_controller_epoch=int(epoch) if epoch is not None and int(epoch) >= 0 else None,
        migration_znode=mig,
    )


@dataclass(frozen=True)
class Cleared:
    """What :func:`clear` found and did."""

    before: MigrationStatus  # /controller and /migration as they were
    controller_epoch: int | None  # /controller_epoch as it was
    raised_to: int | None  # what /controller_epoch was set to (:func:`epoch_to_raise`), None when left

    def epoch_note(self, done: bool = True) -> str:
        """What happened to ``/controller_epoch`` (``done`` False: what would), in words."""
        kraft = self.before.kraft_controller_epoch
        if self.raised_to is not None:
            was = f"from {self.controller_epoch} " if self.controller_epoch is not None else "(it held no epoch) "
            return (f"/controller_epoch {'raised' if done else 'would be raised'} {was}to {self.raised_to}, "
                    f"above the KRaft controller's epoch {kraft} (KAFKA-20488: else the next "
                    "ZooKeeper controller cannot elect leaders for the partitions the KRaft controller wrote)")
        if kraft is not None:
            return f"/controller_epoch {self.controller_epoch} is above the KRaft controller's epoch {kraft}: left"
        return f"/controller_epoch {self.controller_epoch} left (no KRaft controller held /controller)"


def epoch_to_raise(controller_epoch: int | None, kraft_controller_epoch: int | None) -> int | None:
    """KAFKA-20488 (pure): while it held ZooKeeper, the KRaft controller stamped the partitions'
    state znodes with its own (raft) epoch, and the ZooKeeper controller elected once
    ``/controller`` is gone takes ``/controller_epoch`` + 1 as its epoch; a ZooKeeper controller
    below a stamped epoch refuses to change those partitions ("already written by another
    controller"): no leader elected, partitions offline. So ``/controller_epoch`` must be above the
    KRaft epoch first: the value to write there (the KRaft epoch + 1, as Kafka's docs ask: the
    ZooKeeper epoch greater than the KRaft one), or None when it already is (or no KRaft
    controller held ``/controller``)."""
    if kraft_controller_epoch is None or (controller_epoch is not None and controller_epoch > kraft_controller_epoch):
        return None
    return kraft_controller_epoch + 1


def clear(zk) -> Cleared:
    """Kafka's revert of a migration that is not finalized, with the KRaft controllers stopped:
    ``/controller_epoch`` raised above the KRaft epoch where it is not (:func:`epoch_to_raise`)
    and ``/controller`` deleted (a ZooKeeper broker becomes the controller) in one ZooKeeper
    transaction, conditional on both znodes' versions as read (ClusterError, nothing changed, if
    anything wrote them in between: a KRaft controller still running); then ``/migration``
    deleted (a later migration starts over)."""
    from kops.errors import ClusterError

    plan, ctrl_stat, epoch_stat = _read_plan(zk)
    if ctrl_stat is not None:
        tx = zk.transaction()
        if plan.raised_to is not None and epoch_stat is not None:
            tx.set_data("/controller_epoch", str(plan.raised_to).encode(), version=epoch_stat.version)
        elif plan.raised_to is not None:
            tx.create("/controller_epoch", str(plan.raised_to).encode())
        tx.delete("/controller", version=ctrl_stat.version)
        failed = [r for r in tx.commit() if isinstance(r, Exception)]
        if failed:
            raise ClusterError("ZooKeeper's /controller or /controller_epoch changed while kops deleted /controller "
                               f"({type(failed[0]).__name__}): is a KRaft controller of the migration still running? "
                               "Nothing was changed; stop every controller, then run again")
    if zk.exists("/migration"):
        zk.delete("/migration")
    return plan


def planned_clear(zk) -> Cleared:
    """What :func:`clear` would find and do, read only (a dry run)."""
    return _read_plan(zk)[0]


def _read_plan(zk) -> tuple[Cleared, Any, Any]:
    """What :func:`clear` finds and would do, with the stats of ``/controller`` and
    ``/controller_epoch`` its transaction is conditional on (None: missing; nothing to raise
    without a ``/controller``)."""
    from kazoo.exceptions import NoNodeError

    mig = _znode_json(zk, "/migration")
    try:
        ctrl_data, ctrl_stat = zk.get("/controller")
    except NoNodeError:
        return Cleared(_status(None, mig), None, None), None, None
    before = _status(_json(ctrl_data), mig)
    epoch, epoch_stat = _controller_epoch(zk)
    return Cleared(before, epoch, epoch_to_raise(epoch, before.kraft_controller_epoch)), ctrl_stat, epoch_stat


def _controller_epoch(zk) -> tuple[int | None, Any]:
    """``/controller_epoch`` (the decimal text Kafka writes; None: missing or not a number) and its stat."""
    from kazoo.exceptions import NoNodeError

    try:
        data, stat = zk.get("/controller_epoch")
    except NoNodeError:
        return None, None
    return (int(data) if data.strip().isdigit() else None), stat


def _znode_json(zk, path: str) -> dict[str, Any] | None:
    from kazoo.exceptions import NoNodeError

    try:
        data, _ = zk.get(path)
    except NoNodeError:
        return None
    return _json(data)


def _json(data: bytes) -> dict[str, Any] | None:
    """A znode's JSON object (None: empty, not JSON, or not an object)."""
    try:
        doc = json.loads(data.decode() or "null")
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def zk_cluster_id(zk) -> str | None:
    """The ZooKeeper cluster's id (``/cluster/id``, written by the first broker)."""
    doc = _znode_json(zk, "/cluster/id")
    return str(doc["id"]) if doc and doc.get("id") else None


__all__ = ["Cleared", "MIGRATION", "MigrationStatus", "NONE", "POST_MIGRATION", "PRE_MIGRATION", "STATES", "at_least",
           "classify", "clear", "epoch_to_raise", "finalized_from", "planned_clear", "read_status", "zk_cluster_id"]
