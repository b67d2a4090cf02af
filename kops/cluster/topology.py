"""The one place that reads a live cluster's topology into a :class:`kops.model.Topology`.

Admin API first (confluent-kafka: DescribeCluster, Metadata, DescribeConfigs; kafka-python:
ListPartitionReassignments and DescribeLogDirs: replica sizes, log dirs and, from Kafka 3.3
(KIP-827), the total and usable bytes of each log dir's volume). With ``--zookeeper`` it also reads ZooKeeper
(/brokers/ids, /brokers/topics, partition state, /controller, /admin/reassign_partitions) and
reports every disagreement between the two sources in ``Topology.notes``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from kops.cluster import broker_configs as bcfg
from kops.cluster import versions
from kops.cluster.connection import AuthenticationError, Connection, mode_of_broker_configs
from kops.errors import AuthorizationError, ClusterError, ClusterTimeout
from kops.model import Broker, LogDir, Partition, Quorum, QuorumReplica, Topic, Topology

#: topic configs that matter to operations; always read (effective value), even when default
OPERATIONAL_TOPIC_CONFIGS = (
    "min.insync.replicas",
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
    "unclean.leader.election.enable",
    "retention.ms",
    "cleanup.policy",
)
#: dynamic broker configs kops cares about (throttles)
#: Kafka's own cordon of a broker's log dirs (KIP-1066, Kafka 4.3+ with metadata.version 4.3-IV0):
#: ``*`` cordons every log dir, the whole broker
KAFKA_CORDON_CONFIG = "cordoned.log.dirs"
BROKER_THROTTLE_CONFIGS = (
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
)


@dataclass(frozen=True)
class ReadOptions:
    #: topic and broker configs, the cluster's mode, and each broker's Kafka release (ApiVersions)
    with_configs: bool = True
    with_sizes: bool = True
    size_topics: tuple[str, ...] | None = None  # sizes of these topics only (None = all read)
    with_reassignments: bool = True
    with_zookeeper: bool = False
    topics: tuple[str, ...] | None = None  # None = all topics


#: a read that timed out after the cluster had answered is sent again, this many times in all
READ_ATTEMPTS = 3


def read_topology(conn: Connection, opts: ReadOptions = ReadOptions()) -> Topology:
    """Read the cluster. Raises :class:`ClusterError` (exit 1) when it cannot be reached.

    Reading changes nothing, so a read that times out once the cluster has answered (a broker
    on a slow or lossy link, one restarting, a controller moving: :class:`ClusterTimeout`) is
    sent again, up to :data:`READ_ATTEMPTS` times in all, each time by a new client (new
    connections; librdkafka picks the broker of a cluster-wide request such as the topics'
    DescribeConfigs at random) with twice the time to answer: a broker on a slow link does
    answer, later (the fault lab's drain under a 300 ms / 5 % lossy rack failed on three 10 s
    timeouts in a row). A cluster that never answers fails after one timeout, so "unreachable"
    stays quick. The connection's own timeout is what it was afterwards. Requests inside one
    attempt are sent once (:meth:`Connection.sent_once`: retries are not nested), and no attempt
    starts or waits past the deadline of :meth:`Connection.bounded_by`."""
    from tenacity import Retrying, retry_if_exception_type, wait_fixed

    base = conn.timeout_s

    def slower(state) -> None:
        if hasattr(conn, "renew_admin"):
            conn.renew_admin()
        conn.timeout_s = base * 2 ** state.attempt_number

    try:
        for attempt in Retrying(retry=retry_if_exception_type(ClusterTimeout), stop=conn.stop_after(READ_ATTEMPTS),
                                wait=wait_fixed(0.5), before_sleep=slower, reraise=True):
            with attempt, conn.sent_once():
                return _read_topology(conn, opts)
    finally:
        conn.timeout_s = base
    raise AssertionError("unreachable")  # pragma: no cover - tenacity either returns or re-raises


def _read_topology(conn: Connection, opts: ReadOptions) -> Topology:
    admin_topo = _read_admin(conn, opts)
    if not opts.with_zookeeper:
        return admin_topo
    zk_view = read_zookeeper(conn, opts)
    notes = compare(admin_topo, zk_view)
    if notes:
        # a leader/ISR change between the two reads is not a disagreement: read both again once
        time.sleep(0.5)
        admin_topo = _read_admin(conn, opts)
        zk_view = read_zookeeper(conn, opts)
        notes = compare(admin_topo, zk_view)
    return replace(admin_topo, notes=(*admin_topo.notes, *notes), mode=admin_topo.mode or "zookeeper")


# ------------------------------------------------------------------------------------------
# Admin API
# ------------------------------------------------------------------------------------------


def _read_admin(conn: Connection, opts: ReadOptions) -> Topology:
    if hasattr(conn, "warm_up"):
        conn.warm_up()  # kafka-python's client connects while confluent-kafka's requests run
    # requests go out together where they do not depend on each other: confluent-kafka's
    # futures are served by librdkafka's threads while kafka-python's calls (cluster,
    # reassignments, log dirs) run in this one
    md = conn.metadata()
    cluster = conn.describe_cluster()

    brokers = {
        n.id: Broker(id=n.id, rack=n.rack or None, host=n.host, port=n.port, alive=True)
        for n in cluster.nodes
    }
    wanted = set(opts.topics) if opts.topics is not None else None
    topic_names = sorted(t for t in md.topics if wanted is None or t in wanted)
    alive_ids = sorted(brokers)
    if opts.with_configs:  # sent now, collected after the kafka-python calls below
        broker_futures = bcfg.send(conn, alive_ids)
        topic_futures = _topic_configs_requests(conn, topic_names)
    reassign: dict[tuple[str, int], dict[str, list[int]]] = {}
    if opts.with_reassignments and topic_names:
        reassign = list_reassignments(conn)

    topics: list[Topic] = []
    for name in topic_names:
        tm = md.topics[name]
        if tm.error is not None and not tm.partitions:
            raise ClusterError(f"read metadata of topic {name!r}: {tm.error}")
        parts = []
        for pid in sorted(tm.partitions):
            pm = tm.partitions[pid]
            r = reassign.get((name, pid), {})
            parts.append(
                Partition(
                    topic=name,
                    partition=pid,
                    replicas=tuple(pm.replicas),
                    isr=tuple(pm.isrs),
                    leader=pm.leader if pm.leader >= 0 else None,
                    adding_replicas=tuple(r.get("adding_replicas", ())),
                    removing_replicas=tuple(r.get("removing_replicas", ())),
                )
            )
        topics.append(Topic(name=name, partitions=tuple(parts), internal=name.startswith("__")))

    # brokers that hold replicas but are not registered are down
    for t in topics:
        for p in t.partitions:
            for b in p.replicas:
                if b not in brokers:
                    brokers[b] = Broker(id=b, alive=False)

    mode = None
    broker_configs: dict[int, dict[str, str]] = {}
    disk = None
    if opts.with_sizes:
        # one DescribeLogDirs round: the log dirs' total/usable bytes (KIP-827) and the sizes of
        # the partitions asked for and of those being reassigned (data in flight, for disk checks)
        moving = {t for (t, _p), r in reassign.items() if r.get("adding_replicas")}
        sized = [t for t in topic_names if opts.size_topics is None or t in opts.size_topics or t in moving]
        disk = _describe_log_dirs(conn, alive_ids, sized)
    releases: dict[int, str] = {}
    inherited: list[str] = []
    kafka_cordoned: set[int] = set()
    if opts.with_configs:
        broker_configs, mode, inherited, kafka_cordoned = _broker_configs_collect(
            bcfg.collect(conn, broker_futures))
        topics = _with_topic_configs(conn, topics, topic_futures)
        if hasattr(conn, "kp_admin"):
            releases = {b.broker: b.kafka() for b in versions.read(conn, alive_ids).brokers if b.release is not None}
    brokers = {
        bid: replace(b, configs=broker_configs.get(bid, {}),
                     log_dirs=disk.dirs.get(bid, ()) if disk is not None else (),
                     kafka_version=releases.get(bid), cordoned=bid in kafka_cordoned)
        for bid, b in brokers.items()
    }

    if mode is not None and hasattr(conn, "note_mode"):
        conn.note_mode(mode)  # the ZooKeeper-only checks need not ask again
    controller = cluster.controller_id
    quorum = None
    if mode == "kraft":
        # KRaft brokers answer DescribeCluster with a random broker as "controller"; the active
        # controller is the leader of the metadata quorum
        try:
            quorum = read_quorum(conn)
            controller = quorum.leader if quorum.leader >= 0 else None
        except ClusterError as e:
            controller = None
            inherited.append(f"the KRaft metadata quorum could not be described: {e.message}")
    topo = Topology(
        brokers=tuple(sorted(brokers.values(), key=lambda b: b.id)),
        topics=tuple(topics),
        controller=controller,
        cluster_id=cluster.cluster_id,
        mode=mode,
        captured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        notes=tuple(inherited),
        quorum=quorum,
    )
    if disk is None:
        return topo
    topo = topo.with_sizes(disk.partition_sizes())
    if any(d.offline for dirs in disk.dirs.values() for d in dirs):
        # which replicas the failed dirs held: Metadata's offline replicas (confluent-kafka does
        # not show them), asked only when a dir is offline
        topo = topo.with_offline_replicas(offline_replicas(conn, [t.name for t in topo.topics]))
    return topo


def offline_replicas(conn: Connection, topics: list[str]) -> dict[tuple[str, int], tuple[int, ...]]:
    """Partitions with replicas on an offline log dir of a live broker (Metadata's
    ``offline_replicas``, KIP-112, through kafka-python), by (topic, partition); dead brokers'
    replicas left out (they are down, not offline). Empty when the brokers cannot be asked."""
    if not topics:
        return {}
    try:
        described = conn.kp_admin().describe_topics(topics)
        alive = {n.id for n in conn.describe_cluster().nodes}
    except Exception:  # noqa: BLE001 - not known: the caller sees no offline replica
        return {}
    out: dict[tuple[str, int], tuple[int, ...]] = {}
    for t in described:
        for p in t.get("partitions") or ():
            off = tuple(sorted(b for b in p.get("offline_replicas") or () if b in alive))
            if off:
                out[(t.get("name") or t.get("topic"), int(p["partition_index"]))] = off
    return out


#: where a throttle rate a broker applies comes from, when it is not its own dynamic config
INHERITED_SOURCES = {
    "STATIC_BROKER_CONFIG": "its server.properties",
    "DYNAMIC_DEFAULT_BROKER_CONFIG": "the cluster-wide dynamic default (entity <default>)",
}


def config_source(entry) -> str | None:
    """The name of where a config value comes from (``STATIC_BROKER_CONFIG``, ...):
    confluent-kafka's ``ConfigEntry.source`` is the protocol's number, not its enum."""
    from confluent_kafka.admin import ConfigSource

    try:
        return ConfigSource(entry.source).name
    except (AttributeError, ValueError):
        return None


def _broker_configs_collect(answers: dict[int, Any]) -> tuple[dict[int, dict[str, str]], str | None, list[str],
                                                          set[int]]:
    """Each broker's own dynamic throttle configs (DescribeConfigs source
    ``DYNAMIC_BROKER_CONFIG``: what kops sets, and records and restores when another tool set it),
    the cluster mode (:func:`mode_of_broker_configs`), and notes on the rates a broker applies from
    elsewhere: its server.properties or the cluster-wide ``<default>`` entity. Those are not the
    broker's own entry: kops' per-broker rate overrides them while its moves run and deleting it
    lets them apply again, so they are reported, never recorded as an original to write back
    (which would pin the broker to a per-broker copy of a value that the operator may change
    at its source later). Also the brokers Kafka itself cordons (KIP-1066, Kafka 4.3+:
    ``cordoned.log.dirs=*``, every log dir)."""
    out: dict[int, dict[str, str]] = {}
    cordoned: set[int] = set()
    inherited: dict[tuple[int, str], str] = {}  # (broker, config) -> note
    mode = None
    for b, entries in answers.items():
        cfg = {}
        for name in BROKER_THROTTLE_CONFIGS:
            e = entries.get(name)
            if e is None or e.value is None or e.is_default:
                continue
            source = config_source(e)
            if source in INHERITED_SOURCES:
                inherited[(b, name)] = (
                    f"broker {b}: {name}={e.value} from {INHERITED_SOURCES[source]}; it throttles the "
                    "replicas topics list as throttled (kops' own rate overrides it while kops' moves run)")
            else:
                cfg[name] = e.value
        out[b] = cfg
        mode = mode_of_broker_configs(entries) or mode
        if _kafka_cordoned(entries.get(KAFKA_CORDON_CONFIG)):
            cordoned.add(b)
    return out, mode, [inherited[k] for k in sorted(inherited)], cordoned


def _kafka_cordoned(entry) -> bool:
    """Whether a broker's ``cordoned.log.dirs`` config entry (None: the broker does not know
    it) cordons the whole broker: ``*``, every log dir (a list of dirs cordons only those)."""
    return entry is not None and entry.value is not None and entry.value.strip() == "*"


def broker_throttle_configs(conn: Connection, broker_ids: list[int]) -> dict[int, dict[str, str]]:
    """The dynamic throttle configs each broker has applied (each broker answers for itself)."""
    return _broker_configs_collect(bcfg.read(conn, list(broker_ids)))[0]


def kafka_cordons(conn: Connection, broker_ids: list[int]) -> tuple[set[int], set[int]]:
    """The brokers that know Kafka's own cordon (KIP-1066: they list ``cordoned.log.dirs``
    among their configs) and those it cordons (``*``)."""
    known: set[int] = set()
    cordoned: set[int] = set()
    for b, entries in bcfg.read(conn, list(broker_ids)).items():
        e = entries.get(KAFKA_CORDON_CONFIG)
        if e is not None:
            known.add(b)
        if _kafka_cordoned(e):
            cordoned.add(b)
    return known, cordoned


def _topic_configs_requests(conn: Connection, names: list[str]) -> dict:
    """DescribeConfigs of the topics, sent (futures by topic name)."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    if not names:
        return {}
    # one request for all topics (librdkafka batches per broker)
    futures = conn.admin().describe_configs(
        [ConfigResource(ResourceType.TOPIC, n) for n in names], request_timeout=conn.timeout_s
    )
    return {res.name: fut for res, fut in futures.items()}


