"""Renderers of Kafka 3.9 state-change.log / controller.log lines (ZooKeeper mode, and KRaft brokers),
and real Kafka 4.1 KRaft lines (``KRAFT_BROKER_LINES``, ``KRAFT_CONTROLLER_LINES``).

Test data, not part of the kops package: used by the unit tests and by ``bench/gen_logs.py``. The texts follow the message formats of Kafka 3.9
(checked against lines captured from the sandbox cluster, see docs/logs-pipeline.md); the layout is
``[%d] %p %m (%c)``.
"""

from __future__ import annotations

SCL = "state.change.logger"


def line(ts: str, level: str, msg: str, logger: str = SCL) -> str:
    return f"[{ts}] {level} {msg} ({logger})"


def _lst(xs) -> str:
    return ",".join(str(x) for x in xs)


def _broker_states(isr) -> str:
    return ", ".join(f"BrokerState(brokerId={b}, brokerEpoch=-1)" for b in isr)


def leader_and_isr(leader: int, epoch: int, isr, pepoch: int) -> str:
    return (
        f"LeaderAndIsr(leader={leader}, leaderEpoch={epoch}, isrWithBrokerEpoch=List({_broker_states(isr)}), "
        f"leaderRecoveryState=RECOVERED, partitionEpoch={pepoch})"
    )


def lisr_ce(leader: int, isr, epoch: int, zkv: int, cepoch: int) -> str:
    return f"(Leader:{leader},ISR:{_lst(isr)},LeaderRecoveryState:RECOVERED,LeaderEpoch:{epoch},ZkVersion:{zkv},ControllerEpoch:{cepoch})"


# -- controller (state-change.log, [Controller id=C epoch=E]) ---------------------------------
def c_new_partition(ts, c, ce, tp, replicas) -> str:
    return line(ts, "INFO", f"[Controller id={c} epoch={ce}] Changed partition {tp} state from NonExistentPartition to NewPartition with assigned replicas {_lst(replicas)}")


def c_online(ts, c, ce, tp, frm, leader, epoch, isr, pepoch) -> str:
    return line(ts, "INFO", f"[Controller id={c} epoch={ce}] Changed partition {tp} from {frm} to OnlinePartition with state {leader_and_isr(leader, epoch, isr, pepoch)}")


def c_isr_removed(ts, c, ce, tp, leader, isr, epoch, zkv, replica) -> str:
    return line(
        ts, "INFO",
        f"[Controller id={c} epoch={ce}] Partition {tp} state changed to {lisr_ce(leader, isr, epoch, zkv, ce)} "
        f"after removing replica {replica} from the ISR as part of transition to OfflineReplica",
    )


def c_send_lai(ts, c, ce, broker, nl, nf) -> str:
    return line(ts, "INFO", f"[Controller id={c} epoch={ce}] Sending LeaderAndIsr request to broker {broker} with {nl} become-leader and {nf} become-follower partitions")


def c_send_um(ts, c, ce, brokers, n) -> str:
    return line(ts, "INFO", f"[Controller id={c} epoch={ce}] Sending UpdateMetadata request to brokers HashSet({', '.join(map(str, brokers))}) for {n} partitions")


def c_mark_offline(ts, c, tps, broker) -> str:
    return line(ts, "INFO", f"[Controller id={c}] Mark replicas {','.join(tps)} on broker {broker} as offline")


def c_replica_trace(ts, c, ce, replica, tp, frm, to) -> str:
    return line(ts, "TRACE", f"[Controller id={c} epoch={ce}] Changed state of replica {replica} for partition {tp} from {frm} to {to}")


# -- broker (state-change.log, [Broker id=B]) -------------------------------------------------
def b_handling(ts, b, corr, c, n) -> str:
    return line(ts, "INFO", f"[Broker id={b}] Handling LeaderAndIsr request correlationId {corr} from controller {c} for {n} partitions")


def b_finished(ts, b, ms, corr, c, n) -> str:
    return line(ts, "INFO", f"[Broker id={b}] Finished LeaderAndIsr request in {ms}ms correlationId {corr} from controller {c} for {n} partitions")


def b_stopped_leader(ts, b, corr, c, ce, n) -> str:
    return line(ts, "INFO", f"[Broker id={b}] Stopped fetchers as part of LeaderAndIsr request correlationId {corr} from controller {c} epoch {ce} as part of the become-leader transition for {n} partitions")


