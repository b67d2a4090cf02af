"""Pure-Python reading of Kafka 3.9 state-change.log lines (the same patterns the Spark job runs)."""

from __future__ import annotations

import re

import pytest

from kops.pipeline import logformat as lf
from tests import logsamples as s
from kops.pipeline import statechange as sc

# Lines captured from the kops sandbox (Kafka 3.9.1, ZooKeeper mode), see docs/logs-pipeline.md.
REAL_UM = (
    "[2026-11-22 01:54:36,870] INFO [Controller id=4 epoch=1] Sending UpdateMetadata request to brokers "
    "HashSet(0, 4) for 0 partitions (state.change.logger)"
)


def test_layout_and_prefix_real_line():
    p = lf.parse_line(REAL_UM)
    assert p is not None
    assert (p.ts, p.level, p.logger) == ("2026-11-22 01:54:36,870", "INFO", "state.change.logger")
    assert p.broker == 4 and p.controller_epoch == 1
    assert p.event == "update_metadata"
    assert p.topic is None


def test_controller_online_partition_39_format():
    ln = s.c_online("2026-11-22 01:00:01,100", 1, 3, "my-topic-1-0", "NewPartition", 2, 4, [2, 1, 3], 5)
    p = lf.parse_line(ln)
    assert p.event == "leader_change"
    assert (p.topic, p.partition) == ("my-topic-1", 0)
    assert p.leader == 2 and p.leader_epoch == 4 and p.partition_epoch == 5
    assert p.isr == [2, 1, 3]
    assert p.controller_epoch == 3 and p.broker == 1
    assert (p.from_state, p.to_state) == ("NewPartition", "OnlinePartition")


def test_older_leader_and_isr_format():
    ln = (
        "[2020-01-01 00:00:00,000] INFO [Controller id=1 epoch=2] Changed partition t-3 from OfflinePartition to "
        "OnlinePartition with state LeaderAndIsr(leader=1, leaderEpoch=7, isr=List(1, 2), zkVersion=9) (state.change.logger)"
    )
    p = lf.parse_line(ln)
    assert (p.topic, p.partition, p.leader, p.leader_epoch, p.isr, p.partition_epoch) == ("t", 3, 1, 7, [1, 2], 9)


def test_new_partition_and_isr_shrink():
    p = lf.parse_line(s.c_new_partition("2026-11-22 01:00:01,000", 1, 3, "orders-0", [1, 2]))
    assert p.event == "partition_state" and p.to_state == "NewPartition" and p.leader is None
    p = lf.parse_line(s.c_isr_removed("2026-11-22 01:00:05,020", 1, 3, "orders-0", 1, [1], 4, 6, 2))
    assert p.event == "isr_change"
    assert (p.topic, p.partition, p.leader, p.isr, p.leader_epoch, p.partition_epoch, p.replica) == ("orders", 0, 1, [1], 4, 6, 2)


def test_broker_become_leader_and_follower():
    p = lf.parse_line(s.b_leader("2026-11-22 01:00:05,040", 3, "orders-1", "X", 5, 7, 6, 7, [3, 1], 2, 4))
    assert p.event == "become_leader" and p.broker == 3 and p.leader == 3
    assert (p.topic, p.partition, p.leader_epoch, p.partition_epoch, p.isr) == ("orders", 1, 5, 6, [3, 1])
    p = lf.parse_line(s.b_follower("2026-11-22 01:00:12,010", 2, "orders-1", 5, 7, 6, 7, 3))
    assert p.event == "become_follower" and p.broker == 2 and p.leader == 3 and p.leader_epoch == 5


