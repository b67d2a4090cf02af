"""Read one partition from its first offset to its end, without a consumer group.

kops keeps its own records (the execution journal, the lock, heal's memory) in a compacted topic
and reads them back whole. confluent-kafka's Python ``Consumer`` refuses to start without a
``group.id`` (2.16: ``ValueError: group.id must be set``), and librdkafka looks up the coordinator
of that group even for a consumer that only assigns partitions and never commits. A broker
answers that FindCoordinator by creating ``__consumer_offsets`` (50 partitions) on a cluster that
had none: a read — a dry run, ``reassign list``, ``heal status`` — changed the cluster. kafka-python's
``KafkaConsumer(group_id=None)`` never asks for a coordinator, so the read is made with it, here
and nowhere else (tests/cluster/test_auto_create.py checks that commands reading the journal
create no ``__consumer_offsets``, tests/cluster/test_rebalance_step.py that a dry run leaves the
topic list as it was, tests/unit/test_partition_reader.py that no group is configured).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from kops.errors import ClusterError

if TYPE_CHECKING:
    from kops.cluster.connection import Connection


#: between two metadata requests (kafka-python's default 100 ms would be most of a read's time)
RETRY_BACKOFF_MS = 10


def consumer_config(conn: Connection) -> dict[str, object]:
    """The ``KafkaConsumer`` settings of a group-less, read-only reader of ``conn``'s cluster."""
    return {
        "bootstrap_servers": conn.bootstrap_server.split(","),
        "client_id": "kops-reader",
        "group_id": None,  # no group: no FindCoordinator, no __consumer_offsets created
        "enable_auto_commit": False,
        # a topic deleted under the read is never re-created by a broker with
        # auto.create.topics.enable (kafka-python asks for auto-creation by default)
        "allow_auto_create_topics": False,
        "isolation_level": "read_committed",
        # a first offset gone before the fetch (retention ran) starts the read at the new first
        # offset, not at the end (kafka-python's default would read nothing and say nothing)
        "auto_offset_reset": "earliest",
        "request_timeout_ms": int(max(conn.timeout_s, 5) * 1000) + 1000,
        "bootstrap_timeout_ms": int(max(conn.timeout_s, 5) * 1000),
        "fetch_max_wait_ms": 100,  # never wait long for records past the end: the loop stops there
        "retry_backoff_ms": RETRY_BACKOFF_MS,
        **conn.client_config.kafka_python(),
    }


def import_in_background() -> None:
    """Start importing kafka-python (~0.13 s) in a thread, to overlap the network round trips a
    caller makes before :func:`read_to_end` (a read-only command's whole cost is of that size).
    Python's import lock makes the later import wait for this one; a failed import here is
    raised again there."""
    import sys
    import threading

    if "kafka" in sys.modules:
        return

    def run() -> None:
        try:
            import kafka  # noqa: F401
        except Exception:  # noqa: BLE001 - read_to_end imports it again and reports it
            pass

    threading.Thread(target=run, name="kops-import-kafka-python", daemon=True).start()


#: ListOffsets answers that mean "ask again": the leader moved or is still being elected, a topic
#: created a moment ago has not reached every broker, a new leader's high watermark lags
_ASK_AGAIN = frozenset({"NOT_LEADER_FOR_PARTITION", "NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE",
                        "REPLICA_NOT_AVAILABLE", "OFFSET_NOT_AVAILABLE", "UNKNOWN_TOPIC_OR_PART",
                        "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH", "KAFKA_STORAGE_ERROR"})


def offset_bounds(conn: Connection, topic: str, partition: int = 0) -> tuple[int, int]:
    """``topic``'s ``partition``'s first offset and its last stable offset (the end a
    ``read_committed`` reader stops at), from the Admin API (ListOffsets). An answer that says
    "ask again" (:data:`_ASK_AGAIN`: a leader that just moved) is asked again, after a metadata
    request that refreshes librdkafka's cache, until the connection's timeout: a connection that
    knew the old leader otherwise gets FENCED_LEADER_EPOCH or NOT_LEADER_OR_FOLLOWER from every
    ask (librdkafka sends the leader and epoch its cache names).

    Not kafka-python's ``end_offsets`` / ``seek_to_beginning``: kafka-python 3.0.12 sends
    ListOffsets again and again to the leader its metadata names, without refreshing that
    metadata on NOT_LEADER_OR_FOLLOWER, until its timeout -- a reader started while a demotion's
    UpdateMetadata was still reaching the broker it asked failed after 10 s
    (tests/cluster/test_partition_reader_cluster.py shows kafka-python's loop)."""
    import confluent_kafka
    from confluent_kafka import IsolationLevel
    from confluent_kafka.admin import OffsetSpec

    what = f"list offsets of {topic}-{partition}"
    deadline = time.monotonic() + max(conn.timeout_s, 5)
    tp = confluent_kafka.TopicPartition(topic, partition)
    out: list[int] = []
    for spec in (OffsetSpec.earliest(), OffsetSpec.latest()):
        while True:
            future = conn.admin().list_offsets({tp: spec}, isolation_level=IsolationLevel.READ_COMMITTED,
                                                request_timeout=conn.timeout_s)[tp]
            try:
                out.append(int(conn.wait(future, what).offset))
                break
            except ClusterError:
                if not (_asks_again(future) and time.monotonic() < deadline):
                    raise
            time.sleep(0.1)
            # librdkafka asks the leader (and its epoch) its metadata cache names, too: refresh it
            conn.metadata(topic, what=f"read metadata of {topic}")
    return out[0], out[1]


def _asks_again(future) -> bool:
    """Whether ``future`` (done) failed with an answer in :data:`_ASK_AGAIN`."""
    if not future.done() or future.cancelled():
        return False
    exc = future.exception()
    err = exc.args[0] if exc is not None and exc.args else None
    name = err.name() if hasattr(err, "name") else ""
    return name.lstrip("_").upper() in _ASK_AGAIN


def read_to_end(conn: Connection, topic: str, partition: int = 0) -> list[tuple[bytes | None, bytes | None]]:
    """Every record's (key, value) of ``topic``'s ``partition``, in offset order, from the first
    offset to the end offset asked for when the read began (the last stable offset: records of
    open transactions are not read). A cluster that cannot be read within the connection's
    timeout raises :class:`ClusterError` naming the topic."""
    from kafka import KafkaConsumer, TopicPartition

    from kops.cluster.kp_client import honour_retry_backoff

    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    what = f"read topic {topic}"
    timeout_ms = int(max(conn.timeout_s, 5) * 1000)
    out: list[tuple[bytes | None, bytes | None]] = []
    try:
        consumer = KafkaConsumer(**consumer_config(conn))
    except Exception as e:
        raise conn.map_error(e, what) from None
    honour_retry_backoff(consumer, RETRY_BACKOFF_MS)
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        start, end = offset_bounds(conn, topic, partition)
        consumer.seek(tp, start)
        deadline = time.monotonic() + timeout_ms / 1000 + 5
        while consumer.position(tp, timeout_ms=timeout_ms) < end:
            if time.monotonic() > deadline:
                raise ClusterError(f"{what}: not read to its end offset {end} within {timeout_ms / 1000:.0f} s")
            for record in consumer.poll(timeout_ms=500).get(tp, ()):
                if record.offset < end:
                    out.append((record.key, record.value))
    except ClusterError:
        raise
    except Exception as e:
        raise conn.map_error(e, what) from None
    finally:
        consumer.close(autocommit=False)
    return out
