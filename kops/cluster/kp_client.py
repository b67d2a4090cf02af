"""kafka-python's ``KafkaAdminClient`` as kops uses it, with its faults on some Kafka versions
worked around here and nowhere else.

kops talks to kafka-python only for the RPCs librdkafka lacks (see
:mod:`kops.cluster.connection`). Where kafka-python gets a Kafka version wrong, the fix is an
override in :class:`KopsAdminClient`, named after the upstream report it waits for, with a
unit test (tests/unit/test_kp_client.py) and a cluster test on the versions concerned (the
version matrix, tests/compat/). Remove an override once the pinned kafka-python has the fix.

- **DescribeCluster v0 (Kafka 2.8 - 3.6)**: kafka-python 3.0.12 pops ``endpoint_type`` from
  every DescribeCluster answer, a field that came with v1 (Kafka 3.7, KIP-919); brokers before
  3.7 answer v0, which has no such field, and ``describe_cluster()`` raises
  ``KeyError: 'endpoint_type'``. The upstream report's text is in docs/compatibility.md.
- **DescribeQuorum v0 - v1 (KRaft 3.3 - 3.8)**: kafka-python 3.0.12 pops each partition's
  ``error_message``, a field of v2 (Kafka 3.9, KIP-853), without a default:
  ``describe_metadata_quorum()`` raises ``KeyError: 'error_message'`` and kops could not name the
  active controller of a KRaft 3.7 or 3.8 cluster.
- **Metadata refresh backoff**: kafka-python 3.0.12's connection manager builds its
  ``ClusterMetadata`` without the client's ``retry_backoff_ms``, so the backoff between two
  metadata requests is always the default 100 ms: a consumer assigned a topic right after its
  bootstrap waits ~100 ms before it may ask for that topic's metadata (every read of kops'
  journal: 0.11 s of a 0.14 s read). :func:`honour_retry_backoff` sets it where it is used.
- **AddRaftVoter / RemoveRaftVoter (KIP-853, Kafka 3.9+)**: kafka-python 3.0.12 has no message
  classes for API keys 80 and 81; :mod:`kops.cluster.raft_messages` builds them from JSON schemas
  with kafka-python's own ``ApiMessage``, and :meth:`KopsAdminClient.add_raft_voter` /
  :meth:`KopsAdminClient.remove_raft_voter` send them (a broker forwards them to the active
  controller, as Kafka's ``kafka-metadata-quorum.sh --bootstrap-server`` does).
- **One broker's own metadata**: kafka-python sends a request to the least loaded broker;
  :meth:`KopsAdminClient.broker_view` sends a Metadata request to the broker named, for the
  sandbox's readiness (every broker must know the cluster before a client may bootstrap from it).
- **Kafka before 2.8** answers no DescribeCluster at all: kafka-python falls back to a Metadata
  request; kops refuses instead (:class:`kops.cluster.versions.Unsupported`), naming the version
  it needs.
"""

from __future__ import annotations

from kafka.admin import KafkaAdminClient

#: the fields of a DescribeCluster answer that kops does not hand on (status and throttling)
_DESCRIBE_CLUSTER_DROPPED = ("error_code", "error_message", "endpoint_type", "throttle_time_ms")


