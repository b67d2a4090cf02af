"""Cluster access for reassignments: the topology (through the one reader), ongoing
reassignments, submissions (Admin API, or ZooKeeper's /admin/reassign_partitions), log-dir moves."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from kops.errors import ClusterError
from kops.model import Topology, TopicPartition

def read(conn, *, topics: Iterable[str] | None = None, sizes: bool | Iterable[str] = False) -> Topology:
    """The cluster (or ``topics``) with configs and reassignments; ``sizes``: with partition
    sizes (DescribeLogDirs) — of every topic read (True) or of the topics named."""
    from kops.cluster.topology import ReadOptions, read_topology

    return read_topology(
        conn,
        ReadOptions(
            with_configs=True,
            with_sizes=bool(sizes),
            size_topics=None if isinstance(sizes, bool) else tuple(sorted(set(sizes))),
            with_reassignments=True,
            topics=tuple(sorted(set(topics))) if topics is not None else None,
        ),
    )


def ongoing(conn) -> dict[TopicPartition, dict[str, list[int]]]:
    from kops.cluster.topology import list_reassignments

    return list_reassignments(conn)


def ongoing_in(topo: Topology) -> dict[TopicPartition, dict[str, list[int]]]:
    """:func:`ongoing` as the read that made ``topo`` found it (:func:`read` asks
    ListPartitionReassignments along with the metadata), for the topics read: no second
    request. A reassignment is in progress while it adds or removes replicas (Kafka's
    ``isBeingReassigned``)."""
    return {
        p.tp: {"replicas": list(p.replicas), "adding_replicas": list(p.adding_replicas),
               "removing_replicas": list(p.removing_replicas)}
        for p in topo.partitions() if p.reassigning
    }


def submit(conn, targets: Mapping[TopicPartition, tuple[int, ...] | None], *,
           chunk_size: int = 500, patience_s: float | None = None) -> dict[TopicPartition, str | None]:
    """AlterPartitionReassignments (None = cancel), the one place kops submits reassignments
    through the Admin API. Returns per-partition error text or None.

    The ZooKeeper controller handles a request partition by partition with synchronous
    ZooKeeper writes, so big requests take minutes on a busy controller: requests go in chunks,
    each with a generous timeout. A controller slower still (found by the fault lab: one on a
    rack with 300 ms of delay and 5 % loss needs seconds per partition) answers
    REQUEST_TIMED_OUT but goes on with the request: kops then asks which of the chunk's
    partitions did start (ListPartitionReassignments), counts those as submitted, and sends the
    rest again in chunks half as big, for up to ``patience_s`` (default 4 request timeouts).
    """
    if not targets:
        return {}
    from kafka.structs import TopicPartition as KTP

    pending = sorted(targets.items())
    total = len(pending)
    timeout_ms = int(max(conn.timeout_s, 60.0) * 1000)
    deadline = time.monotonic() + (patience_s if patience_s is not None else 4 * timeout_ms / 1000)
    size = max(1, chunk_size)
    res: dict = {}
    while pending:
        chunk = pending[:size]
        req = {KTP(t, p): (list(r) if r is not None else None) for (t, p), r in chunk}
        try:
            res.update(conn.kp_controller(
                lambda a, req=req: a.alter_partition_reassignments(req, timeout_ms=timeout_ms),
                "alter partition reassignments") or {})
            pending = pending[len(chunk):]
            continue
        except ClusterError as e:
            e.details.append(f"{total - len(pending)} of {total} partitions were submitted before this request")
            raise
        except Exception as e:
            if not _timed_out(e) or time.monotonic() > deadline:
                err = conn.map_error(e, "alter partition reassignments")
                err.details.append(f"{total - len(pending)} of {total} partitions were submitted before this request")
                raise err from None
        landed = _landed(conn, dict(chunk))
        for tp in landed:
            res[KTP(*tp)] = None
        rest = [(tp, r) for tp, r in chunk if tp not in landed]
        pending = rest + pending[len(chunk):]
        size = max(1, len(rest) // 2)
    out: dict[TopicPartition, str | None] = {}
    for tp in targets:
        err = res.get(KTP(*tp), "no answer for this partition")
        out[tp] = None if err is None else (err if isinstance(err, str) else getattr(err, "__name__", str(err)))
    return out


def _timed_out(e: BaseException) -> bool:
    return type(e).__name__ in ("RequestTimedOutError", "KafkaTimeoutError")


def _landed(conn, chunk: Mapping[TopicPartition, tuple[int, ...] | None]) -> set[TopicPartition]:
    """The partitions of a timed-out request that the controller did act on: reassigning to
    their target (every target replica among the replicas, nothing added outside it), or, for
    a cancellation, no longer reassigning."""
    from kops.cluster.topology import list_reassignments

    now = list_reassignments(conn)
    landed = set()
    for tp, target in chunk.items():
        cur = now.get(tp)
        if target is None:
            if cur is None:
                landed.add(tp)
        elif cur is not None and set(target) <= set(cur.get("replicas", [])) \
                and set(cur.get("adding_replicas", [])) <= set(target):
            landed.add(tp)
    return landed


ZK_REASSIGN = "/admin/reassign_partitions"
BUSY = "busy"


def zk_reassign_pending(conn) -> list[dict[str, Any]] | None:
    """The partitions listed in /admin/reassign_partitions, or None when it does not exist."""
    import json

    from kazoo.exceptions import NoNodeError

    zk = conn.zk()
    try:
        data, _ = zk.retry(zk.get, ZK_REASSIGN)
    except NoNodeError:
        return None
    try:
        return json.loads(data.decode()).get("partitions", [])
    except ValueError:
        return []


def submit_zk(conn, targets: Mapping[TopicPartition, tuple[int, ...]]) -> dict[TopicPartition, str | None]:
    """Start reassignments the legacy way: create /admin/reassign_partitions (the controller
    only notices a *created* znode, so a wave waits until the previous one's znode is gone:
    the partitions are then reported ``busy`` and stay pending)."""
    import json

    from kazoo.exceptions import NodeExistsError

    if not targets:
        return {}
    doc = {"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in sorted(targets.items())]}
    zk = conn.zk()
    try:
        zk.retry(zk.create, ZK_REASSIGN, json.dumps(doc, separators=(",", ":")).encode(), makepath=True)
    except NodeExistsError:
        return {tp: BUSY for tp in targets}
    return {tp: None for tp in targets}


def alter_log_dirs(conn, requests: Mapping[tuple[str, int, int], str]) -> dict[tuple[str, int, int], str | None]:
    """AlterReplicaLogDirs; per replica error name or None."""
    if not requests:
        return {}
    try:
        res = conn.kp_admin().alter_replica_log_dirs(dict(requests))
    except Exception as e:
        return {k: f"{type(e).__name__}: {e}" for k in requests}
    out = {}
    for k in requests:
        err = None
        for tpr, e in res.items():
            if (tpr.topic, tpr.partition, tpr.broker_id) == k:
                err = None if getattr(e, "__name__", "") == "NoError" else getattr(e, "__name__", str(e))
        out[k] = err
    return out


# ------------------------------------------------------------------------------------------
