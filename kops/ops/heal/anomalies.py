"""What ``kops heal step`` notices, and its memory of it (pure: no I/O).

:func:`observe` reads one topology snapshot (plus the racks brokers had while they were
registered: a dead broker is gone from the metadata, its rack with it) and returns what is
wrong now, each under a stable key:

- ``broker_failure/<id>``: a broker that holds replicas is not registered;
- ``too_much_down``: more brokers holding replicas are down than ``max_dead_brokers``, or every
  broker of a rack is: an outage or a maintenance, never a job for automation;
- ``no_in_sync_replica``: partitions whose ISR is empty (no leader can be elected cleanly);
  moving data cannot bring them back;
- ``new_broker/<id>``: a registered broker that holds no replica while others do (not a
  cordoned one: ``kops broker cordon``);
- ``rack_unsafe``: partitions whose replica list is not rack-safe (only looked for while every
  broker is up: a dead broker's replicas say nothing about a placement);
- ``unbalanced``: replica counts or preferred leaders per broker outside the balance band (the
  mean ± 10 %, at least ± 1: the planner's band, :func:`kops.placement.goals.band`) -- of the
  cluster and of the broker's rack, so that what rack safety forces is none -- a goal violation
  of the default goal set (only looked for while every broker is up and none is new: those
  anomalies come first; a cordoned broker below the band does not count, nothing can fill it);
- ``log_dir_failure/<id>``: a registered broker reports log dirs offline (a failed disk of a
  JBOD broker); the replicas they held are Metadata's offline replicas on it;
- ``disk_over_threshold/<id>``: a registered broker whose disk use is above the threshold (a
  share of its disk: a capacity file's DISK, else its log dirs' volumes, Kafka 3.3+) -- looked
  for only when a threshold is given (it needs the log dirs' sizes, a DescribeLogDirs round).

:func:`remember` merges an observation into the memory (the anomalies of earlier runs, kept in
the cluster by :mod:`kops.ops.heal.memory`): an anomaly keeps the time it was first seen while
it is seen run after run; one no longer seen ends, ``fixed`` when heal had acted on it,
``cleared`` when it went away by itself (a broker back within its grace). Seen again later, it
is a new episode with a new first-seen time. The decision (:mod:`kops.ops.heal.decide`) sets
each current anomaly's state: in grace, fixing or refused (and why).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from kops.model import Topology

BROKER_FAILURE = "broker_failure"
TOO_MUCH_DOWN = "too_much_down"
NO_ISR = "no_in_sync_replica"
NEW_BROKER = "new_broker"
RACK_UNSAFE = "rack_unsafe"
UNBALANCED = "unbalanced"
DISK_OVER = "disk_over_threshold"
LOG_DIR_FAILURE = "log_dir_failure"
KINDS = (BROKER_FAILURE, TOO_MUCH_DOWN, NO_ISR, NEW_BROKER, RACK_UNSAFE, UNBALANCED, DISK_OVER, LOG_DIR_FAILURE)
#: what ``--fix`` may name: the anomalies heal can mend by moving replicas
FIXABLE = (BROKER_FAILURE, LOG_DIR_FAILURE, NEW_BROKER, RACK_UNSAFE, UNBALANCED, DISK_OVER)
#: mended without ``--fix``: a dead broker's replicas and a failed disk's (the rest is reported)
DEFAULT_FIX = (BROKER_FAILURE, LOG_DIR_FAILURE)
#: fixed at any hour: a dead broker or a failed disk leaves partitions one failure from offline,
#: a disk that keeps filling stops its broker; the other fixes (filling new brokers, rack
#: repairs, balance) wait for ``--window``
URGENT = (BROKER_FAILURE, LOG_DIR_FAILURE, DISK_OVER)

# states
DETECTED = "detected"  # seen, not decided yet (remember's output; decide sets the state)
IN_GRACE = "in_grace"
FIXING = "fixing"
REFUSED = "refused"
FIXED = "fixed"
CLEARED = "cleared"  # went away by itself (e.g. a broker back within its grace)
ENDED = (FIXED, CLEARED)

#: partitions named in an anomaly (the count says how many there are)
NAMED = 20
#: fixes remembered per anomaly
FIX_HISTORY = 20


def iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Observed:
    """One thing wrong in one snapshot."""

    key: str
    kind: str
    subject: str
    detail: str
    brokers: tuple[int, ...] = ()
    partitions: tuple[str, ...] = ()
    #: replicas (broker failure) or partitions affected
    count: int = 0


@dataclass
class Anomaly:
    """An anomaly as heal remembers it: what, since when, and what was done about it."""

    key: str
    kind: str
    subject: str
    detail: str
    first_seen: float
    state: str = DETECTED
    why: str | None = None
    brokers: tuple[int, ...] = ()
    partitions: tuple[str, ...] = ()
    count: int = 0
    #: when it ended (fixed or cleared)
    ended_at: float | None = None
    #: each execution heal started for it: at, execution id, replicas moved, status
    fixes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def active(self) -> bool:
        return self.state not in ENDED

    def age(self, now: float) -> float:
        return max(0.0, now - self.first_seen)

    def add_fix(self, entry: Mapping[str, Any]) -> None:
        self.fixes.append(dict(entry))
        del self.fixes[:-FIX_HISTORY]

    def to_record(self) -> dict[str, Any]:
        """What the memory keeps (JSON-ready, stable: written only when it changes)."""
        return {"key": self.key, "kind": self.kind, "subject": self.subject, "detail": self.detail,
                "first_seen": self.first_seen, "state": self.state, "why": self.why,
                "brokers": list(self.brokers), "partitions": list(self.partitions), "count": self.count,
                "ended_at": self.ended_at, "fixes": list(self.fixes)}

    @classmethod
    def from_record(cls, d: Mapping[str, Any]) -> Anomaly:
        return cls(key=str(d["key"]), kind=str(d["kind"]), subject=str(d.get("subject", d["key"])),
                   detail=str(d.get("detail", "")), first_seen=float(d["first_seen"]),
                   state=str(d.get("state", DETECTED)), why=d.get("why"),
                   brokers=tuple(int(b) for b in d.get("brokers", ())), partitions=tuple(d.get("partitions", ())),
                   count=int(d.get("count", 0)), ended_at=None if d.get("ended_at") is None else float(d["ended_at"]),
                   fixes=[dict(f) for f in d.get("fixes", ())])

    def to_dict(self, now: float | None = None) -> dict[str, Any]:
        """For people and JSON documents: times in ISO-8601 UTC."""
        d = self.to_record()
        d["first_seen"] = iso(self.first_seen)
        d["ended_at"] = iso(self.ended_at)
        if now is not None and self.active:
            d["age_s"] = round(self.age(now), 1)
        return d


def without_topics(topo: Topology, exclude: re.Pattern[str] | None) -> Topology:
    """The topology without the topics ``exclude`` matches (``--exclude-topics``, as a whole
    name: heal neither watches nor moves them)."""
    if exclude is None:
        return topo
    return replace(topo, topics=tuple(t for t in topo.topics if not exclude.fullmatch(t.name)))


def racks_seen(topo: Topology, known: Mapping[int, str | None]) -> dict[int, str | None]:
    """Each broker's rack as last seen registered: ``known`` updated with the brokers registered
    now (a dead broker keeps the rack it had)."""
    out = dict(known)
    for b in topo.brokers:
        if b.alive:
            out[b.id] = b.rack
    return out


def observe(topo: Topology, racks: Mapping[int, str | None], *, max_dead_brokers: int,
            exclude: re.Pattern[str] | None = None, disk_threshold: float | None = None) -> list[Observed]:
    """What is wrong in ``topo`` (see the module doc), sorted by key. ``racks``: the racks
    brokers had while registered (:func:`racks_seen`). ``exclude``: topics not watched
    (``--exclude-topics``); an outage counts every broker down that holds replicas, of any topic,
    and a disk holds every topic's data. ``disk_threshold``: a share of a broker's disk (None:
    disks are not looked at; ``topo`` then needs no sizes)."""
    down_anywhere = {b for p in topo.partitions() for b in p.replicas} - set(topo.alive_broker_ids)
    over_disk = disk_use(topo).over(disk_threshold) if disk_threshold is not None else {}
    topo = without_topics(topo, exclude)
    holding: dict[int, int] = {}
    no_isr: list[str] = []
    for p in topo.partitions():
        for b in p.replicas:
            holding[b] = holding.get(b, 0) + 1
        if p.replicas and not p.isr:
            no_isr.append(f"{p.topic}-{p.partition}")
    alive = {b.id for b in topo.brokers if b.alive}
    out: list[Observed] = []
    for b in sorted(b for b in holding if b not in alive):
        rack = racks.get(b)
        where = f" (rack {rack})" if rack is not None else " (rack unknown: never seen registered by heal)"
        out.append(Observed(f"{BROKER_FAILURE}/{b}", BROKER_FAILURE, f"broker {b}",
                            f"broker {b}{where} is not registered and holds {holding[b]} replicas",
                            brokers=(b,), count=holding[b]))
    dead = sorted(down_anywhere)
    why_down = []
    if len(dead) > max_dead_brokers:
        why_down.append(f"{len(dead)} brokers holding replicas are down ({', '.join(map(str, dead))}), "
                        f"more than --max-dead-brokers {max_dead_brokers}")
    rack_alive: dict[str, int] = {}
    for b in alive:
        r = racks.get(b)
        if r is not None:
            rack_alive[r] = rack_alive.get(r, 0) + 1
    down_racks = sorted({r for b in dead if (r := racks.get(b)) is not None and not rack_alive.get(r)})
    if down_racks and alive:
        why_down.append(f"every broker of rack{'s' if len(down_racks) > 1 else ''} {', '.join(down_racks)} is down")
    if why_down:
        out.append(Observed(TOO_MUCH_DOWN, TOO_MUCH_DOWN, "cluster", "; ".join(why_down), brokers=tuple(dead),
                            count=len(dead)))
    if no_isr:
        out.append(Observed(NO_ISR, NO_ISR, f"{len(no_isr)} partitions",
                            f"{len(no_isr)} partitions have no in-sync replica (e.g. {', '.join(no_isr[:3])})",
                            partitions=tuple(no_isr[:NAMED]), count=len(no_isr)))
    if holding:
        cordoned = {b.id for b in topo.brokers if b.cordoned}  # (empty on purpose: nothing to fill)
        for b in sorted(alive):
            if not holding.get(b) and b not in cordoned:
                out.append(Observed(f"{NEW_BROKER}/{b}", NEW_BROKER, f"broker {b}",
                                    f"broker {b} (rack {racks.get(b)}) is registered and holds no replica",
                                    brokers=(b,)))
    if not dead:
        unsafe = _rack_unsafe(topo)
        if unsafe:
            out.append(Observed(RACK_UNSAFE, RACK_UNSAFE, f"{len(unsafe)} partitions",
                                f"{len(unsafe)} partitions are not rack-safe (e.g. {', '.join(unsafe[:3])})",
                                partitions=tuple(unsafe[:NAMED]), count=len(unsafe)))
        if not any(o.kind == NEW_BROKER for o in out):
            off = _off_band(topo, alive)
            if off:
                out.append(Observed(UNBALANCED, UNBALANCED, "cluster", "; ".join(d for d, _ in off),
                                    brokers=tuple(sorted({b for _, bs in off for b in bs})),
                                    count=len({b for _, bs in off for b in bs})))
    for b in sorted(alive):
        failed = topo.broker(b).offline_log_dirs  # type: ignore[union-attr]
        if failed:
            held = sorted(f"{p.topic}-{p.partition}" for p in topo.partitions() if b in p.offline_replicas)
            what = (f"{len(held)} replicas on it are offline (e.g. {', '.join(held[:3])})" if held
                    else "no replica of a watched topic was there")
            out.append(Observed(f"{LOG_DIR_FAILURE}/{b}", LOG_DIR_FAILURE, f"broker {b}",
                                f"broker {b} (rack {racks.get(b)}) reports log dir{'s' if len(failed) > 1 else ''} "
                                f"{', '.join(failed)} offline: {what}", brokers=(b,),
                                partitions=tuple(held[:NAMED]), count=len(held)))
    for b, use in sorted(over_disk.items()):
        out.append(Observed(f"{DISK_OVER}/{b}", DISK_OVER, f"broker {b}",
                            f"broker {b} (rack {racks.get(b)}) uses {use:.1%} of its disk, above the threshold "
                            f"{disk_threshold:.0%}", brokers=(b,)))
    return sorted(out, key=lambda o: o.key)


@dataclass(frozen=True)
class DiskUse:
    """Each registered broker's disk use, a share of its disk, where its capacity is known
    (``use``), and the registered brokers whose capacity is not (``unknown``) or whose replicas'
    sizes are not (``unsized``: use is then not judged)."""

    use: Mapping[int, float]
    unknown: tuple[int, ...] = ()
    unsized: bool = False

    def over(self, threshold: float) -> dict[int, float]:
        return {b: u for b, u in self.use.items() if u > threshold}

    def note(self) -> str | None:
        """Why disk use is not judged on some brokers (None: it is on every one)."""
        if self.unsized:
            return "disk use not judged: the partitions' sizes were not read (DescribeLogDirs answered no size)"
        if self.unknown:
            return (f"disk use not judged on broker{'s' if len(self.unknown) > 1 else ''} "
                    f"{', '.join(map(str, self.unknown))}: capacity unknown (the log dirs' volumes are measured on "
                    "Kafka 3.3+, KIP-827, and not for brokers sharing one volume; or give --capacity-file)")
        return None


def disk_use(topo: Topology) -> DiskUse:
    """Each registered broker's disk use (:class:`DiskUse`): its volumes' used bytes where the
    log dirs measure them, else the sizes of the replicas it holds, over its capacity (the
    planner's measure: :func:`kops.placement.capacity.disk_used`)."""
    from kops.placement.capacity import disk_capacity, disk_used, shared_disks

    alive = [b for b in topo.brokers if b.alive]
    held: dict[int, int] = {}
    unsized = False
    for p in topo.partitions():
        if p.size_bytes is None:
            unsized = True
            break
        for b in p.replicas:
            held[b] = held.get(b, 0) + p.size_bytes
    if unsized:
        return DiskUse({}, unsized=True)
    shared = shared_disks(topo)
    use: dict[int, float] = {}
    unknown = []
    for b in alive:
        cap = disk_capacity(b, shared)
        if cap:
            use[b.id] = disk_used(b, held.get(b.id, 0), shared) / cap
        else:
            unknown.append(b.id)
    return DiskUse(use, tuple(sorted(unknown)))


def _off_band(topo: Topology, alive: set[int]) -> list[tuple[str, tuple[int, ...]]]:
    """Replica counts and preferred leaders per alive broker outside the balance band: per
    measure, what is off and the brokers off it. A broker is off when it is outside the band of
    the cluster's mean *and* outside that of its rack's mean: what rack safety forces (the last
    broker of a rack holding the rack's share alone) is no anomaly, nothing could spread it. A
    cordoned broker below the band is left out (nothing may fill it)."""
    from kops.placement.goals import BAND, band

    cordoned = {b.id for b in topo.brokers if b.cordoned}
    rack = {b.id: b.rack for b in topo.brokers}
    counts = {"replicas": dict.fromkeys(alive, 0), "preferred leaders": dict.fromkeys(alive, 0)}
    for p in topo.partitions():
        for i, b in enumerate(p.replicas):
            if b in alive:
                counts["replicas"][b] += 1
                if i == 0:
                    counts["preferred leaders"][b] += 1
    out = []
    for what, per in counts.items():
        if not per or not any(per.values()):
            continue
        mean = sum(per.values()) / len(per)
        lo, hi = band(mean, 1.0, BAND)
        by_rack: dict[str | None, list[int]] = {}
        for b, x in per.items():
            by_rack.setdefault(rack.get(b), []).append(x)
        rack_band = {r: band(sum(xs) / len(xs), 1.0, BAND) for r, xs in by_rack.items()}

        def off(b: int, x: int) -> int:  # 1 above, -1 below both bands, 0 within one
            rlo, rhi = rack_band[rack.get(b)]
            return 1 if x > hi and x > rhi else -1 if x < lo and x < rlo else 0

        over = sorted(b for b, x in per.items() if off(b, x) > 0)
        under = sorted(b for b, x in per.items() if off(b, x) < 0 and b not in cordoned)
        if over or under:
            named = ", ".join(f"broker {b} holds {per[b]}" for b in (over + under)[:6])
            out.append((f"{what} per broker {min(per.values())}-{max(per.values())}, band {lo:.1f}-{hi:.1f} "
                        f"(mean {mean:.1f} ± max(10 %, 1); its rack's too): {named}", tuple(over + under)))
    return out


def _rack_unsafe(topo: Topology) -> list[str]:
    from kops.health import check_health

    return [f.subject for f in check_health(topo).findings if f.check == "rack_unsafe"]


@dataclass
class Remembered:
    """The memory after one observation: ``current`` (seen now, first-seen times kept),
    ``ended`` (gone this run: fixed or cleared) and ``history`` (ended earlier, still kept)."""

    current: list[Anomaly]
    ended: list[Anomaly]
    history: list[Anomaly]


def remember(observed: Iterable[Observed], memory: Mapping[str, Anomaly], now: float) -> Remembered:
    """Merge what was observed at ``now`` into the memory (see the module doc)."""
    current: list[Anomaly] = []
    seen: set[str] = set()
    for o in observed:
        seen.add(o.key)
        before = memory.get(o.key)
        if before is not None and before.active:
            a = replace(before, subject=o.subject, detail=o.detail, brokers=o.brokers, partitions=o.partitions,
                        count=o.count, fixes=list(before.fixes))
        else:  # new, or a new episode of an anomaly that had ended
            a = Anomaly(o.key, o.kind, o.subject, o.detail, first_seen=now, brokers=o.brokers,
                        partitions=o.partitions, count=o.count,
                        fixes=list(before.fixes) if before is not None else [])
        current.append(a)
    ended: list[Anomaly] = []
    history: list[Anomaly] = []
    for key, a in sorted(memory.items()):
        if key in seen:
            continue
        if a.active:
            done = FIXED if a.state == FIXING or _fixed_in_episode(a) else CLEARED
            why = ("gone by itself before heal acted" if done == CLEARED else
                   "heal's moves brought its disk use under the threshold" if a.kind == DISK_OVER else
                   "heal's moves re-created what it lacked")
            ended.append(replace(a, state=done, why=why, ended_at=now, fixes=list(a.fixes)))
        else:
            history.append(a)
    return Remembered(current, ended, history)


def _fixed_in_episode(a: Anomaly) -> bool:
    return any(float(f.get("at_ts", 0)) >= a.first_seen for f in a.fixes)