class KopsAdminClient(KafkaAdminClient):
    """``KafkaAdminClient`` with the overrides of this module's doc."""

    async def _describe_cluster(self):
        """kafka-python's ``_describe_cluster`` with the fields of every DescribeCluster version
        dropped only where the answer has them (v0 has no ``endpoint_type``)."""
        import kafka.errors as Errors
        from kafka.protocol.admin import DescribeClusterRequest

        try:
            request = DescribeClusterRequest(include_cluster_authorized_operations=True,
                                             include_fenced_brokers=True)
            response = await self._manager.send(request)
        except Errors.IncompatibleBrokerVersion:
            # Kafka < 2.8 (kafka-python would fall back to Metadata): older than kops supports
            from kops.cluster.versions import DESCRIBE_CLUSTER, Unsupported

            raise Unsupported(
                f"the cluster's brokers do not answer {DESCRIBE_CLUSTER.api} ({DESCRIBE_CLUSTER.kip}): they run a Kafka "
                f"older than 2.8, and kops needs {DESCRIBE_CLUSTER.needs()}. Nothing was read or changed."
            ) from None
        error_type = Errors.for_code(response.error_code)
        if error_type is not Errors.NoError:
            raise error_type(response.error_message)
        answer = describe_cluster_answer(response.to_dict())
        self._process_acl_operations(answer)
        return answer

    def broker_view(self, node_id: int) -> tuple[set[int], int | None]:
        """(broker ids, controller id) as broker ``node_id`` itself answers a Metadata request for
        no topic (what librdkafka asks a bootstrap broker); the controller None when it answers
        -1. A ZooKeeper-mode broker answers from its metadata cache, which stays empty (no
        broker, controller -1) until the controller's first UpdateMetadata reaches it."""
        return self._manager.run(self._broker_view, node_id)

    async def _broker_view(self, node_id: int) -> tuple[set[int], int | None]:
        from kafka.protocol.metadata import MetadataRequest

        request = MetadataRequest(topics=MetadataRequest.NO_TOPICS, allow_auto_topic_creation=False,
                                  include_cluster_authorized_operations=False,
                                  include_topic_authorized_operations=False)
        response = await self._manager.send(request, node_id=node_id)
        ids = {int(b[0]) for b in response.brokers}
        ctrl = getattr(response, "controller_id", -1)
        return ids, (int(ctrl) if ctrl is not None and int(ctrl) >= 0 else None)

    async def _async_describe_quorum(self, topic, partition):
        """kafka-python's ``_async_describe_quorum`` with the error fields of v2 read where the
        answer has them (v0 and v1 carry only error codes)."""
        import kafka.errors as Errors
        from kafka.protocol.admin import DescribeQuorumRequest

        t = DescribeQuorumRequest.TopicData
        request = DescribeQuorumRequest(topics=[t(topic_name=topic, partitions=[t.PartitionData(partition_index=partition)])])
        response = await self._manager.send(request)
        top_error = Errors.for_code(response.error_code)
        if top_error is not Errors.NoError:
            raise top_error(getattr(response, "error_message", None) or "")
        return describe_quorum_answer(response.to_dict())

    def add_raft_voter(self, voter_id: int, directory_id, listeners, *, cluster_id: str | None = None,
                       timeout_ms: int = 30000) -> None:
        """AddRaftVoter: make ``voter_id`` (an observer of the metadata log with that directory
        id, reachable at ``listeners``: ``(name, host, port)`` tuples) a voter. Returns once the
        leader committed the new voter set; raises kafka-python's error for the answer's code."""
        from kops.cluster.raft_messages import AddRaftVoterRequest, directory_uuid

        listener = AddRaftVoterRequest.Listener
        request = AddRaftVoterRequest(
            cluster_id=cluster_id, timeout_ms=int(timeout_ms), voter_id=int(voter_id),
            voter_directory_id=directory_uuid(directory_id),
            listeners=[listener(name=n, host=h, port=int(p)) for n, h, p in listeners], ack_when_committed=True)
        self._manager.run(self._send_raft_voter_change, request, timeout_ms)

    def remove_raft_voter(self, voter_id: int, directory_id, *, cluster_id: str | None = None,
                          timeout_ms: int = 30000) -> None:
        """RemoveRaftVoter: take ``voter_id`` (with that directory id) out of the voter set."""
        from kops.cluster.raft_messages import RemoveRaftVoterRequest, directory_uuid

        request = RemoveRaftVoterRequest(cluster_id=cluster_id, voter_id=int(voter_id),
                                         voter_directory_id=directory_uuid(directory_id))
        self._manager.run(self._send_raft_voter_change, request, timeout_ms)

    async def _send_raft_voter_change(self, request, timeout_ms):
        # the leader answers once the change is committed, or at the request's own timeout
        response = await self._manager.send(request, request_timeout_ms=int(timeout_ms) + 5000)
        raise_for_raft_answer(response)


def raise_for_raft_answer(response) -> None:
    """Raise kafka-python's error for an AddRaftVoter / RemoveRaftVoter answer's error code
    (with the leader's message), nothing when it succeeded."""
    import kafka.errors as Errors

    error_type = Errors.for_code(response.error_code)
    if error_type is not Errors.NoError:
        raise error_type(getattr(response, "error_message", None) or "")


def describe_quorum_answer(raw: dict) -> dict:
    """A DescribeQuorum answer (``Response.to_dict()``, any version) as kafka-python's
    ``describe_metadata_quorum()`` returns it: no status fields at the top, and each partition's
    error as text (``error``, None when there is none)."""
    import kafka.errors as Errors

    out = dict(raw)
    for name in ("throttle_time_ms", "error_code", "error_message"):
        out.pop(name, None)
    for topic in out.get("topics") or ():
        for p in topic.get("partitions") or ():
            error = Errors.for_code(p.pop("error_code", 0))(p.pop("error_message", None))
            p["error"] = None if isinstance(error, Errors.NoError) else str(error)
    return out


def describe_cluster_answer(raw: dict) -> dict:
    """A DescribeCluster answer (``Response.to_dict()``, any version) as kafka-python's
    ``describe_cluster()`` returns it: without the status and protocol fields, whichever of them
    the answer's version carries."""
    out = dict(raw)
    for name in _DESCRIBE_CLUSTER_DROPPED:
        out.pop(name, None)
    return out


def honour_retry_backoff(client, retry_backoff_ms: int) -> bool:
    """Give ``client``'s (a ``KafkaConsumer``'s) metadata the ``retry_backoff_ms`` it was
    configured with (this module's doc). False, changing nothing, where the client keeps its
    metadata elsewhere (a kafka-python that changed: tests/unit/test_kp_client.py notices)."""
    cluster = getattr(getattr(client, "_manager", None), "cluster", None)
    config = getattr(cluster, "config", None)
    if not isinstance(config, dict) or "retry_backoff_ms" not in config:
        return False
    config["retry_backoff_ms"] = retry_backoff_ms
    return True


__all__ = ["KopsAdminClient", "raise_for_raft_answer", "describe_cluster_answer", "describe_quorum_answer", "honour_retry_backoff"]
