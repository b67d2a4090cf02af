"""A JBOD broker loses one of its log dirs, for real (``kops sandbox up --log-dirs 2``, ``kops
sandbox fail-log-dir``): Kafka takes the dir offline, the broker stays up on its other dir, the
partitions whose replica was on the failed dir lose it from their ISR while the broker's other
partitions keep it, and kops' cluster layer reads the dir as offline. ``--restore`` brings it back.

Then ``heal step`` mends a failed dir: the replicas it held are re-created on the broker's rack
mate, and nothing else moves.

A sandbox of its own (4 brokers in racks a, b, c, a; ZooKeeper mode, the sandbox's default Kafka),
beside the session's."""

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

    yield from own_sandbox(Sandbox, tmp_path_factory, request, "kops-jbod", "jbod sandbox", brokers=4,
                           racks="a,b,c,a", log_dirs=2)


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
    create_topic(bs, topic, partitions=6, rf=3, min_isr=2)  # one replica per rack: broker 1 holds all 6
    with Connection(bs, ClientConfig(), None, 10) as conn:
        # wait on the read itself: a CI run read no replica at all right after the creation (the
        # partitions DescribeLogDirs asks for come from a metadata read that can still miss them)
        where = wait_for(lambda: (w := replica_log_dirs(conn, [BROKER], [topic])) and len(w) == 6 and w,
                         30, 0.3, f"DescribeLogDirs of broker {BROKER} to list its 6 replicas of {topic}")
        assert offline_log_dirs(conn, jbod.broker_ids) == {0: [], 1: [], 2: [], 3: []}
    on = {d: sorted(p for (_t, p, _b), r in where.items() if r["dir"] == d) for d in (dir0, dir1)}
    assert on[dir0] and on[dir1], f"Kafka spreads a broker's new replicas over its log dirs: {on}"

    r = kops("sandbox", "fail-log-dir", "--workdir", wd, "--broker", str(BROKER), "--output", "json", timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    doc = json.loads(r.stdout)
    assert doc["log_dirs"] == [dir1] and doc["offline_log_dirs"] == [dir1]

    try:
        # kops' cluster layer reads it (the future heal anomaly `log_dir_failure`), and only it
        with Connection(bs, ClientConfig(), None, 10) as conn:
            assert offline_log_dirs(conn, jbod.broker_ids) == {0: [], 1: [dir1], 2: [], 3: []}
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
    replicas = {p: sorted(pm.replicas) for p, pm in admin(bs).list_topics(topic, timeout=10).topics[topic].partitions.items()}
    wait_for(lambda: all(sorted(isr) == replicas[p] for p, (_leader, isr) in _isr(bs, topic).items()),
             60, 0.3, f"broker {BROKER} back in every ISR of {topic}")


def _replicas(bs: str, topic: str) -> dict[int, list[int]]:
    return {p: list(pm.replicas) for p, pm in admin(bs).list_topics(topic, timeout=10).topics[topic].partitions.items()}


def test_heal_re_creates_a_failed_dirs_replicas_on_the_rack_mate(jbod, tmp_path):
    """Broker 0 (rack a, with broker 3) loses a dir: within its grace heal only watches; past it,
    the replicas the dir held -- and only those -- move to broker 3, the one rack-safe place, and
    every message written before the failure is read back; afterwards the dir is reported
    (nothing left to re-create) and nothing more moves."""
    from confluent_kafka import Consumer

    bs, wd = jbod.bootstrap_servers, str(jbod.workdir)
    topic, failing = "jbod-heal", 0
    create_topic(bs, topic, partitions=8, rf=3, min_isr=2)
    p = Producer({"bootstrap.servers": bs, "acks": "all"})
    for i in range(800):
        p.produce(topic, str(i).encode(), partition=i % 8)
    assert p.flush(30) == 0
    before = _replicas(bs, topic)
    env = {"KOPS_HOME": str(tmp_path)}
    heal = ("heal", "step", "--bootstrap-server", bs, "--exclude-topics", "(?!jbod-heal).*", "--output", "json")
    r = kops("sandbox", "fail-log-dir", "--workdir", wd, "--broker", str(failing), timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    try:
        r = kops(*heal, "--broker-grace", "1h", env=env, timeout=300)  # in its grace: watched only
        doc = json.loads(r.stdout)
        a = next(a for a in doc["anomalies"] if a["key"] == f"log_dir_failure/{failing}")
        assert r.returncode == 0 and a["state"] == "in_grace" and a["count"] > 0, doc
        lost = {int(x.rsplit("-", 1)[1]) for x in a["partitions"]}
        assert lost and lost <= {q for q, reps in before.items() if failing in reps}, (lost, before)
        assert _replicas(bs, topic) == before

        r = kops(*heal, "--broker-grace", "0s", env=env, timeout=300)  # past it: mended
        doc = json.loads(r.stdout)
        assert r.returncode == 0 and doc["status"] == "moved", r.stdout[-3000:] + r.stderr[-2000:]
        after = _replicas(bs, topic)
        for q, reps in before.items():
            if q in lost:  # the rack mate took the failed dir's replica, in its place
                assert after[q] == [3 if b == failing else b for b in reps], (q, reps, after[q])
            else:
                assert after[q] == reps, (q, reps, after[q])
        wait_for(lambda: all(sorted(isr) == sorted(after[q]) for q, (_l, isr) in _isr(bs, topic).items()),
                 60, 0.3, "every partition fully in sync after the heal")
        c = Consumer({"bootstrap.servers": bs, "group.id": f"g-{tmp_path.name}", "auto.offset.reset": "earliest",
                      "enable.auto.commit": False})
        c.subscribe([topic])
        seen: set[int] = set()
        wait_for(lambda: (seen.update(int(m.value()) for m in c.consume(200, 1.0) if m.error() is None)
                          or len(seen) == 800), 60, 0.0, "every message written before the failure")
        c.close()

        r = kops(*heal, "--broker-grace", "0s", env=env, timeout=300)  # the dir is still down: reported
        doc = json.loads(r.stdout)
        a = next(a for a in doc["anomalies"] if a["key"] == f"log_dir_failure/{failing}")
        assert r.returncode == 0 and a["state"] == "refused" and a["why"].startswith("nothing to re-create"), doc
        assert a["fixes"] and a["fixes"][-1]["status"] == "moved" and _replicas(bs, topic) == after
    finally:
        r = kops("sandbox", "fail-log-dir", "--workdir", wd, "--broker", str(failing), "--restore", timeout=180)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
