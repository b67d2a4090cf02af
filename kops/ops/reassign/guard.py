"""One execution per cluster: the cluster's journal store, the execution lock, owners that died."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from kops.errors import BadInput
from kops.model import ReassignmentPlan, Topology
from kops.ops import journal
def cluster_id_of(topo: Topology) -> str:
    return topo.cluster_id or "unknown-cluster"


class _ClusterIdOnly:
    def __init__(self, cluster_id):
        self.cluster_id = cluster_id


def cluster_identity(conn):
    """Just the cluster id, for commands that start from the journal."""
    return _ClusterIdOnly(conn.cluster_id())


def refuse_if_active(store: journal.JournalStore, lock) -> None:
    """A second execution is refused with the first one's identity."""
    active = store.unfinished()
    if active:
        j = active[-1]
        raise_held(j, lock)
    holder = lock.holder()
    if holder is not None:
        hid = holder.get("execution_id")
        if not hid:
            return  # taken half-way (no holder record yet): ClusterLock.acquire waits or breaks it
        prev = store.load(hid)
        if prev is not None and prev.finished:
            lock.release(hid)  # a stale lock of an execution that ended
            return
        if prev is None and lock_stale_without_journal(holder):
            # a kops killed between taking the lock and writing the first journal record:
            # that execution never throttled or submitted anything (both come after the record)
            lock.release(hid)
            return
        from kops.ops.lock import LockHeld

        raise LockHeld(holder)


def lock_stale_without_journal(holder: Mapping[str, Any], *, grace_s: float = 60.0) -> bool:
    """A lock whose execution has no journal: stale when its owner process is gone (same host)
    or it was taken longer ago than a live kops needs to write the journal's first record."""
    if _process_gone(holder.get("owner") or {}):
        return True
    try:
        taken = datetime.fromisoformat(str(holder.get("acquired_at")))
    except ValueError:
        return False
    return (datetime.now(timezone.utc) - taken).total_seconds() > grace_s


def raise_held(j: journal.Journal, lock=None):
    from kops.ops.lock import LockHeld

    holder = {"execution_id": j.id, "owner": j.owner, "acquired_at": j.created_at}
    err = LockHeld(holder)
    err.details = [f"state {j.state}, progress {j.counts()}, last update {j.updated_at}"]
    raise err



def find_journal(store: journal.JournalStore, *, execution_id: str | None = None,
                 plan: ReassignmentPlan | None = None, unfinished_only: bool = False) -> journal.Journal | None:
    if execution_id:
        j = store.load(execution_id)
        if j is None:
            raise BadInput(f"no journal for execution {execution_id!r} on this cluster")
        return j
    journals = store.all()
    if unfinished_only:
        journals = [j for j in journals if not j.finished]
    if plan is not None:
        want = {e.tp: e.replicas for e in plan.entries}
        journals = [j for j in journals if {m.tp: m.target for m in j.moves} == want] or [
            j for j in journals if not j.finished and {m.tp for m in j.moves} & set(want)
        ]
    if not journals:
        return None
    unfinished = [j for j in journals if not j.finished]
    return (unfinished or journals)[-1]


def _process_gone(owner: Mapping[str, Any]) -> bool:
    """True when ``owner`` (host, pid) is another process on this host that no longer exists."""
    pid = owner.get("pid")
    if owner.get("host") != socket.gethostname() or not isinstance(pid, int) or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    return False


def owner_alive(j: journal.Journal, interval_s: float) -> bool:
    o = j.owner or {}
    if o.get("host") == socket.gethostname() and isinstance(o.get("pid"), int):
        if o["pid"] == os.getpid() or _process_gone(o):
            return False
        # the pid exists: alive only if it also wrote recently (pids are reused)
        return time.time() - j.heartbeat < max(30.0, 5 * interval_s)
    return time.time() - j.heartbeat < max(60.0, 10 * interval_s)
