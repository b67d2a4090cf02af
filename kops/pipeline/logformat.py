"""Line formats of Kafka's ``state-change.log`` / ``controller.log`` (no Spark, no I/O).

Every pattern here is written in the common subset of Java and Python regular expressions, so the
Spark job (``regexp_extract``/``rlike`` run in the JVM) and the pure-Python code (unit tests, the
single-process baseline in ``bench/``) read a line the same way.

Layout (Kafka's ``config/log4j.properties`` 3.x and ``log4j2.yaml`` 4.x): ``[%d] %p %m (%c)%n`` with
``%d`` = ``yyyy-MM-dd HH:mm:ss,SSS`` in the broker's local time. A throwable is printed on the
following lines; every line that does not start with ``[`` continues the previous record.

Message prefixes (``kafka.controller.StateChangeLogger``): ``[Controller id=N epoch=E] `` for the
ZooKeeper-mode controller, ``[Broker id=N] `` for ReplicaManager / Partition / metadata cache. Other
loggers name their writer as ``[KafkaController id=N]``, ``[QuorumController id=N]``,
``[RequestSendThread controllerId=N]`` ...

The message texts matched below were taken from Kafka 3.9 (``kafka/controller/*StateMachine.scala``,
``ControllerChannelManager.scala``, ``KafkaController.scala``, ``kafka/cluster/Partition.scala``,
``kafka/server/ReplicaManager.scala``, ``ZkMetadataCache.scala``) and, for KRaft, checked against
lines captured from a Kafka 4.1 KRaft sandbox (``tests/logsamples.py``: ``KRAFT_*``): KRaft brokers
write ``[Broker id=N]`` lines to state-change.log (``ReplicaManager.applyDelta``: transitions,
become-leader / become-follower, partitions created and deleted); the KRaft controller writes no
state-change.log lines at all, its partition history is in controller.log
(``[QuorumController id=N]``, ``ReplicationControlManager``: new partitions, reassignment changes,
UNCLEAN leader changes, broker fencing). See docs/logs-pipeline.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

# -- the log4j layout ------------------------------------------------------------------------
TS_RE = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3}"
LEVELS = ("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL")
# groups: 1 timestamp, 2 level, 3 message, 4 logger.  A trailing \r (CRLF files) is tolerated.
LINE_RE = r"^\[(" + TS_RE + r")\] (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) (.*) \(([A-Za-z0-9_.$-]+)\)\r?$"

# -- who wrote it ----------------------------------------------------------------------------
# [Broker id=3] / [Controller id=1 epoch=5] (StateChangeLogger)
SCL_PREFIX_RE = r"^\[(Broker|Controller) id=(\d+)(?: epoch=(\d+))?\] "
# other log idents: [KafkaController id=1], [QuorumController id=1], [RequestSendThread controllerId=1],
# [ReplicaFetcher replicaId=3, leaderId=1, fetcherId=0], [Partition foo-0 broker=3]
OTHER_PREFIX_RE = r"^\[[A-Za-z][^\]=]*?(?:id|Id|broker)=(\d+)"

# Default way to read a broker id from a file path: a directory named broker-3, broker_3, broker3,
# kafka-3, logs-3, node-3, b3 ... (the last such directory in the path wins).
DEFAULT_BROKER_OF_PATH = r"(?i)^(?:.*/)?(?:broker|kafka|logs|node|server|b)[-_.]?(\d+)/"

# -- what it says ----------------------------------------------------------------------------
TOPIC = r"[A-Za-z0-9._-]+"
# (event, pattern) in priority order; first match wins.  The pattern is searched in the message
# (prefix included).
EVENTS: list[tuple[str, str]] = [
    # controller (ZK): PartitionStateMachine
    ("leader_change", r"Changed partition " + TOPIC + r"-\d+ from \w+ to OnlinePartition with state"),
    ("partition_state", r"Changed partition " + TOPIC + r"-\d+ (?:state )?from \w+ to \w+"),
    # an election the controller could not make (e.g. the preferred replica out of the ISR)
    ("partition_state_failed", r"failed to change state for partition " + TOPIC + r"-\d+ from \w+ to \w+"),
    # controller (ZK): ReplicaStateMachine, ISR shrink when a replica goes offline
    ("isr_change", r"Partition " + TOPIC + r"-\d+ state changed to \(Leader:"),
    ("replica_state", r"Changed state of replica \d+ for partition "),
    ("replica_state_failed", r"initiated state change of replica \d+ for partition "),
    ("replicas_offline", r"Mark replicas .* on broker \d+ as offline"),
    # controller.log (ZK): AlterPartition-driven ISR updates, leader epoch bumps
    ("isr_change", r"ISR for partition " + TOPIC + r"-\d+ updated to"),
    ("leader_epoch_bump", r"Updated leader epoch for partition "),
    # broker: Partition.makeLeader / makeFollower
    # (Kafka before 3.0 names no topic id: "Leader t-0 starts at leader epoch 0 from offset ...")
    ("become_leader", r"\] Leader " + TOPIC + r"-\d+ (?:with topic id .* )?starts at leader epoch"),
    ("become_follower", r"\] Follower " + TOPIC + r"-\d+ starts at leader epoch"),
    ("skip_become_leader", r"Skipped the become-leader state change"),
    ("skip_become_follower", r"Skipped the become-follower state change|cannot become follower"),
    # reassignment (controller, state-change.log and controller.log)
    ("reassignment", r"partition being reassigned|reassigning partition|updated assignment of partition|[Rr]eassignment"
                     r"|Replayed partition assignment change "),
    # LeaderAndIsr traffic (controller side and broker side)
    ("leader_and_isr_response", r"Finished LeaderAndIsr request|Received response .*LEADER_AND_ISR|in LeaderAndIsr response"),
    ("leader_and_isr_request", r"LeaderAndIsr request|LeaderAndIsrRequest"),
    ("update_metadata", r"UpdateMetadata"),
    ("stop_replica", r"StopReplica"),
    ("fetchers", r"(?:Stopped|Started) fetchers as part of|Unable to start fetching "),
    # KRaft broker (ReplicaManager.applyDelta) and controller (ReplicationControlManager)
    ("partition_create", r"Creating new partition |Replayed PartitionRecord for new partition "
                         r"|Expected partition " + TOPIC + r"-\d+ with topic id .* to exist, but it was missing"),
    ("partition_change", r"Replayed PartitionRecord for existing partition |partition change for "),
    ("local_transition", r"Transitioning \d+ partition\(s\) to local (?:leaders|followers)"),
    ("partition_delete", r"Deleting \d+ partition\(s\)"),
    ("leader_recovery", r"was marked as RECOVERING"),
    ("topic_create", r"Replayed TopicRecord for topic |CreateTopics result"),
    ("topic_delete", r"Replayed RemoveTopicRecord for topic |DeleteTopics result"),
    # controller.log (ZK mode, logger kafka.controller)
    ("leader_election", r"[Pp]referred replica (?:leader )?election|Starting replica leader election|[Uu]nclean leader election"
                        r"|using an unclean election"),
    ("broker_change", r"Newly added brokers|Broker failure callback|New broker startup callback|[Bb]roker change listener|[Cc]ontrolled shutdown"
                      # KRaft controller: registration, fencing, unfencing, shutdown of brokers
                      r"|RegisterBrokerRecord|BrokerRegistrationChangeRecord|[Ff]encing broker \d+|Unfenced broker \d+"
                      r"|to unfence has been granted|to shut down has been granted|registration found for broker \d+"
                      r"|new incarnation of broker \d+|handleBroker(?:Fenced|Unfenced|UncleanShutdown)|enterControlledShutdown"),
    ("controller_change", r"elected as the controller|Resigning|became the controller|Controller moved"
                          r"|Becoming the active controller|Renouncing the leadership"),
]

def required_literals(pattern: str) -> list[str] | None:
    """Texts one of which a match of ``pattern`` must contain (a cheap pre-test before the regex):
    the longest run of plain characters of the pattern, or of each branch of a top-level ``a|b``;
    None when some branch has none (or the pattern ignores case).  Read from Python's own parse of
    the pattern; the patterns here mean the same to Java's regex engine."""
    from re import _parser  # type: ignore[attr-defined]  # the stdlib's parser, as re.compile uses it

    tree = _parser.parse(pattern)
    if tree.state.flags & re.IGNORECASE:
        return None
    items = list(tree)
    branches = ([list(b) for b in items[0][1][1]] if len(items) == 1 and items[0][0] == _parser.BRANCH
                else [items])
    out = []
    for seq in branches:
        best, run = "", ""
        for op, arg in seq:
            run = run + chr(arg) if op == _parser.LITERAL else ""
            best = max(best, run, key=len)
        if not best:
            return None
        out.append(best)
    return out


