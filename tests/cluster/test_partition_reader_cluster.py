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

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka import ElectionType
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
    electing = admin(bootstrap)  # kept referenced until its answer
    try:
        res = electing.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(30)
    except TimeoutError as e:  # (one run in 26 timed out in a bare admin future: say which one it was)
        raise TimeoutError(f"ElectLeaders (preferred) of {topic}-0 for broker {to}: no answer in 30 s; "
                           f"brokers {sorted(admin(bootstrap).list_topics(timeout=10).brokers)}") from e
    assert all(err is None for err in res.values()), res
    wait_for(lambda: _leader(bootstrap, topic) == to, 30, 0.2, f"broker {to} to lead {topic}-0")


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
    import time

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