def test_leader_and_isr_traffic_and_others():
    assert lf.parse_line(s.b_handling("2026-11-22 01:00:01,150", 2, 1, 1, 2)).event == "leader_and_isr_request"
    p = lf.parse_line(s.b_finished("2026-11-22 01:00:01,150", 2, 5, 1, 1, 2))
    assert p.event == "leader_and_isr_response" and p.controller_id == 1
    assert lf.parse_line(s.c_send_lai("2026-11-22 01:00:01,150", 1, 3, 2, 1, 1)).event == "leader_and_isr_request"
    assert lf.parse_line(s.c_mark_offline("2026-11-22 01:00:01,150", 1, ["a-0", "a-1"], 2)).event == "replicas_offline"
    assert lf.parse_line(s.b_stopped_follower("2026-11-22 01:00:01,150", 2, 1, 3, 9, 4)).event == "fetchers"
    p = lf.parse_line(s.c_replica_trace("2026-11-22 01:00:01,150", 1, 3, 4, "a-0", "OnlineReplica", "OfflineReplica"))
    assert (p.event, p.replica, p.topic, p.partition, p.to_state) == ("replica_state", 4, "a", 0, "OfflineReplica")
    p = lf.parse_line(s.b_skip_follower("2026-11-22 01:00:01,150", 2, "a-0", "a", 0, 3, 1, 2, [1, 2], 2, [1, 2]))
    assert (p.event, p.topic, p.partition, p.leader, p.isr) == ("skip_become_follower", "a", 0, 1, [1, 2])


def test_kraft_lines():
    ln = (
        "[2026-11-22 01:00:00,000] INFO [QuorumController id=1] Replayed PartitionRecord for new partition foo-2 with "
        "topic ID abc and PartitionRegistration(replicas=[1, 2, 3], directories=[x, y, z], isr=[1, 2, 3], "
        "removingReplicas=[], addingReplicas=[], elr=[], lastKnownElr=[], leader=1, leaderRecoveryState=RECOVERED, "
        "leaderEpoch=0, partitionEpoch=0). (org.apache.kafka.controller.ReplicationControlManager)"
    )
    p = lf.parse_line(ln)
    assert (p.event, p.broker, p.topic, p.partition, p.leader, p.isr, p.leader_epoch) == (
        "partition_create", 1, "foo", 2, 1, [1, 2, 3], 0)


@pytest.mark.parametrize(
    "bad",
    [
        "[2026-11-22 01:00:0 broken timestamp (state.change.logger)",
        "[2026-11-22 01:00:00,000] INFO no logger at the end",
        "[2026-11-22 01:00:00,000] NOTICE odd level (x)",
        "  at java.lang.Thread.run",
        "",
    ],
)
def test_unparsable(bad):
    assert lf.parse_line(bad) is None


def test_broker_of_path():
    assert lf.broker_of_path("/tmp/sb/broker-3/logs/state-change.log") == 3
    assert lf.broker_of_path("file:/x/kafka-12/state-change.log.2026-11-22-01") == 12
    assert lf.broker_of_path("/opt/kafka-3.9.1/logs/state-change.log") is None
    assert lf.broker_of_path("hdfs://nn/fleet/c1/broker_7/x/state-change.log") == 7
    assert lf.broker_of_path("/data/b2/node-5/state-change.log") == 5  # the last such directory


def test_times_and_partitions():
    assert lf.normalize_time("2026-11-22 01:02:03,456") == "2026-11-22 01:02:03,456"
    assert lf.normalize_time('"2026-11-22T01:02:03.4"') == "2026-11-22 01:02:03,400"
    assert lf.normalize_time("2026-11-22 01:02", end=True) == "2026-11-22 01:02:59,999"
    assert lf.normalize_time("2026-11-22", end=True) == "2026-11-22 23:59:59,999"
    assert lf.normalize_time("2026-11-22 01:02:03", end=True) == "2026-11-22 01:02:03,999"
    with pytest.raises(ValueError):
        lf.normalize_time("yesterday")
    assert lf.parse_partitions("2,0,4-5") == [0, 2, 4, 5]
    with pytest.raises(ValueError, match="repeated"):
        lf.parse_partitions("1,1")


def test_filter_validation():
    with pytest.raises(sc.LogInputError):
        sc.validate_filters(topic="a", topic_regex="b", partitions=None, start_time=None, end_time=None)
    with pytest.raises(sc.LogInputError, match="needs --topic"):
        sc.validate_filters(topic=None, topic_regex=None, partitions="1", start_time=None, end_time=None)
    with pytest.raises(sc.LogInputError, match="after"):
        sc.validate_filters(topic=None, topic_regex=None, partitions=None, start_time="2026-01-02", end_time="2026-01-01")
    f = sc.validate_filters(topic="t", topic_regex=None, partitions="0,1", start_time="2026-01-01", end_time="2026-01-01")
    assert f.partitions == [0, 1] and f.start == "2026-01-01 00:00:00,000" and f.end == "2026-01-01 23:59:59,999"