# (topic, partition) of the one partition a message is about
TP_PATTERNS: list[str] = [
    r"(?:[Pp]artition|Leader|Follower) (" + TOPIC + r")-(\d+)(?:[ ,.:)]|$)",
    r"topicName='(" + TOPIC + r")', partitionIndex=(\d+)",
    r"\[Topic=(" + TOPIC + r"),Partition=(\d+),Replica=\d+\]",
    r"partition being reassigned (" + TOPIC + r")-(\d+)(?:[ ,.:)]|$)",
    # KRaft controller: "partition change for T-P with topic ID", "AlterPartition request from node
    # N for T-P completed ..."; broker: "Unable to start fetching T-P with topic ID"
    r"(?:change for|request from node \d+ for|start fetching) (" + TOPIC + r")-(\d+) ",
    # "Replayed partition assignment change PartitionChangeRecord(partitionId=P, ...) for topic T":
    # the topic comes last; the lookahead keeps group 1 = topic, group 2 = partition
    r"PartitionChangeRecord\(partitionId=(?=\d+, .*\) for topic (" + TOPIC + r")$)(\d+)",
    # topic-level lines (no partition: group 2 is empty); keep this one last
    r"Replayed (?:Remove)?TopicRecord for topic (" + TOPIC + r") with (?:topic )?ID()",
]
# leader id
LEADER_PATTERNS: list[str] = [
    # KRaft PartitionChangeBuilder: "Setting new leader for topicId X, partition P to L using an unclean
    # election. Previous partition: PartitionRegistration(... leader=-1 ...)": the new one, not the previous
    r", partition \d+ to (-?\d+) using an unclean election",
    # LeaderAndIsr(leader=1, ...), LeaderAndIsrPartitionState(... leader=1, ...), PartitionRegistration,
    # PartitionChangeRecord (where leader=-2 means "leader unchanged": no leader read from it)
    r"[( ]leader=(-1|\d+)",
    r"\(Leader:(-?\d+),",  # LeaderIsrAndControllerEpoch
    r"Current leader is (-?\d+)",  # makeFollower
    r"[ ,:]leader: -?\d+ -> (-?\d+)",  # KRaft PartitionRegistration.diff: "leader: 1 -> 2"
]
LEADER_EPOCH_PATTERNS: list[str] = [
    r"leaderEpoch=(-?\d+)",
    r"LeaderEpoch:(-?\d+)",
    r"starts at leader epoch (-?\d+)",
    r"leaderEpoch: -?\d+ -> (-?\d+)",
]
PARTITION_EPOCH_PATTERNS: list[str] = [
    r"partitionEpoch=(-?\d+)",
    r"ZkVersion:(-?\d+)",
    r"with partition epoch (-?\d+)",
    r"zkVersion=(-?\d+)",
    r"partitionEpoch: -?\d+ -> (-?\d+)",
]
CONTROLLER_EPOCH_PATTERNS: list[str] = [
    r"^\[Controller id=\d+ epoch=(\d+)\]",
    r"ControllerEpoch:(\d+)",
    r"controllerEpoch=(\d+)",
    r"from controller \d+ epoch (\d+)",
    r"controller \d+ epoch (\d+)",
]
CONTROLLER_ID_PATTERNS: list[str] = [
    r"from controller (\d+)",
    r"^\[Controller id=(\d+)",
    r"sent by controller (\d+)",
]
# The ISR as a comma-separated list (spaces are removed afterwards).  For Kafka 3.5+'s
# isrWithBrokerEpoch=List(BrokerState(brokerId=1, brokerEpoch=-1), ...) the ids are pulled out
# of the list separately (ISR_BROKER_STATE_*).
ISR_PATTERNS: list[str] = [
    r"[( ]isr=List\(([-\d, ]*)\)",  # LeaderAndIsr 2.x - 3.4
    r"[( ]isr=\[([-\d, ]*)\]",  # LeaderAndIsrPartitionState / PartitionRegistration
    r"ISR:([-\d,]*),",  # LeaderIsrAndControllerEpoch
    r"ISR \[([-\d, ]*)\]",  # makeLeader
    r"[ ,:]isr: \[[-\d, ]*\] -> \[([-\d, ]*)\]",  # KRaft PartitionRegistration.diff
]
ISR_BROKER_STATE_LIST = r"isrWithBrokerEpoch=List\(((?:BrokerState\([^)]*\)(?:, )?)*)\)"
ISR_BROKER_STATE_ID = r"brokerId=(-?\d+)"
STATES_RE = r" from (\w+) to (\w+)"
#: the events whose message names a state change ``from X to Y`` (STATES_RE)
STATE_EVENTS = ("leader_change", "partition_state", "partition_state_failed", "replica_state", "replica_state_failed")
REPLICA_PATTERNS: list[str] = [
    r"Changed state of replica (\d+) ",
    r"after removing replica (\d+) ",
    r"state change of replica (\d+) ",
]