def _with_topic_configs(conn: Connection, topics: list[Topic], futures: dict) -> list[Topic]:
    out = []
    for t in topics:
        entries = conn.wait(futures[t.name], f"describe configs of topic {t.name}")
        cfg = {}
        for name, e in entries.items():
            if e.value is None or getattr(e, "is_sensitive", False):
                continue
            if name in OPERATIONAL_TOPIC_CONFIGS and (name == "min.insync.replicas" or not e.is_default):
                cfg[name] = e.value
        out.append(replace(t, configs=cfg))
    return out


def read_quorum(conn: Connection) -> Quorum:
    """The KRaft metadata quorum (DescribeQuorum on ``__cluster_metadata``, through kafka-python:
    confluent-kafka has no call for it). Raises :class:`ClusterError` when it cannot be read."""
    try:
        raw = conn.kp_admin().describe_metadata_quorum()
        p = raw["topics"][0]["partitions"][0]
    except ClusterError:
        raise
    except Exception as e:
        raise conn.map_error(e, "describe the KRaft metadata quorum") from None

    from kops.cluster.raft_messages import directory_text

    def rep(r: dict[str, Any]) -> QuorumReplica:
        return QuorumReplica(id=int(r["replica_id"]), log_end_offset=int(r.get("log_end_offset", -1)),
                             last_fetch_ms=int(r.get("last_fetch_timestamp", -1)),
                             last_caught_up_ms=int(r.get("last_caught_up_timestamp", -1)),
                             directory_id=directory_text(r.get("replica_directory_id")))

    leader = p.get("leader_id")
    return Quorum(leader=leader if leader is not None and leader >= 0 else -1, epoch=int(p.get("leader_epoch", -1)),
                  high_watermark=int(p.get("high_watermark", -1)),
                  voters=tuple(sorted((rep(v) for v in p.get("current_voters") or ()), key=lambda r: r.id)),
                  observers=tuple(sorted((rep(o) for o in p.get("observers") or ()), key=lambda r: r.id)))


