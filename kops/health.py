"""Cluster health from a topology snapshot (pure: no I/O).

Severities: ``critical`` (data unavailable or writes refused), ``problem`` (redundancy or rack
safety reduced), ``warning`` (works, but worth an operator's look). ``kops cluster health``
exits 3 when there is anything critical or a problem (``--fail-on warning`` to include warnings).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kops.model import Quorum, Topology
from kops.placement.racks import RackTree, rack_violation

CRITICAL, PROBLEM, WARNING = "critical", "problem", "warning"
_ORDER = {CRITICAL: 0, PROBLEM: 1, WARNING: 2}
#: a KRaft voter last caught up with the quorum's leader longer ago than this is not counted in
#: the majority that keeps the metadata going (a follower fetches every few hundred ms, and the
#: leader appends a record every 0.5 s even when nothing changes; a leader that hears from no
#: majority for 1.5 x controller.quorum.fetch.timeout.ms = 3 s resigns)
QUORUM_BEHIND_S = 10.0


@dataclass(frozen=True)
class Finding:
    check: str
    severity: str
    subject: str  # "topic-3", "broker 2", "topic orders"
    message: str
    topic: str | None = None
    partition: int | None = None
    broker: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d = {"check": self.check, "severity": self.severity, "subject": self.subject, "message": self.message}
        for k in ("topic", "partition", "broker"):
            v = getattr(self, k)
            if v is not None:
                d[k] = v
        return d


@dataclass
class HealthReport:
    findings: list[Finding] = field(default_factory=list)
    partitions: int = 0
    brokers_alive: int = 0
    brokers_down: int = 0
    racks: int = 0

    def count(self, check: str) -> int:
        return sum(1 for f in self.findings if f.check == check)

    def worst(self) -> str | None:
        return min((f.severity for f in self.findings), key=_ORDER.__getitem__, default=None)

    def healthy(self, fail_on: str = PROBLEM) -> bool:
        return not any(_ORDER[f.severity] <= _ORDER[fail_on] for f in self.findings)

    def summary(self) -> dict[str, int]:
        return dict(sorted(Counter(f.check for f in self.findings).items()))

    def to_dict(self, fail_on: str = PROBLEM) -> dict[str, Any]:
        return {
            "healthy": self.healthy(fail_on),
            "partitions": self.partitions,
            "brokers_alive": self.brokers_alive,
            "brokers_down": self.brokers_down,
            "racks": self.racks,
            "summary": self.summary(),
            "findings": [f.to_dict() for f in self.findings],
        }


def check_health(topo: Topology, *, default_min_isr: int = 1) -> HealthReport:
    rep = HealthReport(
        brokers_alive=sum(1 for b in topo.brokers if b.alive),
        brokers_down=sum(1 for b in topo.brokers if not b.alive),
        racks=len(topo.racks),
    )
    add = rep.findings.append
    rack_of = {b.id: b.rack for b in topo.brokers}
    have_racks = any(r is not None for r in rack_of.values())
    tree = RackTree.build(rack_of) if have_racks else None
    replicas_on: Counter[int] = Counter()
    down = {b.id for b in topo.brokers if not b.alive}

    for t in topo.topics:
        min_isr = t.min_insync_replicas(default_min_isr)
        worst_rack_share = 0
        for p in t.partitions:
            rep.partitions += 1
            name = f"{p.topic}-{p.partition}"
            where = {"topic": p.topic, "partition": p.partition}
            replicas_on.update(p.replicas)
            rf = len(p.replicas)
            isr = len(p.isr)
            if p.offline:
                add(Finding("offline", CRITICAL, name,
                            f"no leader; replicas {list(p.replicas)}, ISR {list(p.isr)}", **where))
                continue
            if isr < min_isr:
                add(Finding("under_min_isr", CRITICAL, name,
                            f"ISR {list(p.isr)} has {isr} < min.insync.replicas={min_isr}: acks=all writes fail",
                            **where))
            elif isr == min_isr and rf > min_isr:
                add(Finding("at_min_isr", PROBLEM, name,
                            f"ISR {list(p.isr)} is at min.insync.replicas={min_isr}: one more failure stops acks=all writes",
                            **where))
            if isr < rf:
                missing = [b for b in p.replicas if b not in p.isr]
                add(Finding("under_replicated", PROBLEM, name,
                            f"replicas {missing} out of ISR {list(p.isr)} (replicas {list(p.replicas)})",
                            **where))
            if tree is not None:
                why = rack_violation(p.replicas, tree)
                if why is not None:
                    add(Finding("rack_unsafe", PROBLEM, name, why, **where))
                shares = Counter(rack_of.get(b) for b in p.replicas)
                worst_rack_share = max(worst_rack_share, max(shares.values(), default=0))
            if p.leader != p.preferred_leader:
                add(Finding("non_preferred_leader", WARNING, name,
                            f"leader {p.leader}, preferred {p.preferred_leader}", **where))
        if tree is not None and t.partitions and worst_rack_share >= min_isr:
            add(Finding(
                "durability", WARNING, f"topic {t.name}",
                f"min.insync.replicas={min_isr} but up to {worst_rack_share} replicas of a partition "
                f"share a rack: an acks=all write can be acknowledged by one rack only "
                f"(set min.insync.replicas >= {worst_rack_share + 1} or spread replicas over more racks)",
                topic=t.name,
            ))

    if topo.quorum is not None:
        rep.findings.extend(quorum_findings(topo.quorum))
    for b in sorted(down):
        if replicas_on[b]:
            add(Finding("broker_down", PROBLEM, f"broker {b}",
                        f"broker {b} is down and holds {replicas_on[b]} replicas", broker=b))

    rep.findings.sort(key=lambda f: (_ORDER[f.severity], f.check, f.topic or "", f.partition or -1, f.broker or -1))
    return rep


def quorum_findings(q: Quorum, behind_s: float = QUORUM_BEHIND_S) -> list[Finding]:
    """The KRaft metadata quorum's health: no leader or no majority caught up (critical: no
    metadata change can be made, no broker can register); a majority that one more lost voter
    would break (problem: the voters behind are named); a quorum too small to lose any voter
    even when all are well (warning: 1 or 2 voters, by configuration)."""
    n = len(q.voters)
    if q.leader < 0:
        return [Finding("quorum_no_leader", CRITICAL, "KRaft quorum",
                        f"the metadata quorum of {n} voters has no leader: no metadata change can be made")]
    behind = {}
    for v in q.voters:
        late = q.behind_s(v)
        if late is not None and late > behind_s:
            behind[v.id] = f"{v.id} (last caught up {late:.0f} s ago, {q.lag(v)} records behind)"
        elif q.silent(v):  # e.g. the leader before an election that is down now
            behind[v.id] = f"{v.id} (has not fetched from leader {q.leader} in its epoch {q.epoch})"
    in_sync = n - len(behind)
    spare = in_sync - q.majority
    who = (f"voter{'s' if len(behind) > 1 else ''} {', '.join(behind.values())} "
           f"{'are' if len(behind) > 1 else 'is'} behind; ") if behind else ""
    if spare < 0:
        return [Finding("quorum_lost", CRITICAL, "KRaft quorum",
                        f"{who}{in_sync} of {n} voters are in sync, a majority needs {q.majority}: "
                        "metadata changes stall")]
    if spare >= 1:
        return []
    if behind:
        return [Finding("quorum_at_risk", PROBLEM, "KRaft quorum",
                        f"{who}{in_sync} of {n} voters are in sync and a majority needs {q.majority}: "
                        "losing one more controller stops every metadata change")]
    return [Finding("quorum_small", WARNING, "KRaft quorum",
                    f"a quorum of {n} voter{'s' if n > 1 else ''} cannot lose one: run 3 (or 5) controllers "
                    "for a cluster that outlives a controller")]