#: Spark/JSON column order of a merged record
RECORD_FIELDS = (
    "ts", "broker", "level", "logger", "event", "topic", "partition", "leader", "leader_epoch",
    "isr", "controller_epoch", "partition_epoch", "controller_id", "replica", "from_state",
    "to_state", "kind", "file", "line", "message",
)


@dataclass
class ParsedLine:
    """The pure-Python reading of one record's first line (same rules as the Spark job)."""

    ts: str | None
    level: str | None
    message: str | None
    logger: str | None
    broker: int | None = None
    event: str | None = None
    topic: str | None = None
    partition: int | None = None
    leader: int | None = None
    leader_epoch: int | None = None
    isr: list[int] | None = None
    controller_epoch: int | None = None
    partition_epoch: int | None = None
    controller_id: int | None = None
    replica: int | None = None
    from_state: str | None = None
    to_state: str | None = None
    extra: dict = field(default_factory=dict)


_C: dict[str, re.Pattern] = {}


def compiled(p: str) -> re.Pattern:
    """``re.compile(p)``, cached: the parsers run the same few patterns on every line."""
    r = _C.get(p)
    if r is None:
        r = _C[p] = re.compile(p)
    return r


def _first(patterns: list[str], text: str, ngroups: int = 1):
    """The first pattern's groups; for one group, the first non-empty capture, as the Spark job's
    ``coalesce(nullif(regexp_extract(..), ''), ..)`` reads it (so an empty ISR ``isr=[]`` is None)."""
    for p in patterns:
        m = compiled(p).search(text)
        if m:
            if ngroups > 1:
                return m.groups()[:ngroups]
            if m.group(1):
                return m.group(1)
    return None


