"""A JBOD broker loses one of its log dirs, for real (``kops sandbox up --log-dirs 2``, ``kops
sandbox fail-log-dir``): Kafka takes the dir offline, the broker stays up on its other dir, the
partitions whose replica was on the failed dir lose it from their ISR while the broker's other
partitions keep it, and kops' cluster layer reads the dir as offline. ``--restore`` brings it back.

A sandbox of its own (3 brokers, ZooKeeper mode, the sandbox's default Kafka), beside the session's."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer

from tests.cluster.kafka_helpers import admin, create_topic, kops, wait_for
from tests.cluster.sandboxes import own_sandbox

pytestmark = pytest.mark.cluster

BROKER = 1


@pytest.fixture(scope="module")
def jbod(tmp_path_factory, request):
    from kops.sandbox import Sandbox

    yield from own_sandbox(Sandbox, tmp_path_factory, request, "kops-jbod", "jbod sandbox", brokers=3, log_dirs=2)


def _isr(bs: str, topic: str) -> dict[int, tuple[int, list[int]]]:
    md = admin(bs).list_topics(topic, timeout=10).topics[topic]
    return {p: (pm.leader, list(pm.isrs)) for p, pm in md.partitions.items()}


def test_a_failed_log_dir_goes_offline_and_comes_back(jbod):
    from kops.cluster.config import ClientConfig
    from kops.cluster.connection import Connection
    from kops.cluster.topology import offline_log_dirs, replica_log_dirs

    bs, wd = jbod.bootstrap_servers, str(jbod.workdir)
    dir0, dir1 = map(str, jbod.broker_data_dirs(BROKER))
    topic = "jbod-failure"
    create_topic(bs, topic, partitions=6, rf=3, min_isr=2)  # every broker holds all 6 partitions
    with Connection(bs, ClientConfig(), None, 10) as conn:
        where = replica_log_dirs(conn, [BROKER], [topic])
        assert offline_log_dirs(conn, jbod.broker_ids) == {0: [], 1: [], 2: []}
    on = {d: sorted(p for (_t, p, _b), r in where.items() if r["dir"] == d) for d in (dir0, dir1)}
    assert on[dir0] and on[dir1], f"Kafka spreads a broker's new replicas over its log dirs: {on}"

    r = kops("sandbox", "fail-log-dir", "--workdir", wd, "--broker", str(BROKER), "--output", "json", timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    doc = json.loads(r.stdout)
    assert doc["log_dirs"] == [dir1] and doc["offline_log_dirs"] == [dir1]

    try:
        # kops' cluster layer reads it (the future heal anomaly `log_dir_failure`), and only it
        with Connection(bs, ClientConfig(), None, 10) as conn:
            assert offline_log_dirs(conn, jbod.broker_ids) == {0: [], 1: [dir1], 2: []}
        # the broker stays up: registered, alive, serving the partitions of its online dir
        assert BROKER in jbod.registered_brokers()
        assert {s.id: s.alive for s in jbod.status() if s.role == "broker"}[BROKER]
        wait_for(lambda: all(BROKER not in isr and leader != BROKER
                             for p, (leader, isr) in _isr(bs, topic).items() if p in on[dir1]),
                 30, 0.3, f"partitions {on[dir1]} to drop broker {BROKER} (failed dir) from their ISR")
        now = _isr(bs, topic)
        assert all(BROKER in now[p][1] for p in on[dir0]), now  # its other dir is fine
        assert all(len(isr) >= 2 for _leader, isr in now.values()), now
        p = Producer({"bootstrap.servers": bs, "acks": "all"})  # the cluster takes writes everywhere
        for part in range(6):
            p.produce(topic, b"after", partition=part)
        assert p.flush(30) == 0
        assert "failed_log_dirs" in json.loads(kops("sandbox", "status", "--workdir", wd, "--output", "json").stdout
                                                )["brokers"][BROKER]
    finally:
        r = kops("sandbox", "fail-log-dir", "--workdir", wd, "--broker", str(BROKER), "--restore", "--output", "json",
                 timeout=180)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert json.loads(r.stdout)["offline_log_dirs"] == []
    wait_for(lambda: all(sorted(isr) == [0, 1, 2] for _leader, isr in _isr(bs, topic).values()),
             60, 0.3, f"broker {BROKER} back in every ISR of {topic}")
