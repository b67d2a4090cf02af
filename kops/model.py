"""Immutable topology model and Kafka's JSON formats. No I/O here.

Everything kops reads from a cluster ends up in a :class:`Topology`; everything it plans is a
:class:`ReassignmentPlan` in Kafka's reassignment JSON format, so that kops and
``kafka-reassign-partitions.sh`` run each other's plans.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from kops.inputs import Problems, guarded
from kops.inputs import values as input_values
TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class LogDir:
    """One log dir of a broker and the volume it lives on (DescribeLogDirs). ``total_bytes`` /
    ``usable_bytes`` are the volume's size and the bytes still usable on it (KIP-827: Kafka 3.3+
    answers them from DescribeLogDirs v4); None when the broker does not report them."""

    path: str
    total_bytes: int | None = None
    usable_bytes: int | None = None
    #: the broker reports the dir offline (a disk error): nothing can be written there
    offline: bool = False

    @property
    def capacity_known(self) -> bool:
        return self.total_bytes is not None and self.usable_bytes is not None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"path": self.path, "total_bytes": self.total_bytes, "usable_bytes": self.usable_bytes}
        if self.offline:
            d["offline"] = True
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LogDir:
        return cls(
            path=d["path"],
            total_bytes=d.get("total_bytes"),
            usable_bytes=d.get("usable_bytes"),
            offline=bool(d.get("offline", False)),
        )


#: Cruise Control's resources, as its capacity file names them
RESOURCES = ("DISK", "NW_IN", "NW_OUT", "CPU")


@dataclass(frozen=True, slots=True)
class Capacity:
    """What a broker can hold and carry: disk bytes, network in / out in bytes per second, CPU
    (percent of the machine, Cruise Control's unit; or cores). None where not known. ``source``
    says where each known figure came from ("capacity file", "measured": the log dirs' volumes)."""

    disk_bytes: int | None = None
    nw_in_bytes_per_s: float | None = None
    nw_out_bytes_per_s: float | None = None
    cpu: float | None = None
    source: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if not isinstance(self.source, MappingProxyType):
            object.__setattr__(self, "source", MappingProxyType(dict(self.source or {})))

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {}
        for key, value in (("disk_bytes", self.disk_bytes), ("nw_in_bytes_per_s", self.nw_in_bytes_per_s),
                           ("nw_out_bytes_per_s", self.nw_out_bytes_per_s), ("cpu", self.cpu)):
            if value is not None:
                d[key] = value
        if self.source:
            d["source"] = dict(sorted(self.source.items()))
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Capacity:
        return cls(disk_bytes=d.get("disk_bytes"), nw_in_bytes_per_s=d.get("nw_in_bytes_per_s"),
                   nw_out_bytes_per_s=d.get("nw_out_bytes_per_s"), cpu=d.get("cpu"), source=d.get("source") or {})


@dataclass(frozen=True, slots=True)
class LoadSample:
    """How the partitions' ingress rates (``Partition.bytes_in_per_s``) were measured: over a
    window of ``seconds`` from ``started_at``, from the partitions' end offsets and sizes at both
    ends. ``notes`` say how good the estimate is (partitions whose size shrank in the window,
    rates from offsets times the average message size, partitions not measured)."""

    seconds: float
    started_at: str | None = None
    partitions: int = 0
    by_size: int = 0
    by_offsets: int = 0
    unmeasured: int = 0
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "started_at": self.started_at, "partitions": self.partitions,
                "by_size": self.by_size, "by_offsets": self.by_offsets, "unmeasured": self.unmeasured,
                "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LoadSample:
        return cls(seconds=float(d["seconds"]), started_at=d.get("started_at"), partitions=int(d.get("partitions", 0)),
                   by_size=int(d.get("by_size", 0)), by_offsets=int(d.get("by_offsets", 0)),
                   unmeasured=int(d.get("unmeasured", 0)), notes=tuple(d.get("notes", ())))


@dataclass(frozen=True, slots=True)
class QuorumReplica:
    """One replica of the KRaft metadata log as the quorum's leader sees it (DescribeQuorum): a
    voter (a controller) or an observer (a broker). Times are the leader's wall clock in ms
    since the epoch, -1 where the leader does not know them (Kafka before 3.3 sends none)."""

    id: int
    log_end_offset: int = -1
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    #: its log directory's id as Kafka prints it (base64url; DescribeQuorum v2, Kafka 3.9, KIP-853),
    #: None where the answer has none: what AddRaftVoter and RemoveRaftVoter name a replica by
    directory_id: str | None = None


@dataclass(frozen=True, slots=True)
class Quorum:
    """The KRaft metadata quorum (``__cluster_metadata``, DescribeQuorum): its leader (the active
    controller, -1 when none), epoch, high watermark, voters and observers. ``now_ms`` is the
    leader's clock when it answered (its own last caught-up time), so that the followers' ages
    need no clock shared with the reader."""

    leader: int
    epoch: int
    high_watermark: int
    voters: tuple[QuorumReplica, ...]
    observers: tuple[QuorumReplica, ...] = ()

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    @property
    def now_ms(self) -> int:
        mine = [v.last_caught_up_ms for v in self.voters if v.id == self.leader]
        return mine[0] if mine else -1

    def lag(self, r: QuorumReplica) -> int | None:
        """Records the replica is behind the high watermark (None: its log end is unknown)."""
        return None if r.log_end_offset < 0 else max(0, self.high_watermark - r.log_end_offset)

    def behind_s(self, r: QuorumReplica) -> float | None:
        """Seconds since the replica was last caught up with the leader (0 for the leader; None
        when the leader did not say)."""
        if r.id == self.leader:
            return 0.0
        if r.last_caught_up_ms < 0 or self.now_ms < 0:
            return None
        return max(0.0, (self.now_ms - r.last_caught_up_ms) / 1000.0)

    def silent(self, r: QuorumReplica) -> bool:
        """A follower that has not fetched from this leader at all (the leader reports its fetch
        times, Kafka 3.3+, but none for it): down since before the leader was elected, typically."""
        return r.id != self.leader and self.now_ms >= 0 and r.last_fetch_ms < 0

    def to_dict(self) -> dict[str, Any]:
        def rep(r: QuorumReplica) -> dict[str, Any]:
            return {"id": r.id, "log_end_offset": r.log_end_offset, "lag": self.lag(r),
                    "last_fetch_ms": r.last_fetch_ms, "last_caught_up_ms": r.last_caught_up_ms,
                    "behind_s": self.behind_s(r), **({"directory_id": r.directory_id} if r.directory_id else {})}

        return {"leader": self.leader, "epoch": self.epoch, "high_watermark": self.high_watermark,
                "voters": [rep(v) for v in self.voters], "observers": [rep(o) for o in self.observers]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Quorum:
        def rep(r: Mapping[str, Any]) -> QuorumReplica:
            return QuorumReplica(id=int(r["id"]), log_end_offset=int(r.get("log_end_offset", -1)),
                                 last_fetch_ms=int(r.get("last_fetch_ms", -1)),
                                 last_caught_up_ms=int(r.get("last_caught_up_ms", -1)),
                                 directory_id=r.get("directory_id"))

        return cls(leader=int(d["leader"]), epoch=int(d.get("epoch", -1)), high_watermark=int(d.get("high_watermark", -1)),
                   voters=tuple(rep(v) for v in d.get("voters", ())),
                   observers=tuple(rep(o) for o in d.get("observers", ())))


@dataclass(frozen=True, slots=True)
class Broker:
    id: int
    rack: str | None = None
    host: str | None = None
    port: int | None = None
    alive: bool = True
    capacity_bytes: int | None = None
    #: dynamic broker configs that matter to operations (replication throttle rates)
    configs: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    #: the broker's log dirs with their volumes' sizes, when read (empty: not known)
    log_dirs: tuple[LogDir, ...] = ()
    #: disk / network / CPU capacity (a capacity file, measured disk), when known
    capacity: Capacity | None = None
    #: the Kafka release its ApiVersions answer fits (``3.6``; ``4.3+`` past kafka-python's
    #: table), when read (kops.cluster.versions)
    kafka_version: str | None = None
    #: cordoned: no plan or heal step of kops gives it a new replica (``kops broker cordon``, or
    #: Kafka's own ``cordoned.log.dirs=*``, KIP-1066); it keeps the replicas it holds
    cordoned: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.configs, MappingProxyType):
            object.__setattr__(self, "configs", MappingProxyType(dict(self.configs or {})))
        if not isinstance(self.log_dirs, tuple):
            object.__setattr__(self, "log_dirs", tuple(self.log_dirs or ()))

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "id": self.id,
            "rack": self.rack,
            "host": self.host,
            "port": self.port,
            "alive": self.alive,
        }
        if self.capacity_bytes is not None:
            d["capacity_bytes"] = self.capacity_bytes
        if self.configs:
            d["configs"] = dict(sorted(self.configs.items()))
        if self.log_dirs:
            d["log_dirs"] = [ld.to_dict() for ld in self.log_dirs]
        if self.capacity is not None:
            d["capacity"] = self.capacity.to_dict()
        if self.kafka_version is not None:
            d["kafka_version"] = self.kafka_version
        if self.cordoned:
            d["cordoned"] = True
        return d

    @property
    def offline_log_dirs(self) -> tuple[str, ...]:
        """Paths of the log dirs the broker reports offline (a failed disk; read with sizes)."""
        return tuple(d.path for d in self.log_dirs if d.offline)

    @property
    def measured_disk_bytes(self) -> int | None:
        """The total bytes of the volumes of its online log dirs, when every one reports it
        (KIP-827). Log dirs are assumed to be on volumes of their own (JBOD's usual layout):
        two log dirs sharing one volume count it twice."""
        online = [d for d in self.log_dirs if not d.offline]
        if not online or any(d.total_bytes is None for d in online):
            return None
        return sum(d.total_bytes or 0 for d in online)


@dataclass(frozen=True, slots=True)
class Partition:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...] = ()
    leader: int | None = None
    size_bytes: int | None = None
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    #: bytes written to the partition per second (its leader's bytes-in; each follower fetches
    #: as much), from a sample of the cluster (:class:`LoadSample`); None when not sampled
    bytes_in_per_s: float | None = None
    #: replicas on a live broker whose log dir failed (Metadata's offline replicas, KIP-112);
    #: read only when some broker reports an offline log dir
    offline_replicas: tuple[int, ...] = ()

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def preferred_leader(self) -> int | None:
        return self.replicas[0] if self.replicas else None

    @property
    def offline(self) -> bool:
        return self.leader is None or self.leader < 0

    @property
    def reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "partition": self.partition,
            "replicas": list(self.replicas),
            "isr": list(self.isr),
            "leader": self.leader,
        }
        if self.size_bytes is not None:
            d["size_bytes"] = self.size_bytes
        if self.adding_replicas:
            d["adding_replicas"] = list(self.adding_replicas)
        if self.removing_replicas:
            d["removing_replicas"] = list(self.removing_replicas)
        if self.bytes_in_per_s is not None:
            d["bytes_in_per_s"] = self.bytes_in_per_s
        if self.offline_replicas:
            d["offline_replicas"] = list(self.offline_replicas)
        return d


