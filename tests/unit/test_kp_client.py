"""kops' kafka-python client on the answers of each Kafka version (kops/cluster/kp_client.py),
and what kops reads of the brokers' ApiVersions (kops/cluster/versions.py). The answers are real
protocol bytes, encoded and decoded by kafka-python's own message classes."""

from __future__ import annotations

import asyncio

import pytest
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import DescribeClusterResponse, DescribeQuorumResponse

from kops.cluster import versions
from kops.cluster.kp_client import KopsAdminClient
from kops.errors import BadInput


def _answer(version: int) -> DescribeClusterResponse:
    """A DescribeCluster answer as a broker speaking ``version`` sends it: v0 (Kafka 2.8 - 3.6), v1
    (3.7, endpoint_type), v2 (4.0, is_fenced)."""
    b = DescribeClusterResponse.DescribeClusterBroker
    sent = DescribeClusterResponse(
        version=version, throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=1,
        cluster_id="c-1", controller_id=2,
        brokers=[b(broker_id=1, host="h1", port=9092, rack="a", is_fenced=False),
                 b(broker_id=2, host="h2", port=9092, rack=None, is_fenced=True)],
        authorized_operations=set())
    return DescribeClusterResponse.decode(sent.encode(version=version), version=version)


class _Manager:
    """kafka-python's connection manager, reduced to one canned answer (or error)."""

    def __init__(self, answer):
        self.answer = answer

    async def send(self, request, node_id=None, request_timeout_ms=None):
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


def _client(cls, answer):
    client = object.__new__(cls)
    client._manager = _Manager(answer)
    return client


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_cluster_reads_every_version(version):
    got = asyncio.run(_client(KopsAdminClient, _answer(version))._describe_cluster())
    assert got["cluster_id"] == "c-1" and got["controller_id"] == 2
    assert [(b["broker_id"], b["host"], b["rack"]) for b in got["brokers"]] == [(1, "h1", "a"), (2, "h2", None)]
    assert "endpoint_type" not in got and "error_code" not in got
    assert ("is_fenced" in got["brokers"][1]) == (version >= 2)


def test_stock_kafka_python_still_fails_on_a_v0_answer():
    """The upstream fault kops works around (Kafka 2.8 - 3.6 answer DescribeCluster v0). When this
    test fails, the pinned kafka-python has the fix: drop KopsAdminClient._describe_cluster."""
    with pytest.raises(KeyError, match="endpoint_type"):
        asyncio.run(_client(KafkaAdminClient, _answer(0))._describe_cluster())


def test_a_kafka_older_than_2_8_is_refused_naming_the_version():
    import kafka.errors as Errors

    answer = Errors.IncompatibleBrokerVersion("Kafka broker does not support the 'DescribeCluster' Kafka protocol.")
    with pytest.raises(versions.Unsupported) as e:
        asyncio.run(_client(KopsAdminClient, answer)._describe_cluster())
    assert isinstance(e.value, BadInput) and e.value.exit_code == 2
    assert "older than 2.8" in e.value.message and "Kafka 2.8 or later (KIP-700" in e.value.message


def _quorum_answer(version: int) -> DescribeQuorumResponse:
    """A DescribeQuorum answer as a KRaft broker speaking ``version`` sends it: v0 (Kafka 3.3), v1
    (3.4, fetch times), v2 (3.9, KIP-853: error messages, directory ids, nodes)."""
    t = DescribeQuorumResponse.TopicData
    rs = t.PartitionData.ReplicaState
    part = t.PartitionData(partition_index=0, error_code=0, error_message=None, leader_id=1000, leader_epoch=3,
                           high_watermark=42, current_voters=[rs(replica_id=1000, log_end_offset=42)],
                           observers=[rs(replica_id=b, log_end_offset=42) for b in (0, 1)])
    sent = DescribeQuorumResponse(version=version, error_code=0, error_message=None,
                                  topics=[t(topic_name="__cluster_metadata", partitions=[part])], nodes=[])
    return DescribeQuorumResponse.decode(sent.encode(version=version), version=version)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_quorum_reads_every_version(version):
    got = asyncio.run(_client(KopsAdminClient, _quorum_answer(version))._async_describe_quorum("__cluster_metadata", 0))
    p = got["topics"][0]["partitions"][0]
    assert p["leader_id"] == 1000 and p["error"] is None and "error_message" not in p and "error_code" not in got
    assert [v["replica_id"] for v in p["current_voters"]] == [1000] and len(p["observers"]) == 2


