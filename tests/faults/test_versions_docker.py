"""The containerised sandbox (``--engine docker``) on the oldest Kafka of each mode the version
matrix proves (tests/compat/matrix.py): its image built for that version, the cluster up, read by
kops, and a network fault that really bites (a rack cut off: its brokers leave the ISR; healed:
they come back). The workflow itself on those versions is the matrix's (local JVMs)."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.admin import NewTopic

from tests.cluster.kafka_helpers import admin, wait_for
from tests.compat.matrix import KRAFT, ZOOKEEPER
from tests.faults.conftest import _docker_sandbox
from tests.faults.helpers import kops, wait_fully_replicated

pytestmark = pytest.mark.faults

OLDEST = [("zookeeper", ZOOKEEPER[0]), ("kraft", KRAFT[0])]


@pytest.fixture(scope="module", params=OLDEST, ids=[f"{m}-{v}" for m, v in OLDEST])
def old_dsandbox(request, docker_engine, tmp_path_factory):
    mode, version = request.param
    extra = {"mode": "kraft"} if mode == "kraft" else {}
    yield from _docker_sandbox(tmp_path_factory, request, kafka_version=version, **extra)


def _isr(bootstrap: str, topic: str) -> dict[int, set[int]]:
    md = admin(bootstrap).list_topics(topic, timeout=10).topics[topic]
    return {p: set(pm.isrs) for p, pm in md.partitions.items()}


def test_an_old_kafka_in_containers_is_read_and_takes_a_network_fault(old_dsandbox):
    sb = old_dsandbox
    bs = sb.bootstrap_servers
    assert sb.kafka_version in (ZOOKEEPER[0], KRAFT[0])
    r = kops("cluster", "describe", "--bootstrap-server", bs, "--output", "json", timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    release = ".".join(sb.kafka_version.split(".")[:2])
    assert doc["mode"] == sb.mode and {b["kafka_version"] for b in doc["brokers"]} == {release}
    assert {b["id"]: b["rack"] for b in doc["brokers"]} == {b: sb.rack_of(b) for b in sb.broker_ids}

    topic = f"old-{sb.mode}"
    admin(bs).create_topics([NewTopic(topic, 6, 3, config={"min.insync.replicas": "2"})])[topic].result(60)
    wait_fully_replicated(bs, 60, "the topic fully replicated")
    cut = set(sb.brokers_in_rack("b"))
    # cut off from this host too: a cut-off broker would otherwise still answer the ISR asked for
    # here, from its own stale view of the cluster (a client asks any broker it knows)
    rest = ",".join(sb.broker_address(b) for b in sb.broker_ids if b not in cut)
    try:
        sb.faults.partition(rack="b", from_host=True)
        # the fault bites: the cut-off brokers drop out of the ISR of the partitions they follow
        wait_for(lambda: not any(isr & cut for isr in _isr(rest, topic).values()), 90,
                 what=f"brokers {sorted(cut)} out of every ISR")
    finally:
        sb.faults.heal()
    wait_fully_replicated(bs, 120, "every partition fully replicated after the heal")