def b_leader(ts, b, tp, topic_id, epoch, offset, pepoch, hw, isr, prev_leader, prev_epoch) -> str:
    prev = "None" if prev_leader is None else f"Some({prev_leader})"
    return line(
        ts, "INFO",
        f"[Broker id={b}] Leader {tp} with topic id Some({topic_id}) starts at leader epoch {epoch} from offset {offset} "
        f"with partition epoch {pepoch}, high watermark {hw}, ISR [{_lst(isr)}], adding replicas [] and removing replicas [] . "
        f"Previous leader {prev} and previous leader epoch was {prev_epoch}.",
    )


def b_follower(ts, b, tp, epoch, offset, pepoch, hw, leader) -> str:
    # Kafka logs the "previous" leader/epoch after updating them: they repeat the current ones.
    return line(
        ts, "INFO",
        f"[Broker id={b}] Follower {tp} starts at leader epoch {epoch} from offset {offset} with partition epoch {pepoch} "
        f"and high watermark {hw}. Current leader is {leader}. Previous leader Some({leader}) and previous leader epoch was {epoch}.",
    )


def b_stopped_follower(ts, b, c, ce, corr, n) -> str:
    return line(ts, "INFO", f"[Broker id={b}] Stopped fetchers as part of become-follower request from controller {c} epoch {ce} with correlation id {corr} for {n} partitions")


def b_started_follower(ts, b, n) -> str:
    return line(ts, "INFO", f"[Broker id={b}] Started fetchers as part of become-follower for {n} partitions")


def b_metadata(ts, b, n, c, ce, corr) -> str:
    return line(ts, "INFO", f"[Broker id={b}] Add {n} partitions and deleted 0 partitions from metadata cache in response to UpdateMetadata request sent by controller {c} epoch {ce} with correlation id {corr}")


def b_skip_follower(ts, b, tp, topic, part, ce, leader, epoch, isr, pepoch, replicas) -> str:
    ps = (
        f"LeaderAndIsrPartitionState(topicName='{topic}', partitionIndex={part}, controllerEpoch={ce}, leader={leader}, "
        f"leaderEpoch={epoch}, isr=[{', '.join(map(str, isr))}], partitionEpoch={pepoch}, replicas=[{', '.join(map(str, replicas))}], "
        f"addingReplicas=[], removingReplicas=[], isNew=false, leaderRecoveryState=0)"
    )
    return line(ts, "INFO", f"[Broker id={b}] Skipped the become-follower state change for {tp} with topic id Some(x) and partition state {ps} since it is already a follower with leader epoch {epoch}.")


# A small, faithful ZooKeeper-mode history over two brokers' files (controller = broker 1):
# topic "orders" created (2 partitions, RF 2 on brokers 1,2), broker 2 fails, comes back,
# preferred election moves orders-1 back to broker 2. Includes a stack trace and a bad line.
SAMPLE_BROKER1 = "\n".join([
    c_send_um("2026-11-22 01:00:00,000", 1, 3, [1, 2], 0),
    c_new_partition("2026-11-22 01:00:01,000", 1, 3, "orders-0", [1, 2]),
    c_new_partition("2026-11-22 01:00:01,000", 1, 3, "orders-1", [2, 1]),
    c_online("2026-11-22 01:00:01,100", 1, 3, "orders-0", "NewPartition", 1, 0, [1, 2], 0),
    c_online("2026-11-22 01:00:01,100", 1, 3, "orders-1", "NewPartition", 2, 0, [2, 1], 0),
    c_send_lai("2026-11-22 01:00:01,120", 1, 3, 1, 1, 1),
    b_handling("2026-11-22 01:00:01,150", 1, 1, 1, 2),
    b_leader("2026-11-22 01:00:01,200", 1, "orders-0", "AAAAAAAAAAAAAAAAAAAAAA", 0, 0, 0, 0, [1, 2], None, -1),
    b_follower("2026-11-22 01:00:01,210", 1, "orders-1", 0, 0, 0, 0, 2),
    b_finished("2026-11-22 01:00:01,250", 1, 100, 1, 1, 2),
    c_mark_offline("2026-11-22 01:00:05,000", 1, ["orders-1"], 2),
    c_online("2026-11-22 01:00:05,010", 1, 3, "orders-1", "OfflinePartition", 1, 1, [1], 1),
    c_isr_removed("2026-11-22 01:00:05,020", 1, 3, "orders-0", 1, [1], 0, 1, 2),
    line("2026-11-22 01:00:05,030", "ERROR", "[Broker id=1] Error while processing LeaderAndIsr request correlationId 2 received from controller 1 epoch 3 for partition orders-1"),
    "java.lang.IllegalStateException: boom",
    "\tat kafka.server.ReplicaManager.makeLeaders(ReplicaManager.scala:2230)",
    b_leader("2026-11-22 01:00:05,040", 1, "orders-1", "BBBBBBBBBBBBBBBBBBBBBB", 1, 7, 1, 7, [1], 2, 0),
    "this line is garbage [not a record]",
    "[2026-11-22 01:00:0 broken timestamp (state.change.logger)",
    c_online("2026-11-22 01:00:20,000", 1, 3, "orders-1", "OnlinePartition", 2, 2, [1, 2], 3),
])