def _frozen(mapping: Mapping[str, str] | None) -> Mapping[str, str]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True, slots=True)
class Topic:
    name: str
    partitions: tuple[Partition, ...]
    internal: bool = False
    configs: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if not isinstance(self.configs, MappingProxyType):
            object.__setattr__(self, "configs", _frozen(self.configs))

    @property
    def replication_factor(self) -> int:
        return max((len(p.replicas) for p in self.partitions), default=0)

    def min_insync_replicas(self, default: int = 1) -> int:
        value = self.configs.get("min.insync.replicas")
        return int(value) if value is not None else default

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "internal": self.internal,
            "configs": dict(sorted(self.configs.items())),
            "partitions": [p.to_dict() for p in self.partitions],
        }


@dataclass(frozen=True)
class Topology:
    """A point-in-time picture of a cluster (see schemas/topology.schema.json)."""

    brokers: tuple[Broker, ...]
    topics: tuple[Topic, ...]
    controller: int | None = None
    cluster_id: str | None = None
    mode: str | None = None  # "zookeeper" | "kraft" | None
    captured_at: str | None = None
    #: free-form notes from the reader (e.g. disagreements between Admin API and ZooKeeper)
    notes: tuple[str, ...] = ()
    #: how ``Partition.bytes_in_per_s`` were measured, when the cluster was sampled
    load_sample: LoadSample | None = None
    #: KRaft: the metadata quorum as its leader described it (None in ZooKeeper mode or unread)
    quorum: Quorum | None = None

    # -- lookups ---------------------------------------------------------------------------
    @property
    def broker_map(self) -> dict[int, Broker]:
        cached = self.__dict__.get("_broker_map")
        if cached is None:
            cached = {b.id: b for b in self.brokers}
            object.__setattr__(self, "_broker_map", cached)
        return cached

    @property
    def topic_map(self) -> dict[str, Topic]:
        cached = self.__dict__.get("_topic_map")
        if cached is None:
            cached = {t.name: t for t in self.topics}
            object.__setattr__(self, "_topic_map", cached)
        return cached

    def broker(self, broker_id: int) -> Broker | None:
        return self.broker_map.get(broker_id)

    def topic(self, name: str) -> Topic | None:
        return self.topic_map.get(name)

    def partitions(self) -> Iterator[Partition]:
        for t in self.topics:
            yield from t.partitions

    def partition(self, topic: str, partition: int) -> Partition | None:
        t = self.topic(topic)
        if t is None:
            return None
        for p in t.partitions:
            if p.partition == partition:
                return p
        return None

    @property
    def alive_broker_ids(self) -> list[int]:
        return sorted(b.id for b in self.brokers if b.alive)

    def rack_of(self, broker_id: int) -> str | None:
        b = self.broker_map.get(broker_id)
        return b.rack if b else None

    @property
    def racks(self) -> list[str]:
        return sorted({b.rack for b in self.brokers if b.rack is not None})

    def brokers_in_rack(self, rack: str) -> list[int]:
        return sorted(b.id for b in self.brokers if b.rack == rack)

    def assignment(self) -> dict[TopicPartition, tuple[int, ...]]:
        return {p.tp: p.replicas for p in self.partitions()}

    def with_assignment(self, assignment: Mapping[TopicPartition, Iterable[int]]) -> Topology:
        """A copy whose replica lists are replaced for the partitions in ``assignment``."""
        topics = []
        for t in self.topics:
            parts = tuple(
                replace(p, replicas=tuple(assignment[p.tp])) if p.tp in assignment else p
                for p in t.partitions
            )
            topics.append(replace(t, partitions=parts))
        return replace(self, topics=tuple(topics))

    def _with_partition_values(self, field_name: str, values: Mapping[TopicPartition, Any]) -> tuple[Topic, ...]:
        """The topics, with ``field_name`` of each partition in ``values`` set to its value."""
        return tuple(
            replace(t, partitions=tuple(
                replace(p, **{field_name: values[p.tp]}) if p.tp in values else p for p in t.partitions))
            for t in self.topics
        )

    def with_leaders(self, leaders: Mapping[TopicPartition, int]) -> Topology:
        """A copy whose partitions in ``leaders`` are led by that broker."""
        return replace(self, topics=self._with_partition_values("leader", leaders)) if leaders else self

    def with_sizes(self, sizes: Mapping[TopicPartition, int]) -> Topology:
        """A copy whose partitions in ``sizes`` have that ``size_bytes``."""
        return replace(self, topics=self._with_partition_values("size_bytes", sizes)) if sizes else self

    def with_log_dirs(self, log_dirs: Mapping[int, Iterable[LogDir]]) -> Topology:
        """A copy whose brokers in ``log_dirs`` have those log dirs."""
        if not log_dirs:
            return self
        brokers = tuple(
            replace(b, log_dirs=tuple(log_dirs[b.id])) if b.id in log_dirs else b for b in self.brokers
        )
        return replace(self, brokers=brokers)

    def with_offline_replicas(self, offline: Mapping[TopicPartition, Iterable[int]]) -> Topology:
        """A copy whose partitions in ``offline`` have those ``offline_replicas``."""
        return replace(self, topics=self._with_partition_values(
            "offline_replicas", {tp: tuple(rs) for tp, rs in offline.items()})) if offline else self

    def with_rates(self, rates: Mapping[TopicPartition, float], sample: LoadSample) -> Topology:
        """A copy whose partitions in ``rates`` have that ``bytes_in_per_s``, measured by ``sample``."""
        return replace(self, topics=self._with_partition_values("bytes_in_per_s", rates), load_sample=sample)

    def with_capacities(self, capacities: Mapping[int, Capacity]) -> Topology:
        """A copy whose brokers have their capacity: the entry for the broker, else the default
        entry (broker id -1, as in Cruise Control's file); the disk measured from the broker's
        log dirs where the file is silent on DISK. Brokers with neither keep what they had."""
        default = capacities.get(-1)
        brokers = []
        for b in self.brokers:
            cap = capacities.get(b.id, default)
            measured = b.measured_disk_bytes
            if cap is None:
                cap = b.capacity
            if measured is not None and (cap is None or cap.disk_bytes is None):
                cap = replace(cap or Capacity(), disk_bytes=measured,
                              source={**dict((cap.source if cap else {})), "DISK": "measured"})
            brokers.append(replace(b, capacity=cap) if cap is not None else b)
        return replace(self, brokers=tuple(brokers))

    def kafka_versions(self) -> str | None:
        """The Kafka releases the brokers run, oldest to newest: ``3.6``, ``3.5 - 3.6`` mid-upgrade;
        None when not read."""
        def order(v: str) -> tuple:
            digits = v.rstrip("+").split(".")
            return tuple(int(x) for x in digits) if all(x.isdigit() for x in digits) else (-1, v)

        seen = sorted({b.kafka_version for b in self.brokers if b.kafka_version}, key=order)
        if not seen:
            return None
        return seen[0] if len(seen) == 1 else f"{seen[0]} - {seen[-1]}"

    # -- serialisation ---------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "version": 1,
            "cluster_id": self.cluster_id,
            "controller": self.controller,
            "mode": self.mode,
            "captured_at": self.captured_at,
            "brokers": [b.to_dict() for b in sorted(self.brokers, key=lambda b: b.id)],
            "topics": [t.to_dict() for t in sorted(self.topics, key=lambda t: t.name)],
        }
        if self.notes:
            d["notes"] = list(self.notes)
        if self.load_sample is not None:
            d["load_sample"] = self.load_sample.to_dict()
        if self.quorum is not None:
            d["quorum"] = self.quorum.to_dict()
        return d

    @classmethod
    def from_dict(cls, data: Any) -> Topology:
        """Build from a snapshot dict already validated against the schema."""
        brokers = tuple(
            Broker(
                id=int(b["id"]),
                rack=b.get("rack"),
                host=b.get("host"),
                port=b.get("port"),
                alive=bool(b.get("alive", True)),
                capacity_bytes=b.get("capacity_bytes"),
                configs=b.get("configs") or {},
                log_dirs=tuple(LogDir.from_dict(d) for d in b.get("log_dirs") or ()),
                capacity=Capacity.from_dict(b["capacity"]) if b.get("capacity") else None,
                kafka_version=b.get("kafka_version"),
                cordoned=bool(b.get("cordoned", False)),
            )
            for b in data["brokers"]
        )
        topics = []
        for t in data["topics"]:
            parts = tuple(
                Partition(
                    topic=t["name"],
                    partition=int(p["partition"]),
                    replicas=tuple(int(r) for r in p["replicas"]),
                    isr=tuple(int(r) for r in p.get("isr", p["replicas"])),
                    leader=_leader_from(p),
                    size_bytes=p.get("size_bytes"),
                    adding_replicas=tuple(p.get("adding_replicas", ())),
                    removing_replicas=tuple(p.get("removing_replicas", ())),
                    bytes_in_per_s=p.get("bytes_in_per_s"),
                    offline_replicas=tuple(int(r) for r in p.get("offline_replicas", ())),
                )
                for p in sorted(t["partitions"], key=lambda p: p["partition"])
            )
            topics.append(
                Topic(
                    name=t["name"],
                    partitions=parts,
                    internal=bool(t.get("internal", False)),
                    configs=t.get("configs", {}),
                )
            )
        return cls(
            brokers=brokers,
            topics=tuple(topics),
            controller=data.get("controller"),
            cluster_id=data.get("cluster_id"),
            mode=data.get("mode"),
            captured_at=data.get("captured_at"),
            notes=tuple(data.get("notes", ())),
            load_sample=LoadSample.from_dict(data["load_sample"]) if data.get("load_sample") else None,
            quorum=Quorum.from_dict(data["quorum"]) if data.get("quorum") else None,
        )

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)


