"""kops reads its own topics without a consumer group (kops/cluster/partition_reader.py): a read
must never make a broker create ``__consumer_offsets``. The read itself runs on every cluster
test that touches the journal; tests/cluster/test_rebalance_step.py checks on a live cluster that
a dry run leaves the topic list as it was."""

from __future__ import annotations

import pytest

from kops.cluster.config import ClientConfig
from kops.cluster.partition_reader import consumer_config


class _Conn:
    bootstrap_server = "127.0.0.1:9092,127.0.0.1:9093"
    timeout_s = 10.0

    def __init__(self, props: dict[str, str] | None = None):
        self.client_config = ClientConfig(props or {})


def test_the_reader_joins_no_group_and_commits_nothing():
    conf = consumer_config(_Conn())
    assert conf["group_id"] is None and conf["enable_auto_commit"] is False
    assert conf["allow_auto_create_topics"] is False  # never re-creates a topic deleted under the read
    assert conf["bootstrap_servers"] == ["127.0.0.1:9092", "127.0.0.1:9093"]
    assert conf["isolation_level"] == "read_committed"
    assert conf["auto_offset_reset"] == "earliest"  # never skips to the end when the first offset is gone


def test_the_reader_carries_the_connections_security_settings():
    conf = consumer_config(_Conn({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "plain",
                                  "sasl.username": "kops", "sasl.password": "secret"}))
    assert conf["security_protocol"] == "SASL_PLAINTEXT" and conf["sasl_mechanism"] == "PLAIN"
    assert conf["sasl_plain_username"] == "kops"


def test_confluent_kafka_still_needs_a_group_for_any_consumer():
    """Why the reader is kafka-python's: remove partition_reader's workaround once this fails."""
    from confluent_kafka import Consumer

    with pytest.raises(ValueError, match="group.id"):
        Consumer({"bootstrap.servers": "127.0.0.1:1"})


def _failed(code: int):
    from concurrent.futures import Future

    from confluent_kafka import KafkaError, KafkaException

    f: Future = Future()
    f.set_exception(KafkaException(KafkaError(code)))
    return f


@pytest.mark.parametrize("name", ["UNKNOWN_TOPIC_OR_PART", "LEADER_NOT_AVAILABLE", "NOT_LEADER_FOR_PARTITION",
                                  "OFFSET_NOT_AVAILABLE", "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH",
                                  "REPLICA_NOT_AVAILABLE"])
def test_a_topic_created_a_moment_ago_or_a_moved_leader_is_asked_again(name):
    """The ListOffsets answers the reader asks again (with fresh metadata): a topic another kops
    just created reaching every broker, a rack's leaders just demoted (the old leader answers
    NOT_LEADER_OR_FOLLOWER, the new one OFFSET_NOT_AVAILABLE until its high watermark caught up)."""
    from confluent_kafka import KafkaError

    from kops.cluster.partition_reader import _asks_again

    assert _asks_again(_failed(getattr(KafkaError, name)))


@pytest.mark.parametrize("name", ["TOPIC_AUTHORIZATION_FAILED", "INVALID_REQUEST", "_TIMED_OUT"])
def test_an_authorization_failure_or_a_timeout_is_not_asked_again(name):
    from concurrent.futures import Future

    from confluent_kafka import KafkaError

    from kops.cluster.partition_reader import _asks_again

    assert not _asks_again(_failed(getattr(KafkaError, name)))
    pending: Future = Future()
    assert not _asks_again(pending)  # no answer yet: nothing to ask again