def kraft_controller(conn: Connection) -> int | None:
    """Leader of the KRaft metadata quorum (:func:`read_quorum`), or None if unknown."""
    try:
        leader = read_quorum(conn).leader
    except ClusterError:
        return None
    return leader if leader >= 0 else None


def list_reassignments(conn: Connection) -> dict[tuple[str, int], dict[str, list[int]]]:
    """Ongoing reassignments (KIP-455 ListPartitionReassignments, through kafka-python)."""
    try:
        raw = conn.kp_controller(lambda a: a.list_partition_reassignments(timeout_ms=int(conn.timeout_s * 1000)),
                                 "list partition reassignments")
    except ClusterError:
        raise
    except Exception as e:
        raise conn.map_error(e, "list partition reassignments") from None
    return {(tp.topic, tp.partition): v for tp, v in raw.items()}


# ------------------------------------------------------------------------------------------
# ZooKeeper
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ZkView:
    brokers: dict[int, dict[str, Any]]
    controller: int | None
    partitions: dict[tuple[str, int], dict[str, Any]]  # replicas, leader, isr, leader_epoch
    reassign_partitions: list[dict[str, Any]] | None


def read_zookeeper(conn: Connection, opts: ReadOptions = ReadOptions()) -> ZkView:
    """Kafka's ZooKeeper data (3.x ZooKeeper mode)."""
    from kazoo.exceptions import NoNodeError

    zk = conn.zk()

    def get_json(path: str) -> Any | None:
        try:
            data, _ = zk.retry(zk.get, path)
        except NoNodeError:
            return None
        return json.loads(data.decode("utf-8")) if data else None

    if not zk.retry(zk.exists, "/brokers/ids"):
        raise ClusterError(
            f"ZooKeeper at {conn.zookeeper} holds no Kafka data (/brokers/ids missing): wrong "
            "connect string or chroot?"
        )
    brokers = {}
    for child in zk.retry(zk.get_children, "/brokers/ids"):
        info = get_json(f"/brokers/ids/{child}")
        if info is not None:
            brokers[int(child)] = info
    ctrl = get_json("/controller")
    controller = ctrl.get("brokerid") if isinstance(ctrl, dict) else None

    names = zk.retry(zk.get_children, "/brokers/topics")
    if opts.topics is not None:
        wanted = set(opts.topics)
        names = [n for n in names if n in wanted]
    partitions: dict[tuple[str, int], dict[str, Any]] = {}
    topic_async = {n: zk.get_async(f"/brokers/topics/{n}") for n in names}
    state_async = {}
    for name, a in topic_async.items():
        try:
            data, _ = a.get(timeout=conn.timeout_s)
        except NoNodeError:
            continue  # deleted while we read
        tdata = json.loads(data.decode("utf-8"))
        for pid, reps in tdata.get("partitions", {}).items():
            key = (name, int(pid))
            partitions[key] = {
                "replicas": list(reps),
                "adding_replicas": list(tdata.get("adding_replicas", {}).get(pid, [])),
                "removing_replicas": list(tdata.get("removing_replicas", {}).get(pid, [])),
            }
            state_async[key] = zk.get_async(f"/brokers/topics/{name}/partitions/{pid}/state")
    for key, a in state_async.items():
        try:
            data, _ = a.get(timeout=conn.timeout_s)
            st = json.loads(data.decode("utf-8"))
            partitions[key].update(
                leader=st.get("leader"), isr=st.get("isr", []), leader_epoch=st.get("leader_epoch")
            )
        except NoNodeError:
            partitions[key].update(leader=None, isr=[])
    reassign = get_json("/admin/reassign_partitions")
    return ZkView(
        brokers=brokers,
        controller=controller,
        partitions=partitions,
        reassign_partitions=reassign.get("partitions") if isinstance(reassign, dict) else None,
    )