def _leader_from(p: Mapping[str, Any]) -> int | None:
    if "leader" not in p:
        # a snapshot written by hand: assume the preferred leader leads
        return p["replicas"][0] if p["replicas"] else None
    leader = p["leader"]
    return None if leader is None or leader < 0 else int(leader)


# ------------------------------------------------------------------------------------------
# Kafka's reassignment JSON: {"version":1,"partitions":[{"topic","partition","replicas","log_dirs"}]}
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlanEntry:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    log_dirs: tuple[str, ...] | None = None

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "replicas": list(self.replicas),
            "log_dirs": list(self.log_dirs) if self.log_dirs is not None else ["any"] * len(self.replicas),
        }


@dataclass(frozen=True)
class ReassignmentPlan:
    entries: tuple[PlanEntry, ...]

    @classmethod
    def from_assignment(cls, assignment: Mapping[TopicPartition, Iterable[int]]) -> ReassignmentPlan:
        return cls(
            tuple(PlanEntry(t, p, tuple(r)) for (t, p), r in sorted(assignment.items()))
        )

    def assignment(self) -> dict[TopicPartition, tuple[int, ...]]:
        return {e.tp: e.replicas for e in self.entries}

    def to_dict(self) -> dict[str, Any]:
        return {"version": 1, "partitions": [e.to_dict() for e in self.entries]}

    def to_json(self) -> str:
        """Kafka's compact one-line form (what ``--generate`` prints)."""
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str, *, source: str = "reassignment JSON") -> ReassignmentPlan:
        from kops.inputs.files import parse_json

        return cls.from_dict(parse_json(text, source=source), source=source)

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "reassignment JSON", allow_empty: bool = True) -> ReassignmentPlan:
        """Parse and check the format; every offending entry is named in one error."""
        parsed = parse_plan(data, source=source, allow_empty=allow_empty)
        parsed.problems.raise_if_any()
        return parsed.plan


