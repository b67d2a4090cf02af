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
            return await super()._describe_cluster()  # Kafka < 2.8: kafka-python's own metadata fallback
        error_type = Errors.for_code(response.error_code)
        if error_type is not Errors.NoError:
            raise error_type(response.error_message)
        answer = describe_cluster_answer(response.to_dict())
        self._process_acl_operations(answer)
        return answer


def describe_cluster_answer(raw: dict) -> dict:
    """A DescribeCluster answer (``Response.to_dict()``, any version) as kafka-python's
    ``describe_cluster()`` returns it: without the status and protocol fields, whichever of them
    the answer's version carries."""
    out = dict(raw)
    for name in _DESCRIBE_CLUSTER_DROPPED:
        out.pop(name, None)
    return out


__all__ = ["KopsAdminClient", "describe_cluster_answer"]