def compare(topo: Topology, zk: ZkView) -> list[str]:
    """Every disagreement between the Admin API view and ZooKeeper, as readable lines."""
    notes: list[str] = []
    admin_alive = {b.id: b for b in topo.brokers if b.alive}
    if set(admin_alive) != set(zk.brokers):
        notes.append(
            f"registered brokers differ: Admin API {sorted(admin_alive)}, ZooKeeper {sorted(zk.brokers)}"
        )
    for bid in sorted(set(admin_alive) & set(zk.brokers)):
        zr = zk.brokers[bid].get("rack")
        if (admin_alive[bid].rack or None) != (zr or None):
            notes.append(f"broker {bid}: rack {admin_alive[bid].rack!r} (Admin API) vs {zr!r} (ZooKeeper)")
    if topo.controller is not None and zk.controller is not None and topo.controller != zk.controller:
        notes.append(f"controller: {topo.controller} (Admin API) vs {zk.controller} (ZooKeeper)")
    admin_parts = {p.tp: p for p in topo.partitions()}
    only_admin = sorted(set(admin_parts) - set(zk.partitions))
    only_zk = sorted(set(zk.partitions) - set(admin_parts))
    if only_admin:
        notes.append(f"{len(only_admin)} partitions only in the Admin API view, e.g. {_tps(only_admin)}")
    if only_zk:
        notes.append(f"{len(only_zk)} partitions only in ZooKeeper, e.g. {_tps(only_zk)}")
    for tp in sorted(set(admin_parts) & set(zk.partitions)):
        a, z = admin_parts[tp], zk.partitions[tp]
        if list(a.replicas) != z["replicas"]:
            notes.append(f"{tp[0]}-{tp[1]}: replicas {list(a.replicas)} (Admin API) vs {z['replicas']} (ZooKeeper)")
        zl = z.get("leader")
        zl = None if zl is None or zl < 0 else zl
        if a.leader != zl:
            notes.append(f"{tp[0]}-{tp[1]}: leader {a.leader} (Admin API) vs {zl} (ZooKeeper)")
        if sorted(a.isr) != sorted(z.get("isr", [])):
            notes.append(f"{tp[0]}-{tp[1]}: ISR {sorted(a.isr)} (Admin API) vs {sorted(z.get('isr', []))} (ZooKeeper)")
    return notes