@dataclass(frozen=True)
class ParsedPlan:
    """A reassignment JSON document read as far as it goes: the plan of its good entries, every
    problem (JSON path and reason), and ``refs``: each entry whose topic and partition could be
    read (replicas: its valid broker ids), for the checks only a cluster can make."""

    plan: ReassignmentPlan
    problems: Any  # kops.inputs.Problems
    refs: tuple[PlanEntry, ...]


@guarded
def parse_plan(data: Any, *, source: str = "reassignment JSON", allow_empty: bool = True) -> ParsedPlan:
    """Kafka's reassignment JSON ``{"version":1,"partitions":[{"topic","partition","replicas",
    "log_dirs"}]}``, every problem collected (all the entries, all the fields of each)."""
    problems = Problems(source)
    if not isinstance(data, dict):
        problems.add("", 'expected a JSON object {"version": 1, "partitions": [...]}')
        return ParsedPlan(ReassignmentPlan(()), problems, ())
    version = data.get("version", 1)
    if isinstance(version, bool) or version != 1:
        problems.add("version", f"unsupported version {input_values.show(version)} (only 1)")
    parts = data.get("partitions")
    if not isinstance(parts, list):
        problems.add("partitions", "missing or not a list" if parts is None else "must be a list")
        return ParsedPlan(ReassignmentPlan(()), problems, ())
    if not parts and not allow_empty:
        problems.add("partitions", "the plan has no partitions (Kafka: the reassignment list cannot be empty)")
    entries: list[PlanEntry] = []
    refs: list[PlanEntry] = []
    first: dict[TopicPartition, int] = {}
    for i, p in enumerate(parts):
        where = f"partitions[{i}]"
        if not isinstance(p, dict):
            problems.add(where, f'expected an object {{"topic", "partition", "replicas"}}, not {input_values.show(p)}')
            continue
        n = len(problems)
        topic, part, reps, log_dirs = p.get("topic"), p.get("partition"), p.get("replicas"), p.get("log_dirs")
        tp = _entry_tp(p, i, problems, first)
        good_reps: list[int] = []
        if not isinstance(reps, list) or not reps:
            problems.add(f"{where}.replicas", "missing" if reps is None else "must be a non-empty list of broker ids")
        else:
            for j, r in enumerate(reps):
                try:
                    good_reps.append(input_values.broker_id(r, text=False))
                except input_values.Invalid as e:
                    problems.add(f"{where}.replicas[{j}]", str(e))
            dups = sorted({b for b in good_reps if good_reps.count(b) > 1})
            if dups:
                problems.add(f"{where}.replicas", f"duplicate replica{'s' if len(dups) > 1 else ''} "
                             f"{', '.join(map(str, dups))} in {reps}")
        if log_dirs is not None:
            if not isinstance(log_dirs, list) or not all(isinstance(d, str) for d in log_dirs):
                problems.add(f"{where}.log_dirs", "must be a list of strings (\"any\" or absolute paths)")
            else:
                if isinstance(reps, list) and len(log_dirs) != len(reps):
                    problems.add(f"{where}.log_dirs", f"{len(log_dirs)} log dirs for {len(reps)} replicas (must be equal)")
                bad = [d for d in log_dirs if d != "any" and not d.startswith("/")]
                if bad:
                    problems.add(f"{where}.log_dirs", f"must be \"any\" or absolute paths, not {bad[:3]}")
        if tp is not None:
            refs.append(PlanEntry(topic, part, tuple(dict.fromkeys(good_reps))))
        if len(problems) == n:
            entries.append(PlanEntry(topic, part, tuple(reps), tuple(log_dirs) if log_dirs is not None else None))
    return ParsedPlan(ReassignmentPlan(tuple(entries)), problems, tuple(refs))