@pytest.mark.parametrize("version", [0, 1])
def test_stock_kafka_python_still_fails_on_a_quorum_answer_before_v2(version):
    """The upstream fault kops works around (KRaft 3.3 - 3.8 answer DescribeQuorum v0/v1). When this
    test fails, the pinned kafka-python has the fix: drop KopsAdminClient._async_describe_quorum."""
    with pytest.raises(KeyError, match="error_message"):
        asyncio.run(_client(KafkaAdminClient, _quorum_answer(version))._async_describe_quorum("__cluster_metadata", 0))


# -- ApiVersions ------------------------------------------------------------------------------------
def _apis(release: tuple[int, int]) -> dict[int, tuple[int, int]]:
    from kafka.protocol.broker_version_data import BROKER_API_VERSIONS

    return dict(BROKER_API_VERSIONS[release])


@pytest.mark.parametrize(("release", "disk", "quorum"), [
    ((2, 8), False, False), ((3, 2), False, False), ((3, 3), True, True), ((3, 6), True, True), ((4, 0), True, True),
])
def test_features_follow_the_brokers_api_versions(release, disk, quorum):
    b = versions.broker_apis(0, _apis(release))
    assert b.release == release and b.kafka() == versions.line(release)
    assert b.supports(versions.DISK_CAPACITY) is disk
    assert b.supports(versions.DESCRIBE_CLUSTER) and b.supports(versions.ELECTIONS)


def test_a_cluster_mid_upgrade_names_the_brokers_that_lack_a_feature():
    cluster = versions.ClusterApis((versions.broker_apis(0, _apis((3, 2))), versions.broker_apis(1, _apis((3, 6))),
                                    versions.broker_apis(2, _apis((3, 2)))))
    assert cluster.kafka() == "3.2 - 3.6" and cluster.release() == (3, 2)
    assert cluster.lacking(versions.DISK_CAPACITY) == [0, 2] and not cluster.supports(versions.DISK_CAPACITY)
    with pytest.raises(versions.Unsupported) as e:
        cluster.require(versions.DISK_CAPACITY, "--disk-check")
    assert e.value.message == (
        "--disk-check: the log dirs' total and usable bytes needs Kafka 3.3 or later (KIP-827: DescribeLogDirs v4); "
        "brokers 0, 2 run Kafka 3.2. Nothing was changed.")
    cluster.require(versions.ELECTIONS, "elect")  # every broker has it: no error


def test_a_broker_newer_than_kafka_pythons_table_shows_as_or_later():
    from kafka.protocol.broker_version_data import BROKER_API_VERSIONS

    newest = max(BROKER_API_VERSIONS)[:2]
    b = versions.broker_apis(3, _apis(newest))
    assert b.or_later and b.kafka() == f"{versions.line(newest)}+"
    assert versions.broker_apis(3, {}).kafka() == "?"


def test_a_consumers_metadata_backoff_is_the_configured_one():
    """kafka-python 3.0.12 leaves a consumer's metadata at the default 100 ms backoff whatever
    ``retry_backoff_ms`` says; kp_client.honour_retry_backoff sets it (the journal read waits
    10 ms, not 100, for its topic's metadata)."""
    from kafka import KafkaConsumer

    from kops.cluster.kp_client import honour_retry_backoff

    # api_version given: no bootstrap, nothing is reached
    c = KafkaConsumer(bootstrap_servers=["127.0.0.1:1"], api_version=(3, 9), group_id=None, retry_backoff_ms=10)
    try:
        assert c._manager.cluster.config["retry_backoff_ms"] == 100  # the fault (remove the workaround when this fails)
        assert honour_retry_backoff(c, 10) is True
        assert c._manager.cluster.config["retry_backoff_ms"] == 10
    finally:
        c.close()
    assert honour_retry_backoff(object(), 10) is False  # a client without that metadata: nothing changed