def _tps(tps: list[tuple[str, int]]) -> str:
    return ", ".join(f"{t}-{p}" for t, p in tps[:5])


def replica_sizes(
    conn: Connection, broker_ids: Iterable[int], topics: list[str]
) -> dict[tuple[str, int, int], int]:
    """Size on disk of each replica ``(topic, partition, broker)`` (DescribeLogDirs), e.g. to
    follow how far new replicas have caught up during a reassignment. Future (log-dir move)
    replicas are left out. Empty when the brokers cannot be asked."""
    read = _describe_log_dirs(conn, broker_ids, topics) if topics else None
    return read.replica_sizes() if read is not None else {}


def replica_log_dirs(
    conn: Connection, broker_ids: Iterable[int], topics: list[str]
) -> dict[tuple[str, int, int], dict[str, str | None]] | None:
    """The log dir of each replica ``(topic, partition, broker)`` (DescribeLogDirs):
    ``{"dir": where it lives, "future": the dir it is being moved to, or None}`` — a log-dir
    move (AlterReplicaLogDirs) is complete when ``dir`` is the requested dir and ``future`` is
    None. A replica the broker does not hold is absent. None when the brokers cannot be asked
    (unknown, which is not "done")."""
    if not topics or not list(broker_ids):
        return {}
    read = _describe_log_dirs(conn, broker_ids, topics)
    if read is None:
        return None
    out: dict[tuple[str, int, int], dict[str, str | None]] = {}
    for key, log_dir, _size, future in read.entries:
        rec = out.setdefault(key, {"dir": None, "future": None})
        rec["future" if future else "dir"] = log_dir
    return out