def _entry_tp(e: dict, i: int, problems: Problems, first: dict[TopicPartition, int]) -> TopicPartition | None:
    """The topic and partition of entry ``partitions[i]``, checked (Kafka's topic-name rules,
    an int32 partition; each problem named with its JSON path), or None when either is bad. An
    entry whose partition came before (``first``) is a problem too: Kafka refuses duplicates."""
    where = f"partitions[{i}]"
    topic, part = e.get("topic"), e.get("partition")
    why = input_values.topic_problem(topic)
    if why:
        problems.add(f"{where}.topic", why if "topic" in e else "missing")
    try:
        input_values.integer(part, what="a partition number", text=False)
    except input_values.Invalid as err:
        problems.add(f"{where}.partition", str(err) if "partition" in e else "missing")
        return None
    if why:
        return None
    if (topic, part) in first:
        problems.add(where, f"{topic}-{part} again: a duplicate of partitions[{first[(topic, part)]}]")
    else:
        first[(topic, part)] = i
    return (topic, part)


@guarded
def parse_topics_to_move(data: Any, *, source: str = "topics-to-move JSON") -> list[str]:
    """Kafka's ``{"topics":[{"topic":"foo"}],"version":1}`` format (a topic given twice counts once)."""
    problems = Problems(source)
    topics = data.get("topics") if isinstance(data, dict) else None
    if not isinstance(topics, list) or not topics:
        problems.add("topics" if isinstance(data, dict) else "",
                     'expected {"topics": [{"topic": NAME}, ...], "version": 1} with at least one topic')
        problems.raise_if_any("")
    version = data.get("version", 1)
    if isinstance(version, bool) or version != 1:
        problems.add("version", f"unsupported version {input_values.show(version)} (only 1)")
    names: list[str] = []
    for i, t in enumerate(topics):
        name = t.get("topic") if isinstance(t, dict) else None
        if not isinstance(t, dict) or "topic" not in t:
            problems.add(f"topics[{i}]", f'expected {{"topic": NAME}}, not {input_values.show(t)}')
            continue
        why = input_values.topic_problem(name)
        if why:
            problems.add(f"topics[{i}].topic", why)
        elif name not in names:
            names.append(name)
    problems.raise_if_any("")
    return names


