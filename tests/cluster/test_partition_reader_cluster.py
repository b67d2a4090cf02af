"""kops reads its own topics (journal, lock, heal's memory, cordons) right after a leader moved
(kops/cluster/partition_reader.py). A rack-maintenance playbook demotes a rack's leaders and then
reads the topology with the cordons at once: on the version matrix (ZooKeeper, Kafka 3.9.2) that
read failed after 10 s with kafka-python's "Failed to get offsets by timestamps" -- its
ListOffsets loop asks the old leader again and again and never refreshes its metadata. The
reader now asks the offsets through the Admin API; the first test shows kafka-python's loop on
this cluster (when it fails, kafka-python was fixed and the workaround can go). librdkafka's
Admin ListOffsets has the same habit with its metadata cache (FENCED_LEADER_EPOCH until the
timeout, seen by the second test before the reader refreshed the metadata between asks)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import ElectionType, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kafka.structs import TopicPartition as KTP

from tests.cluster.kafka_helpers import admin, create_topic, delete_topic, wait_for

pytestmark = pytest.mark.cluster


def _leader(bootstrap: str, topic: str) -> int:
    return admin(bootstrap).list_topics(topic, timeout=10).topics[topic].partitions[0].leader


def _move_leader(bootstrap: str, topic: str, to: int) -> None:
    """Make ``to`` the preferred replica of ``topic``-0 (the same replicas reordered: nothing is
    copied) and elect it; return once the cluster's metadata names it."""
    replicas = admin(bootstrap).list_topics(topic, timeout=10).topics[topic].partitions[0].replicas
    kp = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        kp.alter_partition_reassignments({KTP(topic, 0): [to] + [b for b in replicas if b != to]})
        wait_for(lambda: not kp.list_partition_reassignments(), 30, 0.2, "the reorder to complete")
    finally:
        kp.close()
    # elected through a client of its own, and waited on by its effect, not its answer: a CI run
    # (load 30+) had no answer in 30 s, and the cached client asked for metadata 10 s more in
    # vain -- a broker answers one connection's requests in order, so a client's other requests
    # to the controller wait behind its ElectLeaders (test_logs_cluster saw the controller elect
    # at once and its answer come late). Electing again is safe (ELECTION_NOT_NEEDED): a request
    # that changed nothing in 60 s (librdkafka's own bound) is sent once more by a new client.
    tp = [TopicPartition(topic, 0)]
    failed = []
    for _ in range(2):
        electing = AdminClient({"bootstrap.servers": bootstrap})  # kept referenced until the leader is in place
        answer = electing.elect_leaders(ElectionType.PREFERRED, tp)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if _leader_now(bootstrap, topic) == to:
                return
            if answer.done():
                if answer.exception() is not None:  # the request as a whole (timed out): send again
                    failed.append(str(answer.exception()))
                    break
                errs = {p: e for p, e in answer.result().items()
                        if e is not None and e.code() != KafkaError.ELECTION_NOT_NEEDED}
                assert not errs, f"ElectLeaders (preferred) of {topic}-0 for broker {to}: {errs}"
            time.sleep(0.2)
    raise AssertionError(f"broker {to} does not lead {topic}-0 after two ElectLeaders (preferred) sent by "
                         f"new clients (failed: {failed}); leader {_leader_now(bootstrap, topic)}")


def _leader_now(bootstrap: str, topic: str) -> int | None:
    """The leader of ``topic``-0 as a new client reads it (None: no metadata in 10 s)."""
    try:
        return AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10).topics[topic].partitions[0].leader
    except KafkaException:
        return None


@pytest.fixture
def one_partition(bootstrap, unique_topic):
    topic = unique_topic("reader")
    try:
        create_topic(bootstrap, topic, partitions=1, rf=3, min_isr=1)
    except TimeoutError as e:  # (as in _move_leader: name the request that was not answered)
        raise TimeoutError(f"CreateTopics of {topic}: no answer in 30 s") from e
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(20):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
    assert p.flush(30) == 0
    yield topic
    delete_topic(bootstrap, topic)


def test_kafka_pythons_offset_lookup_keeps_asking_a_leader_that_moved(bootstrap, one_partition):
    """The upstream bug the reader works around: a consumer whose metadata names the old leader
    gets NOT_LEADER_OR_FOLLOWER and asks the same broker again until its timeout.

    The cluster's metadata names the new leader a moment before the old one has handled its
    demotion (the controller's LeaderAndIsr): until then the old leader still answers the lookup.
    So the lookup is made again until the old leader refuses it -- from then on kafka-python's
    loop times out every time. A fixed kafka-python refreshes its metadata and answers 20 every
    time: the test then fails after 30 s, and the workaround can go."""
    from kafka import KafkaConsumer
    from kafka.errors import KafkaTimeoutError

    topic = one_partition
    consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","), group_id=None, enable_auto_commit=False)
    try:
        tp = KTP(topic, 0)
        consumer.assign([tp])
        assert consumer.end_offsets([tp], timeout_ms=10000)[tp] == 20  # metadata learnt, leader known
        old = _leader(bootstrap, topic)
        replicas = admin(bootstrap).list_topics(topic, timeout=10).topics[topic].partitions[0].replicas
        _move_leader(bootstrap, topic, next(b for b in replicas if b != old))
        answered = 0
        deadline = time.monotonic() + 30
        while True:
            try:
                assert consumer.end_offsets([tp], timeout_ms=3000)[tp] == 20
            except KafkaTimeoutError as e:
                assert "Failed to get offsets by timestamps" in str(e)
                break
            answered += 1  # the old leader had not handled its demotion yet
            assert time.monotonic() < deadline, f"kafka-python found the new leader ({answered} lookups answered)"
            time.sleep(0.2)
    finally:
        consumer.close(autocommit=False)


def test_the_reader_reads_right_after_the_leader_moved(bootstrap, one_partition):
    """The reader with a connection that knew the old leader: every record, at once, each time
    the leader moves."""
    from kops.cluster.config import ClientConfig
    from kops.cluster.connection import Connection
    from kops.cluster.partition_reader import offset_bounds, read_to_end

    topic = one_partition
    want = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(20)]
    with Connection(bootstrap, ClientConfig(), None, 10) as conn:
        assert read_to_end(conn, topic) == want
        replicas = admin(bootstrap).list_topics(topic, timeout=10).topics[topic].partitions[0].replicas
        for to in [*replicas[1:], replicas[0]]:
            _move_leader(bootstrap, topic, to)
            assert offset_bounds(conn, topic) == (0, 20)
            assert read_to_end(conn, topic) == want