SAMPLE_BROKER2 = "\n".join([
    b_metadata("2026-11-22 01:00:00,010", 2, 0, 1, 3, 0),
    b_handling("2026-11-22 01:00:01,150", 2, 1, 1, 2),
    b_leader("2026-11-22 01:00:01,190", 2, "orders-1", "BBBBBBBBBBBBBBBBBBBBBB", 0, 0, 0, 0, [2, 1], None, -1),
    b_follower("2026-11-22 01:00:01,200", 2, "orders-0", 0, 0, 0, 0, 1),
    b_finished("2026-11-22 01:00:01,260", 2, 110, 1, 1, 2),
    b_handling("2026-11-22 01:00:12,000", 2, 5, 1, 2),
    b_follower("2026-11-22 01:00:12,010", 2, "orders-1", 1, 7, 1, 7, 1),
    b_leader("2026-11-22 01:00:20,010", 2, "orders-1", "BBBBBBBBBBBBBBBBBBBBBB", 2, 9, 3, 9, [1, 2], 1, 1),
])


# -- KRaft (Kafka 4.1) ---------------------------------------------------------------------------
# Lines captured verbatim from a kops KRaft sandbox (Kafka 4.1.1, 6 brokers in racks a,a,b,b,c,c,
# controller 1000; `kops sandbox up --mode kraft`): topic "orders" created (orders-0 on 5,1,3),
# orders-0 reassigned to 4,0,2 by `kops reassign execute --throttle`, broker 4 stopped by a
# controlled shutdown, broker 2 killed (fenced); topic "unc" (0,2) left without a live ISR member
# and given to broker 2 by `kops leader elect --election-type unclean`. KRaft brokers write
# ``[Broker id=N]`` lines to state-change.log; the KRaft controller writes none there: its partition
# history is in controller.log (``[QuorumController id=N]``).
KRAFT_BROKER_LINES: dict[int, list[str]] = {
    5: [
        "[2026-11-22 04:52:53,092] INFO [Broker id=5] Creating new partition orders-0 with topic id 101BeZxgQsyTS2f_1ps2oA. (state.change.logger)",
        "[2026-11-22 04:52:53,415] INFO [Broker id=5] Leader orders-0 with topic id Some(101BeZxgQsyTS2f_1ps2oA) starts at leader epoch 0 from offset 0 with partition epoch 0, high watermark 0, ISR [5,1,3], adding replicas [] and removing replicas [] . Previous leader None and previous leader epoch was -1. (state.change.logger)",
    ],
    4: [
        "[2026-11-22 04:52:53,065] INFO [Broker id=4] Transitioning 1 partition(s) to local leaders. (state.change.logger)",
        "[2026-11-22 04:53:08,436] ERROR [Broker id=4] Expected partition orders-0 with topic id 101BeZxgQsyTS2f_1ps2oA to exist, but it was missing. Creating... (state.change.logger)",
        "[2026-11-22 04:53:08,507] INFO [Broker id=4] Follower orders-0 starts at leader epoch 0 from offset 0 with partition epoch 1 and high watermark 0. Current leader is 5. Previous leader Some(5) and previous leader epoch was 0. (state.change.logger)",
        "[2026-11-22 04:53:09,873] INFO [Broker id=4] Deleting 1 partition(s). (state.change.logger)",
        "[2026-11-22 04:53:10,118] INFO [Broker id=4] Leader orders-0 with topic id Some(101BeZxgQsyTS2f_1ps2oA) starts at leader epoch 1 from offset 10 with partition epoch 4, high watermark 10, ISR [0,2,4], adding replicas [] and removing replicas [] . Previous leader Some(5) and previous leader epoch was 0. (state.change.logger)",
        "[2026-11-22 04:53:23,534] INFO [Broker id=4] Stopped fetchers as part of controlled shutdown for 7 partitions (state.change.logger)",
    ],
    0: [
        "[2026-11-22 04:53:09,285] INFO [Broker id=0] Skipped the become-follower state change for orders-0 with topic id Some(101BeZxgQsyTS2f_1ps2oA) and partition state LeaderAndIsrPartitionState(topicName='orders', partitionIndex=0, controllerEpoch=-1, leader=5, leaderEpoch=0, isr=[5, 1, 3, 4], partitionEpoch=2, replicas=[4, 0, 2, 1, 3, 5], addingReplicas=[0, 2, 4], removingReplicas=[1, 3, 5], isNew=false, leaderRecoveryState=0) since it is already a follower with leader epoch 0. (state.change.logger)",
        "[2026-11-22 04:53:10,173] INFO [Broker id=0] Follower orders-0 starts at leader epoch 1 from offset 10 with partition epoch 4 and high watermark 10. Current leader is 4. Previous leader Some(4) and previous leader epoch was 1. (state.change.logger)",
    ],
    2: [
        "[2026-11-22 04:59:05,614] TRACE [Broker id=2] Unable to start fetching unc-0 with topic ID Some(8xrM5AmqRo-JV5UaQwcrQw) from leader Some(-1) because it is not alive. (state.change.logger)",
        "[2026-11-22 04:59:08,719] INFO [Broker id=2] The topic partition unc-0 was marked as RECOVERING. Marking the topic partition as RECOVERED. (state.change.logger)",
        "[2026-11-22 04:59:08,730] INFO [Broker id=2] Leader unc-0 with topic id Some(8xrM5AmqRo-JV5UaQwcrQw) starts at leader epoch 2 from offset 0 with partition epoch 3, high watermark 0, ISR [2], adding replicas [] and removing replicas [] . Previous leader Some(-1) and previous leader epoch was 1. (state.change.logger)",
    ],
}

