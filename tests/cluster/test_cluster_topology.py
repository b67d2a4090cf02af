"""describe and health against the real sandbox cluster (Kafka 3.9, ZooKeeper mode)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import jsonschema
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kops.cluster.snapshot import topology_schema

pytestmark = pytest.mark.cluster


def kops(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kops", *args], capture_output=True, text=True, timeout=timeout
    )


def create_topic(bootstrap: str, name: str, partitions: int = 6, rf: int = 3, min_isr: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics(
        [NewTopic(name, partitions, rf, config={"min.insync.replicas": str(min_isr)})]
    )[name]
    fut.result(30)
    deadline = time.time() + 30
    while time.time() < deadline:
        md = admin.list_topics(name, timeout=10).topics[name]
        if md.error is None and len(md.partitions) == partitions and all(
            p.leader >= 0 and len(p.isrs) == rf for p in md.partitions.values()
        ):
            return
        time.sleep(0.3)
    raise AssertionError(f"topic {name} not ready")


def health_json(bootstrap: str, *extra: str) -> tuple[int, dict]:
    r = kops("cluster", "health", "--bootstrap-server", bootstrap, "--output", "json", *extra)
    assert r.returncode in (0, 3), r.stderr
    return r.returncode, json.loads(r.stdout)


def wait_healthy(bootstrap: str, timeout: float = 90) -> dict:
    deadline = time.time() + timeout
    while True:
        code, doc = health_json(bootstrap)
        if code == 0 or time.time() > deadline:
            assert code == 0, doc["findings"][:10]
            return doc
        time.sleep(1)


def test_describe_json_agrees_with_zookeeper(sandbox, bootstrap, zk_connect, unique_topic):
    topic = unique_topic("describe")
    create_topic(bootstrap, topic)
    r = kops("cluster", "describe", "--bootstrap-server", bootstrap, "--zookeeper", zk_connect,
             "--output", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # stdout holds exactly one JSON document
    jsonschema.validate(doc, topology_schema())
    brokers = doc["brokers"]
    assert len(brokers) == 6 and all(b["alive"] for b in brokers)
    assert {b["id"]: b["rack"] for b in brokers} == {b: sandbox.rack_of(b) for b in sandbox.broker_ids}
    assert len({b["rack"] for b in brokers}) == 3
    assert doc["mode"] == "zookeeper"
    assert doc["controller"] in sandbox.broker_ids
    assert doc.get("notes", []) == []  # Admin API and ZooKeeper agree
    t = next(t for t in doc["topics"] if t["name"] == topic)
    assert len(t["partitions"]) == 6 and t["configs"]["min.insync.replicas"] == "2"
    for p in t["partitions"]:
        assert len(p["replicas"]) == 3 and sorted(p["isr"]) == sorted(p["replicas"])
        assert p["leader"] in p["replicas"]
        # Kafka's own rack-aware placement puts the 3 replicas in 3 racks
        assert len({sandbox.rack_of(b) for b in p["replicas"]}) == 3

    human = kops("cluster", "describe", "--bootstrap-server", bootstrap, "--topic", topic)
    assert human.returncode == 0, human.stderr
    assert topic in human.stdout and "Brokers" in human.stdout


def test_health_after_broker_stop_and_start(sandbox, bootstrap, unique_topic):
    topic = unique_topic("health")
    create_topic(bootstrap, topic)
    wait_healthy(bootstrap)
    on_1 = None
    try:
        sandbox.stop(broker=1)
        code, doc = health_json(bootstrap)
        assert code == 3 and not doc["healthy"]
        down = [f for f in doc["findings"] if f["check"] == "broker_down"]
        assert [f["broker"] for f in down] == [1]
        urp = {(f["topic"], f["partition"]) for f in doc["findings"] if f["check"] == "under_replicated"}
        admin = AdminClient({"bootstrap.servers": bootstrap})
        md = admin.list_topics(topic, timeout=10).topics[topic]
        on_1 = {(topic, p.id) for p in md.partitions.values() if 1 in p.replicas}
        assert on_1 and on_1 <= urp  # every partition of ours with a replica on 1 is named
        human = kops("cluster", "health", "--bootstrap-server", bootstrap)
        assert human.returncode == 3 and "broker 1" in human.stdout
    finally:
        sandbox.start(broker=1)
    wait_healthy(bootstrap)


def test_health_after_rack_stop(sandbox, bootstrap, unique_topic):
    topic = unique_topic("rack")
    create_topic(bootstrap, topic, partitions=3)
    rack = sandbox.rack_of(2)
    try:
        sandbox.stop(rack=rack)
        code, doc = health_json(bootstrap)
        assert code == 3
        assert sorted(f["broker"] for f in doc["findings"] if f["check"] == "broker_down") == sorted(
            sandbox.brokers_in_rack(rack)
        )
        # RF 3 over 3 racks with min.insync=2: one rack down leaves every partition at min ISR
        ours = [f for f in doc["findings"] if f.get("topic") == topic]
        assert {f["partition"] for f in ours if f["check"] == "at_min_isr"} == {0, 1, 2}
        assert not [f for f in ours if f["check"] in ("offline", "under_min_isr")]
    finally:
        sandbox.start(rack=rack)
    wait_healthy(bootstrap)


def test_unreachable_cluster_fails_fast():
    t0 = time.time()
    r = kops("cluster", "describe", "--bootstrap-server", "127.0.0.1:1", "--request-timeout", "3")
    assert r.returncode == 1
    assert time.time() - t0 < 15
    assert "cannot reach" in r.stderr and "127.0.0.1:1" in r.stderr