@guarded
def parse_election(data: Any, *, source: str = "election JSON") -> tuple[list[TopicPartition], Any]:
    """kafka-leader-election.sh's ``{"partitions": [{"topic": "foo", "partition": 1}]}``: the
    partitions, and the problems (a :class:`kops.inputs.Problems`; duplicates are one, as in
    Kafka)."""
    problems = Problems(source)
    parts = data.get("partitions") if isinstance(data, dict) else None
    if not isinstance(parts, list):
        problems.add("partitions" if isinstance(data, dict) else "",
                     ("must be a list" if isinstance(data, dict) and "partitions" in data else 'missing "partitions"')
                     + ': expected {"partitions": [{"topic": NAME, "partition": N}, ...]}')
        return [], problems
    out: list[TopicPartition] = []
    first: dict[TopicPartition, int] = {}
    for i, e in enumerate(parts):
        if not isinstance(e, dict):
            problems.add(f"partitions[{i}]", f'expected {{"topic": NAME, "partition": N}}, not {input_values.show(e)}')
            continue
        n = len(problems)
        tp = _entry_tp(e, i, problems, first)
        if tp is not None and len(problems) == n:  # not a duplicate either
            out.append(tp)
    if not parts:
        problems.add("partitions", "no partitions given")
    return out, problems


def parse_broker_list(text: str, *, option: str = "--broker-list") -> list[int]:
    """``"0,1,2"`` -> ``[0, 1, 2]`` with a clear error naming the option."""
    return input_values.check(option, input_values.broker_ids, text)
