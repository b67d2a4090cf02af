"""kops never creates a topic by asking about it, on a broker with ``auto.create.topics.enable``
(Kafka's default, common on real clusters; the session's sandbox turns it off).

kops looks for its own topics (``__kops_lock``, ``__kops_journal``) with a metadata request for
that one topic (:meth:`kops.cluster.connection.Connection.topic_metadata`). librdkafka's default
for an AdminClient is ``allow.auto.create.topics=true``: without kops' setting such a broker
creates the topic being looked for (an empty ``__kops_lock`` with the broker's defaults)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from tests.cluster.kafka_helpers import wait_for
from tests.cluster.sandboxes import own_sandbox

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def auto_create_cluster(tmp_path_factory, request):
    """One broker (Kafka 3.9, ZooKeeper) with auto.create.topics.enable=true."""
    from kops.sandbox import Sandbox

    yield from own_sandbox(Sandbox, tmp_path_factory, request, "kops-auto-create", "auto-create sandbox", brokers=1,
                           racks="a", extra_properties={"auto.create.topics.enable": "true"})


def _topics(bootstrap: str) -> set[str]:
    # a request for every topic never creates one
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics)


def _auto_create_control(bootstrap: str) -> str:
    """Have the broker auto-create a new topic (a producer asks about it: librdkafka's default
    allows it) and wait until the cluster's metadata shows it. The broker writes an auto-created
    topic to ZooKeeper before it answers, and the controller takes new topics in order, so any
    topic auto-created by an earlier request shows by then too: what is absent after this was
    never created."""
    name = f"control-{time.monotonic_ns()}"
    Producer({"bootstrap.servers": bootstrap}).list_topics(name, timeout=10)
    wait_for(lambda: name in _topics(bootstrap), 30, 0.2, f"the broker to auto-create {name}")
    return name


def test_this_broker_does_create_topics_it_is_asked_about(auto_create_cluster):
    """The control: a client that allows it gets a topic created by asking for its metadata --
    so the tests below can fail."""
    assert _auto_create_control(auto_create_cluster.bootstrap_servers).startswith("control-")


def test_looking_for_kops_topics_creates_none(auto_create_cluster):
    from kops.cluster.config import ClientConfig
    from kops.cluster.connection import Connection

    bs = auto_create_cluster.bootstrap_servers
    with Connection(bs, ClientConfig(), None, 10) as conn:
        for topic in ("__kops_lock", "__kops_journal"):
            md, exists = conn.topic_metadata(topic)
            assert not exists and md.brokers, topic
    _auto_create_control(bs)
    assert not {"__kops_lock", "__kops_journal"} & _topics(bs)


def test_cron_leader_rebalance_and_health_create_no_topic(auto_create_cluster):
    """The cron path looks for kops' pause record and lock; `cluster health` reads the
    cluster: neither leaves a topic behind."""
    bs = auto_create_cluster.bootstrap_servers
    before = _topics(bs)
    for args in (["leader", "rebalance"], ["cluster", "health"]):
        r = subprocess.run([sys.executable, "-m", "kops", *args, "--bootstrap-server", bs],
                           capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    control = _auto_create_control(bs)
    assert _topics(bs) == before | {control}


def test_reading_kops_journal_creates_no_consumer_offsets(auto_create_cluster):
    """kops reads its journal topic back without a consumer group: a group's coordinator lookup
    would make the broker create ``__consumer_offsets`` during a read-only command
    (kops/cluster/partition_reader.py). A pause writes the journal topic; every command after it
    reads it."""
    bs = auto_create_cluster.bootstrap_servers
    before = _topics(bs)
    assert "__consumer_offsets" not in before, before  # (no test of this module consumes)
    for args in (["rebalance", "pause", "--for", "5m", "--reason", "reader test"], ["rebalance", "status"],
                 ["reassign", "list"], ["heal", "status"], ["rebalance", "unpause"]):
        r = subprocess.run([sys.executable, "-m", "kops", *args, "--bootstrap-server", bs, "--output", "json"],
                           capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert r.returncode in (0, 3), (args, r.stdout[-2000:] + r.stderr[-2000:])
        if args[1] == "status" and args[0] == "rebalance":
            assert json.loads(r.stdout)["reason"] == "reader test", r.stdout  # the record was read back
    control = _auto_create_control(bs)
    assert _topics(bs) - before - {control} <= {"__kops_journal"}, _topics(bs) - before