def log_dir_usage(conn: Connection, broker_ids: Iterable[int], topics: Iterable[str] = ()) -> LogDirRead | None:
    """The brokers' log dirs with their volumes' total and usable bytes (KIP-827), and where
    and how big the replicas of ``topics`` on those brokers are, in one DescribeLogDirs round
    (``topics`` empty: the log dirs only). None when the brokers cannot be asked."""
    return _describe_log_dirs(conn, broker_ids, sorted(set(topics)))


def offline_log_dirs(conn: Connection, broker_ids: Iterable[int]) -> dict[int, list[str]] | None:
    """Per broker that answered: the paths of its log dirs it reports offline (a disk error;
    DescribeLogDirs answers KAFKA_STORAGE_ERROR for them), empty when all are online. None when
    the brokers cannot be asked."""
    read = _describe_log_dirs(conn, broker_ids, [])
    if read is None:
        return None
    return {b: [d.path for d in dirs if d.offline] for b, dirs in read.dirs.items()}


@dataclass(frozen=True)
class LogDirRead:
    """What the brokers answered to one DescribeLogDirs round."""

    #: ``((topic, partition, broker), log_dir, size, is_future)`` per replica found
    entries: list[tuple[tuple[str, int, int], str | None, int, bool]]
    #: per broker that answered: its log dirs (sizes None where not reported)
    dirs: dict[int, tuple[LogDir, ...]]

    def replica_sizes(self) -> dict[tuple[str, int, int], int]:
        """Size of each replica (future, log-dir move, replicas left out)."""
        sizes: dict[tuple[str, int, int], int] = {}
        for key, _log_dir, size, future in self.entries:
            if not future:
                sizes[key] = max(sizes.get(key, 0), size)
        return sizes

    def partition_sizes(self) -> dict[tuple[str, int], int]:
        """Largest replica size per partition."""
        sizes: dict[tuple[str, int], int] = {}
        for (topic, partition, _broker), size in self.replica_sizes().items():
            sizes[(topic, partition)] = max(sizes.get((topic, partition), 0), size)
        return sizes

    def on_disk(self) -> dict[tuple[str, int, int], tuple[str | None, int]]:
        """Per replica: the log dir it lives in and its size (future replicas left out)."""
        out: dict[tuple[str, int, int], tuple[str | None, int]] = {}
        for key, log_dir, size, future in self.entries:
            if not future and size >= out.get(key, (None, -1))[1]:
                out[key] = (log_dir, size)
        return out