def _int(s: str | None) -> int | None:
    return int(s) if s not in (None, "") else None


def classify(message: str) -> str:
    for name, p in EVENTS:
        if compiled(p).search(message):
            return name
    return "other"


def parse_isr(message: str) -> list[int] | None:
    m = compiled(ISR_BROKER_STATE_LIST).search(message)
    if m:
        return [int(x) for x in compiled(ISR_BROKER_STATE_ID).findall(m.group(1))]
    s = _first(ISR_PATTERNS, message)
    if s is None:
        return None
    s = s.replace(" ", "")
    return [int(x) for x in s.split(",") if x != ""]


def parse_line(line: str) -> ParsedLine | None:
    """Parse the first line of a record; None when it does not follow the layout."""
    m = compiled(LINE_RE).match(line)
    if not m:
        return None
    ts, level, msg, logger = m.groups()
    p = ParsedLine(ts=ts, level=level, message=msg, logger=logger)
    pm = compiled(SCL_PREFIX_RE).match(msg)
    if pm:
        p.broker = int(pm.group(2))
    else:
        om = compiled(OTHER_PREFIX_RE).match(msg)
        if om:
            p.broker = int(om.group(1))
    p.event = classify(msg)
    tp = _first(TP_PATTERNS, msg, 2)
    if tp:
        p.topic, p.partition = tp[0], _int(tp[1])
    p.leader = _int(_first(LEADER_PATTERNS, msg))
    if p.event == "become_leader" and p.broker is not None:
        p.leader = p.broker
    p.leader_epoch = _int(_first(LEADER_EPOCH_PATTERNS, msg))
    p.isr = parse_isr(msg)
    p.controller_epoch = _int(_first(CONTROLLER_EPOCH_PATTERNS, msg))
    p.partition_epoch = _int(_first(PARTITION_EPOCH_PATTERNS, msg))
    p.controller_id = _int(_first(CONTROLLER_ID_PATTERNS, msg))
    p.replica = _int(_first(REPLICA_PATTERNS, msg))
    st = compiled(STATES_RE).search(msg)
    if st and p.event in STATE_EVENTS:
        p.from_state, p.to_state = st.groups()
    return p