#: controller.log of the KRaft controller (node 1000), same history
KRAFT_CONTROLLER_LINES: list[str] = [
    "[2026-11-22 04:52:24,312] INFO [QuorumController id=1000] Becoming the active controller at epoch 1, next write offset 1. (org.apache.kafka.controller.QuorumController)",
    "[2026-11-22 04:52:52,840] INFO [QuorumController id=1000] Replayed TopicRecord for topic orders with topic ID 101BeZxgQsyTS2f_1ps2oA. (org.apache.kafka.controller.ReplicationControlManager)",
    "[2026-11-22 04:52:52,856] INFO [QuorumController id=1000] Replayed PartitionRecord for new partition orders-0 with topic ID 101BeZxgQsyTS2f_1ps2oA and PartitionRegistration(replicas=[5, 1, 3], directories=[CE6TT_wJQlyZE4-k8pbTCw, cG8jeZeNS8Sj-b4HOesq9A, Ql-ty5f2RhmHKmjkCmqo5w], isr=[5, 1, 3], removingReplicas=[], addingReplicas=[], elr=[], lastKnownElr=[], leader=5, leaderRecoveryState=RECOVERED, leaderEpoch=0, partitionEpoch=0). (org.apache.kafka.controller.ReplicationControlManager)",
    "[2026-11-22 04:53:08,220] INFO [QuorumController id=1000] Successfully altered 2 out of 2 partition reassignment(s). (org.apache.kafka.controller.ReplicationControlManager)",
    "[2026-11-22 04:53:08,297] INFO [QuorumController id=1000] Replayed partition assignment change PartitionChangeRecord(partitionId=0, topicId=101BeZxgQsyTS2f_1ps2oA, isr=null, leader=-2, replicas=[4, 0, 2, 1, 3, 5], removingReplicas=[1, 3, 5], addingReplicas=[0, 2, 4], leaderRecoveryState=-1, directories=[GAFg3Nq1Tgmr4tj-CHyS7w, ZDCgz9PmQ-qJ4YX6OBZnmQ, gweLqwQQTwWeQA6n2DRx9w, cG8jeZeNS8Sj-b4HOesq9A, Ql-ty5f2RhmHKmjkCmqo5w, CE6TT_wJQlyZE4-k8pbTCw], eligibleLeaderReplicas=null, lastKnownElr=null) for topic orders (org.apache.kafka.controller.ReplicationControlManager)",
    "[2026-11-22 04:53:09,762] INFO [QuorumController id=1000] AlterPartition request from node 5 for orders-0 completed the ongoing partition reassignment and triggered a leadership change. Returning NEW_LEADER_ELECTED. (org.apache.kafka.controller.ReplicationControlManager)",
    "[2026-11-22 04:53:09,763] INFO [QuorumController id=1000] Replayed partition assignment change PartitionChangeRecord(partitionId=0, topicId=101BeZxgQsyTS2f_1ps2oA, isr=[0, 2, 4], leader=4, replicas=[4, 0, 2], removingReplicas=[], addingReplicas=[], leaderRecoveryState=-1, directories=[GAFg3Nq1Tgmr4tj-CHyS7w, ZDCgz9PmQ-qJ4YX6OBZnmQ, gweLqwQQTwWeQA6n2DRx9w], eligibleLeaderReplicas=null, lastKnownElr=null) for topic orders (org.apache.kafka.controller.ReplicationControlManager)",
    "[2026-11-22 04:53:12,449] INFO [QuorumController id=1000] Replayed RemoveTopicRecord for topic __kops_lock with ID 3yzqvSMHTBqYNFqXwhupCw. (org.apache.kafka.controller.ReplicationControlManager)",
    "[2026-11-22 04:53:23,421] INFO [QuorumController id=1000] Unfenced broker 4 has requested and been granted a controlled shutdown. (org.apache.kafka.controller.BrokerHeartbeatManager)",
    "[2026-11-22 04:53:43,119] INFO [QuorumController id=1000] Fencing broker 2 at epoch 16 because its session has timed out. (org.apache.kafka.controller.ReplicationControlManager)",
    "[2026-11-22 04:58:30,624] INFO [QuorumController id=1000] Replayed PartitionRecord for new partition unc-0 with topic ID 8xrM5AmqRo-JV5UaQwcrQw and PartitionRegistration(replicas=[0, 2], directories=[ZDCgz9PmQ-qJ4YX6OBZnmQ, gweLqwQQTwWeQA6n2DRx9w], isr=[0, 2], removingReplicas=[], addingReplicas=[], elr=[], lastKnownElr=[], leader=0, leaderRecoveryState=RECOVERED, leaderEpoch=0, partitionEpoch=0). (org.apache.kafka.controller.ReplicationControlManager)",
    "[2026-11-22 04:59:08,666] INFO Setting new leader for topicId 8xrM5AmqRo-JV5UaQwcrQw, partition 0 to 2 using an unclean election. Previous partition: PartitionRegistration(replicas=[0, 2], directories=[ZDCgz9PmQ-qJ4YX6OBZnmQ, gweLqwQQTwWeQA6n2DRx9w], isr=[], removingReplicas=[], addingReplicas=[], elr=[0], lastKnownElr=[0], leader=-1, leaderRecoveryState=RECOVERED, leaderEpoch=1, partitionEpoch=2), change record: PartitionChangeRecord(partitionId=0, topicId=8xrM5AmqRo-JV5UaQwcrQw, isr=null, leader=-2, replicas=null, removingReplicas=null, addingReplicas=null, leaderRecoveryState=-1, directories=null, eligibleLeaderReplicas=null, lastKnownElr=null) (org.apache.kafka.controller.PartitionChangeBuilder)",
    "[2026-11-22 04:59:08,667] INFO [QuorumController id=1000] UNCLEAN partition change for unc-0 with topic ID 8xrM5AmqRo-JV5UaQwcrQw: isr: [] -> [2], leader: -1 -> 2, leaderRecoveryState: RECOVERED -> RECOVERING, leaderEpoch: 1 -> 2, elr: [0] -> [], lastKnownElr: [0] -> [], partitionEpoch: 2 -> 3 (org.apache.kafka.controller.ReplicationControlManager)",
]


