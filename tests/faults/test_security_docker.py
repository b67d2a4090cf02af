"""``kops sandbox up --engine docker --security sasl_ssl``: the secured-cluster tests of
tests/cluster/test_security.py, run again on containers. Both listeners of every broker speak
SASL_SSL with SCRAM-SHA-512 — INTERNAL between the containers (the brokers check each other's
certificate against their container names), EXTERNAL published on 127.0.0.1 for kops — and
ZooKeeper in its container requires SASL/DIGEST-MD5 with ACLs on the brokers' znodes.

Only the fixture differs: ``secured`` is a sandbox in containers (ZooKeeper + 3 brokers, racks a, b, c).
The tests are the same functions, so a behaviour the JVM sandbox shows, containers show too."""

from __future__ import annotations

import pytest

from tests.cluster import test_security as jvm
from tests.cluster.test_security import kops_home, moves_topic, secrets  # noqa: F401 - fixtures

pytestmark = pytest.mark.faults


@pytest.fixture(scope="module")
def secured(docker_engine, tmp_path_factory, request):
    """A running secured sandbox in containers, torn down after the module."""
    from kops.sandbox import Sandbox

    yield from jvm.secured_sandbox(Sandbox, tmp_path_factory, request, "kops-docker-secured",
                                   "docker secured sandbox", engine="docker")


def test_brokers_talk_sasl_ssl_to_each_other_by_container_name(secured):
    """The inter-broker listener is INTERNAL (container names), secured like the published one:
    replication works, so every partition of the module's topic is fully in sync."""
    from kops.inputs.properties import parse_properties

    props = parse_properties(secured.config.properties_file(secured.broker_ids[0]).read_text())
    assert props["listener.security.protocol.map"] == "INTERNAL:SASL_SSL,EXTERNAL:SASL_SSL"
    assert props["advertised.listeners"].startswith(f"INTERNAL://broker-{secured.broker_ids[0]}:")
    from tests.cluster.kafka_helpers import wait_for

    def in_sync() -> bool:  # followers join the ISR once they have fetched over INTERNAL
        parts = jvm._admin(secured).list_topics(topic=jvm.TOPIC, timeout=30).topics[jvm.TOPIC].partitions.values()
        return bool(parts) and all(sorted(p.isrs) == sorted(p.replicas) and len(p.replicas) == 3 for p in parts)

    wait_for(in_sync, 90, 0.5, f"every partition of {jvm.TOPIC} fully in sync")


# the JVM sandbox's secured-cluster tests, on containers (the order matters: the secret scan is last)
test_files_private_and_up_prints_paths_only = jvm.test_files_private_and_up_prints_paths_only
test_describe_and_health_as_admin = jvm.test_describe_and_health_as_admin
test_unprivileged_user_refused_cleanly = jvm.test_unprivileged_user_refused_cleanly
test_wrong_password_is_an_authentication_error = jvm.test_wrong_password_is_an_authentication_error
test_zookeeper_reads_with_auth_file = jvm.test_zookeeper_reads_with_auth_file
test_kafka_own_tool_reads_the_properties_file = jvm.test_kafka_own_tool_reads_the_properties_file
test_zookeeper_znodes_have_acls = jvm.test_zookeeper_znodes_have_acls
test_unprivileged_reassign_execute_refused_before_any_throttle = jvm.test_unprivileged_reassign_execute_refused_before_any_throttle
test_throttled_reassignment_and_verify_as_admin = jvm.test_throttled_reassignment_and_verify_as_admin
test_zookeeper_reassignment_path_with_authenticated_zookeeper = jvm.test_zookeeper_reassignment_path_with_authenticated_zookeeper
test_preferred_election_and_cron_rebalance = jvm.test_preferred_election_and_cron_rebalance
test_no_secret_in_any_output = jvm.test_no_secret_in_any_output