def broker_of_path(path: str, pattern: str = DEFAULT_BROKER_OF_PATH) -> int | None:
    m = re.search(pattern, path)
    return int(m.group(1)) if m else None


# -- user-facing time bounds -----------------------------------------------------------------
_TIME_FORMATS = (
    "%Y-%m-%d %H:%M:%S,%f",
    "%Y-%m-%d %H:%M:%S.%f",
    "%Y-%m-%dT%H:%M:%S,%f",
    "%Y-%m-%dT%H:%M:%S.%f",
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%dT%H:%M:%S",
    "%Y-%m-%d %H:%M",
    "%Y-%m-%dT%H:%M",
    "%Y-%m-%d",
)


def normalize_time(value: str, *, end: bool = False) -> str:
    """A user time bound as ``yyyy-MM-dd HH:mm:ss,SSS`` (the log's own form, compared as a string).

    Accepts Kafka's ``2026-11-22 01:02:03,456`` (quotes stripped, as Kafka's merger does), ISO
    ``2026-11-22T01:02:03.456`` and shorter prefixes.  A bound given without milliseconds / seconds /
    time covers the whole second / minute / day when it is an end bound (inclusive, like Kafka's).
    """
    v = value.strip().strip('"').strip("'")
    for fmt in _TIME_FORMATS:
        try:
            d = datetime.strptime(v, fmt)
        except ValueError:
            continue
        s = d.strftime("%Y-%m-%d %H:%M:%S,") + f"{d.microsecond // 1000:03d}"
        if end and "%f" not in fmt:
            if fmt.endswith("%S"):
                s = s[:-3] + "999"
            elif fmt.endswith("%M"):
                s = s[:-6] + "59,999"
            else:
                s = s[:10] + " 23:59:59,999"
        return s
    raise ValueError(
        f"bad time {value!r}: use 'yyyy-MM-dd HH:mm:ss,SSS' (or ISO yyyy-MM-ddTHH:mm:ss[.SSS], or a date)"
    )


#: ``--partitions`` lists at most this many partitions (ranges included)
MAX_PARTITION_FILTER = 1_000_000


def parse_partitions(value: str) -> list[int]:
    """``0,1,2`` (also ranges ``0-3``) -> sorted distinct ids; duplicates are an error like in Kafka."""
    from kops.inputs import values
    out: list[int] = []
    seen: set[int] = set()
    dups: set[int] = set()
    for part in value.split(","):
        part = part.strip()
        if not part:
            continue
        a, dash, b = part.partition("-")
        try:
            lo = values.integer(a, what="a partition id")
            hi = values.integer(b, what="a partition id") if dash else lo
        except values.Invalid as e:
            raise ValueError(f"bad partition {part!r}: {e}") from None
        if hi < lo:
            raise ValueError(f"bad partition range {part!r}")
        if len(out) + hi - lo + 1 > MAX_PARTITION_FILTER:
            raise ValueError(f"more than {MAX_PARTITION_FILTER:,} partitions in {value[:40]!r}")
        for p in range(lo, hi + 1):
            (dups if p in seen else seen).add(p)
            out.append(p)
    if not out:
        raise ValueError("empty partition list")
    if dups:
        raise ValueError(f"the list of partitions contains repeated entries: {','.join(map(str, sorted(dups)))}")
    return sorted(out)