def test_expand_sources(tmp_path):
    for b in (1, 2):
        d = tmp_path / f"broker-{b}" / "logs"
        d.mkdir(parents=True)
        (d / "state-change.log").write_text("x\n")
        (d / "state-change.log.2026-11-22-01").write_text("x\n")
        (d / "controller.log").write_text("x\n")
        (d / "server.log").write_text("x\n")
    srcs = sc.expand_sources([str(tmp_path)])
    names = sorted(p.split(str(tmp_path))[1] for p in srcs[0].paths)
    assert names == [
        "/broker-1/logs/state-change.log", "/broker-1/logs/state-change.log.2026-11-22-01",
        "/broker-2/logs/state-change.log", "/broker-2/logs/state-change.log.2026-11-22-01",
    ]
    srcs = sc.expand_sources([f"7={tmp_path}/broker-1/logs"], include_controller=True)
    assert srcs[0].broker == 7 and len(srcs[0].paths) == 3
    with pytest.raises(sc.LogInputError):
        sc.expand_sources([str(tmp_path / "nope")])
    assert sc.expand_sources(["hdfs://nn/logs/"])[0].paths == ["hdfs://nn/logs/state-change.log*"]


def test_cli_imports_no_spark():
    import subprocess
    import sys

    code = (
        "import sys, kops.cli.logs, kops.pipeline.statechange, kops.pipeline.timeline;"
        "bad=[m for m in sys.modules if m.startswith(('pyspark','py4j','matplotlib'))];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_kraft_broker_and_real_controller_log_lines():
    p = lf.parse_line("[2026-11-22 01:00:00,000] INFO [Broker id=2] Transitioning 3 partition(s) to local leaders. (state.change.logger)")
    assert (p.event, p.broker, p.topic) == ("local_transition", 2, None)
    p = lf.parse_line("[2026-11-22 01:00:00,000] INFO [Broker id=2] Creating new partition foo-1 with topic id abc. (state.change.logger)")
    assert (p.event, p.topic, p.partition) == ("partition_create", "foo", 1)
    # captured from the sandbox (3.9.1): controller.log and the reassignment line of state-change.log
    p = lf.parse_line(
        "[2026-11-22 02:06:59,208] INFO [Controller id=5 epoch=1] Sent LeaderAndIsr request (Leader:1,ISR:1,2,4,"
        "LeaderRecoveryState:RECOVERED,LeaderEpoch:3,ZkVersion:5,ControllerEpoch:1) with new replica assignment "
        "ReplicaAssignment(replicas=5,3,1,2,4, addingReplicas=5,3, removingReplicas=2,4) to leader 1 for partition "
        "being reassigned orders-0 (state.change.logger)"
    )
    assert (p.event, p.topic, p.partition, p.leader, p.isr, p.leader_epoch) == ("reassignment", "orders", 0, 1, [1, 2, 4], 3)
    p = lf.parse_line(
        "[2026-11-22 02:02:02,756] INFO [Broker id=4] Ignoring LeaderAndIsr request from controller 5 with correlation id 7 "
        "epoch 1 for partition orders-0 since its associated leader epoch 1 matches the current leader epoch (state.change.logger)"
    )
    assert (p.event, p.broker, p.topic, p.partition, p.controller_id) == ("leader_and_isr_request", 4, "orders", 0, 5)
    p = lf.parse_line(
        "[2026-11-22 02:05:30,100] WARN [RequestSendThread controllerId=5] Controller 5's connection to broker "
        "127.0.0.1:39096 (id: 4 rack: c) was unsuccessful (kafka.controller.RequestSendThread)"
    )
    assert (p.broker, p.logger, p.level) == (5, "kafka.controller.RequestSendThread", "WARN")
    p = lf.parse_line(
        "[2026-11-22 02:05:28,000] INFO [Controller id=5] Starting replica leader election (PREFERRED) for partitions "
        "orders-4 triggered by AdminClientTriggered (kafka.controller.KafkaController)"
    )
    assert (p.event, p.broker) == ("leader_election", 5)


# -- KRaft (Kafka 4.1): real lines captured from the KRaft sandbox (tests/logsamples.py) -------------
def _kraft(substr: str) -> lf.ParsedLine:
    lines = [ln for v in s.KRAFT_BROKER_LINES.values() for ln in v] + s.KRAFT_CONTROLLER_LINES
    (ln,) = [x for x in lines if substr in x]
    p = lf.parse_line(ln)
    assert p is not None, ln
    return p


def test_every_real_kraft_line_parses_and_is_classified():
    for b, lines in s.KRAFT_BROKER_LINES.items():
        for ln in lines:
            p = lf.parse_line(ln)
            assert p is not None and p.broker == b and p.logger == "state.change.logger", ln
            assert p.event != "other", ln
    for ln in s.KRAFT_CONTROLLER_LINES:
        p = lf.parse_line(ln)
        assert p is not None and p.event != "other", ln
        assert p.logger.startswith("org.apache.kafka.controller."), ln


def test_kraft_broker_lines():
    p = _kraft("[Broker id=5] Leader orders-0")
    assert (p.event, p.topic, p.partition, p.leader, p.leader_epoch, p.partition_epoch, p.isr) == (
        "become_leader", "orders", 0, 5, 0, 0, [5, 1, 3])
    p = _kraft("Expected partition orders-0")
    assert (p.level, p.event, p.broker, p.topic, p.partition) == ("ERROR", "partition_create", 4, "orders", 0)
    p = _kraft("[Broker id=4] Follower orders-0")
    assert (p.event, p.leader, p.leader_epoch, p.partition_epoch) == ("become_follower", 5, 0, 1)
    p = _kraft("[Broker id=0] Skipped the become-follower")
    # a KRaft broker's partition state carries controllerEpoch=-1: KRaft has no controller epoch
    assert (p.event, p.topic, p.partition, p.leader, p.isr, p.controller_epoch, p.partition_epoch) == (
        "skip_become_follower", "orders", 0, 5, [5, 1, 3, 4], None, 2)
    assert _kraft("Stopped fetchers as part of controlled shutdown").event == "fetchers"
    assert _kraft("Deleting 1 partition(s)").event == "partition_delete"
    assert _kraft("Transitioning 1 partition(s) to local leaders").event == "local_transition"
    p = _kraft("Unable to start fetching unc-0")
    assert (p.level, p.event, p.topic, p.partition, p.leader) == ("TRACE", "fetchers", "unc", 0, None)
    p = _kraft("was marked as RECOVERING")
    assert (p.event, p.topic, p.partition) == ("leader_recovery", "unc", 0)
    p = _kraft("[Broker id=2] Leader unc-0")
    assert (p.event, p.leader, p.leader_epoch, p.isr) == ("become_leader", 2, 2, [2])


def test_kraft_controller_lines():
    p = _kraft("Becoming the active controller")
    assert (p.event, p.broker) == ("controller_change", 1000)
    p = _kraft("Replayed TopicRecord for topic orders")
    assert (p.event, p.topic, p.partition) == ("topic_create", "orders", None)
    p = _kraft("Replayed RemoveTopicRecord")
    assert (p.event, p.topic, p.partition) == ("topic_delete", "__kops_lock", None)
    p = _kraft("PartitionRecord for new partition orders-0")
    assert (p.event, p.topic, p.partition, p.leader, p.isr, p.leader_epoch, p.partition_epoch) == (
        "partition_create", "orders", 0, 5, [5, 1, 3], 0, 0)
    assert _kraft("Successfully altered 2 out of 2").event == "reassignment"
    # the assignment change that starts the move: leader=-2 ("unchanged") and isr=null are not read
    p = _kraft("isr=null, leader=-2, replicas=[4, 0, 2, 1, 3, 5]")
    assert (p.event, p.topic, p.partition, p.leader, p.isr) == ("reassignment", "orders", 0, None, None)
    p = _kraft("isr=[0, 2, 4], leader=4, replicas=[4, 0, 2]")
    assert (p.event, p.topic, p.partition, p.leader, p.isr) == ("reassignment", "orders", 0, 4, [0, 2, 4])
    p = _kraft("AlterPartition request from node 5 for orders-0")
    assert (p.event, p.topic, p.partition) == ("reassignment", "orders", 0)
    assert _kraft("Unfenced broker 4 has requested").event == "broker_change"
    assert _kraft("Fencing broker 2 at epoch 16").event == "broker_change"
    p = _kraft("using an unclean election")
    assert (p.event, p.leader, p.topic) == ("leader_election", 2, None)  # only the topic id is named
    p = _kraft("UNCLEAN partition change for unc-0")
    assert (p.event, p.topic, p.partition, p.leader, p.isr, p.leader_epoch, p.partition_epoch) == (
        "partition_change", "unc", 0, 2, [2], 2, 3)


def test_required_literals_are_in_every_match(tmp_path):
    """The Spark parse tests a pattern's required texts before running it (a byte search instead
    of decoding the line for Java's regex): sound only if every match contains one of them."""
    assert lf.required_literals(r"Changed partition \w+-\d+ from \w+ to \w+") == ["Changed partition "]
    assert lf.required_literals(r"a+ (?:x|y)|[Bb]roker change|UpdateMetadata") == [" ", "roker change",
                                                                                    "UpdateMetadata"]
    assert lf.required_literals(r"\d+|UpdateMetadata") is None  # a branch with no text of its own
    assert lf.required_literals(r"(?i)updatemetadata") is None
    s.write_zookeeper_logs(tmp_path / "zk")
    s.write_kraft_logs(tmp_path / "kraft")
    lines = [ln for f in sorted(tmp_path.rglob("*")) if f.is_file() for ln in f.read_text().splitlines()]
    lines += [ln for v in s.KRAFT_BROKER_LINES.values() for ln in v] + s.KRAFT_CONTROLLER_LINES + [REAL_UM]
    patterns = [p for _, p in lf.EVENTS] + [lf.ISR_BROKER_STATE_LIST, lf.STATES_RE]
    for group in (lf.TP_PATTERNS, lf.ISR_PATTERNS, lf.LEADER_PATTERNS, lf.LEADER_EPOCH_PATTERNS,
                  lf.CONTROLLER_EPOCH_PATTERNS, lf.PARTITION_EPOCH_PATTERNS, lf.CONTROLLER_ID_PATTERNS,
                  lf.REPLICA_PATTERNS):
        patterns += group
    matched = 0
    for p in patterns:
        lits = lf.required_literals(p)
        rx = re.compile(p)
        for ln in lines:
            if rx.search(ln):
                matched += 1
                assert lits is None or any(x in ln for x in lits), (p, lits, ln)
    assert len(lines) > 60 and matched > 200, (len(lines), matched)


def test_broker_of_capturing_no_id_is_refused_before_spark(tmp_path):
    """--broker-of whose group captures letters (``host-([a-c])/``) or a number above int32 from a
    local path: exit 2 naming the pattern, what it captured and the path; no Spark started. Files
    pinned by ID=PATH and paths the pattern does not match are not its business."""
    from typer.testing import CliRunner

    from kops.cli.logs import app

    for name in ("host-a", "host-99999999999"):
        d = tmp_path / name
        d.mkdir()
        (d / "state-change.log").write_text("x\n")
    r = CliRunner().invoke(app, ["merge", "--logs", str(tmp_path / "host-a"), "--broker-of", r"host-([a-c])/"])
    assert r.exit_code == 2, r.output
    assert "--broker-of" in r.output and "'a'" in r.output and "host-a/state-change.log" in r.output, r.output
    with pytest.raises(sc.LogInputError, match="99999999999"):
        sc.check_path_brokers(sc.expand_sources([str(tmp_path / "host-99999999999")]), r"host-(\d+)/")
    sc.check_path_brokers(sc.expand_sources([f"3={tmp_path}/host-a"]), r"host-([a-c])/")  # pinned
    sc.check_path_brokers(sc.expand_sources([str(tmp_path / "host-a")]), r"broker-(\d+)/")  # no match
    sc.check_path_brokers(sc.expand_sources([str(tmp_path / "host-a")]), None)
