"""Cordoned brokers (``kops broker cordon | uncordon``): a cordoned broker keeps the replicas it
holds and gets no new one from any kops plan, cron step or heal step -- it is being drained or
is suspect.

The cordon is kept in the cluster, so every host's kops sees it: one record per broker in the
small compacted topic ``__kops_cordons`` (key ``cordon/<id>``: since when, why, from which host),
on ZooKeeper and KRaft clusters alike. A topic of its own, not the journal: every planner reads
it, and a handful of records reads in a round trip or two even from a slow rack (the journal,
hundreds of executions, took over 10 s over a 300 ms, 5 %-loss link); a cluster never cordoned
has no such topic, and reading costs one metadata lookup. Where the running Kafka has a cordon of its own
(KIP-1066: Kafka 4.3+ with ``metadata.version`` 4.3-IV0 or later), kops sets it too --
``cordoned.log.dirs=*`` on the broker -- so that topics created by anyone avoid the broker;
``uncordon`` deletes it (whoever set it). A broker Kafka cordons is cordoned for kops' planners
as well, with or without a kops record (:func:`kops.cluster.topology.read_topology` reads it).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from kops.errors import BadInput
from kops.model import Topology

PREFIX = "cordon/"
#: the topic the records are kept in (created by the first ``kops broker cordon``)
CORDON_TOPIC = "__kops_cordons"
#: the metadata.version Kafka's own cordon needs (KIP-1066)
KAFKA_CORDON_NEEDS = "Kafka 4.3 with metadata.version 4.3-IV0 or later (KIP-1066)"


@dataclass
class Cordon:
    broker: int
    since: str
    reason: str | None = None
    host: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"broker": self.broker, "since": self.since, "reason": self.reason, "host": self.host}


@dataclass
class Outcome:
    """What a cordon or uncordon did: the brokers changed, those already so, and how Kafka's
    own cordon went on each broker (``set``, ``deleted``, or why not)."""

    action: str
    changed: list[int] = field(default_factory=list)
    unchanged: list[int] = field(default_factory=list)
    kafka: dict[int, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, "changed": self.changed, "unchanged": self.unchanged,
                "kafka_cordon": {str(b): v for b, v in sorted(self.kafka.items())}}


def _store(conn):
    from kops.ops.journal import TopicStore

    return TopicStore(conn, CORDON_TOPIC)


def read(conn) -> dict[int, Cordon]:
    """kops' cordon records in the cluster, by broker."""
    return parse(_store(conn).read_all())


def parse(raw: Mapping[str, bytes | None]) -> dict[int, Cordon]:
    """The cordon records among a topic's records (keys and values as read; records that are
    not kops' own are skipped)."""
    out: dict[int, Cordon] = {}
    for key, value in raw.items():
        if not key.startswith(PREFIX) or not value:
            continue
        try:
            doc = json.loads(value)
            b = int(doc["broker"])
            out[b] = Cordon(b, str(doc.get("since") or ""), doc.get("reason"), doc.get("host"))
        except (ValueError, KeyError, TypeError):
            continue
    return out


def with_cordons(topo: Topology, cordons: Mapping[int, Cordon]) -> Topology:
    """``topo`` with the brokers kops' records cordon marked (those Kafka cordons already are)."""
    if not any(b.id in cordons and not b.cordoned for b in topo.brokers):
        return topo
    return replace(topo, brokers=tuple(replace(b, cordoned=True) if b.id in cordons else b for b in topo.brokers))


def apply(conn, topo: Topology) -> Topology:
    """The topology a planner works on: ``topo`` with kops' cordons read from the cluster."""
    return with_cordons(topo, read(conn))


def check(topo: Topology, brokers: Iterable[int]) -> list[int]:
    """The brokers named, each a broker of the cluster (registered, or holding replicas): else
    BadInput naming them, before anything changes."""
    ids = sorted(set(brokers))
    if not ids:
        raise BadInput("no broker given (kops broker cordon 3 4)")
    known = {b.id for b in topo.brokers}
    bad = [b for b in ids if b not in known]
    if bad:
        raise BadInput(f"brokers {bad} are not in the cluster (brokers: {', '.join(map(str, sorted(known)))})")
    return ids


def cordon(conn, topo: Topology, brokers: Iterable[int], *, reason: str | None = None,
           now: datetime | None = None) -> Outcome:
    """Cordon ``brokers``: a record each (kept as it was for one already cordoned by kops), and
    Kafka's own cordon where the broker supports it."""
    ids = check(topo, brokers)
    records = read(conn)
    since = (now or datetime.now(timezone.utc)).isoformat(timespec="seconds")
    out = Outcome("cordon")
    store = _store(conn)
    for b in ids:
        if b in records:
            out.unchanged.append(b)
            continue
        doc = Cordon(b, since, reason, socket.gethostname())
        store.put_raw(f"{PREFIX}{b}", json.dumps(doc.to_dict(), sort_keys=True).encode())
        out.changed.append(b)
    out.kafka = _kafka_cordon(conn, topo, ids, "*")
    return out


def uncordon(conn, topo: Topology, brokers: Iterable[int]) -> Outcome:
    """Lift the cordon of ``brokers``: kops' record (a tombstone) and Kafka's own."""
    ids = check(topo, brokers)
    records = read(conn)
    kafka_cordoned = {b.id for b in topo.brokers if b.cordoned}
    out = Outcome("uncordon")
    store = _store(conn)
    for b in ids:
        if b in records:
            store.put_raw(f"{PREFIX}{b}", None)
            out.changed.append(b)
        elif b in kafka_cordoned:
            out.changed.append(b)
        else:
            out.unchanged.append(b)
    out.kafka = _kafka_cordon(conn, topo, ids, None)
    return out


def _kafka_cordon(conn, topo: Topology, ids: list[int], value: str | None) -> dict[int, str]:
    """Set (``*``) or delete Kafka's own cordon on the registered brokers of ``ids`` that know it;
    per broker what happened."""
    from kops.cluster.topology import KAFKA_CORDON_CONFIG, kafka_cordons
    from kops.ops.throttle import Change, apply_changes

    alive = [b for b in ids if (br := topo.broker(b)) is not None and br.alive]
    out = {b: "broker not registered: kops' record only" for b in ids if b not in alive}
    if not alive:
        return out
    known, cordoned = kafka_cordons(conn, alive)
    changes = []
    for b in alive:
        if b not in known:
            out[b] = f"no cordon of Kafka's own on this broker (needs {KAFKA_CORDON_NEEDS}): kops' plans avoid it"
        elif value is None and b not in cordoned:
            out[b] = "not set"
        elif value is not None and b in cordoned:
            out[b] = "already set"
        else:
            changes.append(Change("broker", str(b), KAFKA_CORDON_CONFIG, value))
    failures = {int(name): msg for _kind, name, msg in apply_changes(conn, changes)}
    for ch in changes:
        b = int(ch.name)
        msg = failures.get(b)
        if msg is None:
            out[b] = f"{KAFKA_CORDON_CONFIG}={value}" if value is not None else f"{KAFKA_CORDON_CONFIG} deleted"
        elif "INVALID_CONFIG" in msg.upper() or "metadata version" in msg.lower():
            out[b] = f"refused by Kafka ({msg.strip()[:160]}); it needs {KAFKA_CORDON_NEEDS}: kops' plans avoid it"
        else:
            from kops.errors import ClusterError

            raise ClusterError(f"broker {b}: {KAFKA_CORDON_CONFIG}: {msg}")
    return out
