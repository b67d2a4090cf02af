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


@pytest.mark.parametrize("name", ["UnknownTopicOrPartitionError", "LeaderNotAvailableError",
                                  "NotLeaderForPartitionError", "OffsetNotAvailableError",
                                  "FencedLeaderEpochError", "UnknownLeaderEpochError"])
def test_a_topic_created_a_moment_ago_or_a_moved_leader_is_waited_out(name):
    """kafka-python's offset lookups ask again on retriable errors until their timeout: the
    answers a reader gets while a topic another kops just created reaches every broker, or right
    after a rack's leaders were demoted (a new leader answers OFFSET_NOT_AVAILABLE until its high
    watermark has caught up)."""
    import kafka.errors as errors

    assert getattr(errors, name).retriable


def test_an_authorization_failure_is_not_waited_out():
    import kafka.errors as errors

    assert not errors.TopicAuthorizationFailedError.retriable