def write_zookeeper_logs(root) -> None:
    """The ZooKeeper-mode sample as brokers' log dirs under ``root`` (a ``pathlib.Path``):
    ``broker-{1,2}/logs/state-change.log``, and an hourly-rotated file of broker 2 that starts
    with an orphan continuation line."""
    for b, text in ((1, SAMPLE_BROKER1), (2, SAMPLE_BROKER2)):
        d = root / f"broker-{b}" / "logs"
        d.mkdir(parents=True)
        (d / "state-change.log").write_text(text + "\n")
    (root / "broker-2" / "logs" / "state-change.log.2026-11-22-00").write_text(
        "  orphan continuation\n" + b_metadata("2026-11-22 00:59:59,000", 2, 0, 1, 3, 0) + "\n"
    )


def write_kraft_logs(root) -> None:
    """The KRaft sample under ``root``: brokers' state-change.log, and a controller (1000) whose
    state-change.log is empty (a KRaft controller writes none) beside its controller.log."""
    for b, lines in KRAFT_BROKER_LINES.items():
        d = root / f"broker-{b}" / "logs"
        d.mkdir(parents=True)
        (d / "state-change.log").write_text("\n".join(lines) + "\n")
    d = root / "controller-1000" / "logs"
    d.mkdir(parents=True)
    (d / "state-change.log").write_text("")
    (d / "controller.log").write_text("\n".join(KRAFT_CONTROLLER_LINES) + "\n")
