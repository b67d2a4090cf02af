"""Renderers of Kafka 3.9 state-change.log / controller.log lines (ZooKeeper mode, and KRaft brokers).

Used by the unit tests and by ``bench/gen_logs.py``. The texts follow the message formats of Kafka 3.9
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