def _size_or_none(value: Any) -> int | None:
    """KIP-827 sizes: -1 (or absent, DescribeLogDirs < v4: Kafka < 3.3) means not reported."""
    return int(value) if isinstance(value, int) and value >= 0 else None


def _describe_log_dirs(conn: Connection, broker_ids: Iterable[int], topics: list[str]) -> LogDirRead | None:
    """The one DescribeLogDirs reader (kafka-python, which asks each broker with the highest
    version both support: v4 carries total/usable bytes). ``topics`` empty: no replicas, only
    the log dirs. None when the brokers cannot be asked."""
    ids = list(broker_ids)
    if not ids:
        return LogDirRead([], {})
    from tenacity import Retrying, stop_after_attempt, wait_fixed

    try:
        # a dict {} asks for no partitions at all; a list of names for every partition of them.
        # A read: one that failed (a broker slow to answer) is sent again before giving up —
        # a disk check that cannot be made does not refuse, so it should not give up lightly
        for attempt in Retrying(stop=stop_after_attempt(3), wait=wait_fixed(0.5), reraise=True):
            with attempt:
                result = conn.kp_admin().describe_log_dirs(topic_partitions=list(topics) if topics else {},
                                                           brokers=ids)
    except Exception:
        return None
    out = []
    dirs: dict[int, tuple[LogDir, ...]] = {}
    for per_broker in result:
        b = int(per_broker.get("broker", -1))
        found = []
        for d in per_broker.get("log_dirs", []):
            found.append(LogDir(
                path=d.get("log_dir"),
                total_bytes=_size_or_none(d.get("total_bytes")),
                usable_bytes=_size_or_none(d.get("usable_bytes")),
                offline=bool(d.get("error_code")),
            ))
            if d.get("error_code"):
                continue  # an offline log dir lists nothing
            for t in d.get("topics", []):
                for p in t.get("partitions", []):
                    out.append(((t["name"], p["partition_index"], b), d.get("log_dir"),
                                int(p.get("partition_size", 0)), bool(p.get("is_future_key"))))
        dirs[b] = tuple(sorted(found, key=lambda ld: ld.path or ""))
    return LogDirRead(out, dirs)


def missing_topics_error(conn: Connection | None, missing: list[str], *, option: str = "--topic"):
    """The error for topics the metadata did not show: Kafka hides the topics a principal may
    not describe, so before calling them unknown, ask (DescribeConfigs, which never auto-creates
    a topic) and report an authorization failure as such."""
    from kops.errors import BadInput

    if conn is not None and missing:
        from confluent_kafka.admin import ConfigResource, ResourceType

        futures = conn.admin().describe_configs(
            [ConfigResource(ResourceType.TOPIC, t) for t in missing], request_timeout=conn.timeout_s
        )
        for res, fut in futures.items():
            try:
                fut.result(timeout=conn.timeout_s + 2)
            except Exception as e:
                err = conn.map_error(e, f"describe topic {res.name!r}")
                if isinstance(err, (AuthorizationError, AuthenticationError)):
                    return err
    return BadInput(f"{option}: unknown topic{'s' if len(missing) > 1 else ''} {sorted(missing)}")
