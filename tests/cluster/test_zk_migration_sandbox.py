"""A ZooKeeper -> KRaft migration (KIP-866) of a sandbox, for real, with the verbs a playbook's
hooks will call (``kops sandbox migration ...``, ``kops sandbox restart --phase ...``, each in a
process of its own): a 3-broker, 3-rack ZooKeeper cluster on Kafka 3.9.2 gets three KRaft
controllers in migration mode, every broker is rolled into migration mode (the metadata is
migrated: MIGRATION, a KRaft controller holds /controller), then into a KRaft broker, and the
migration is finalized (POST_MIGRATION; ZooKeeper stopped). Nothing acknowledged before is lost
and the topics, partitions and replica assignments are the same after. A first attempt is
rolled back from dual write to ZooKeeper mode (Kafka's revert procedure) before."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Consumer, Producer

from tests.cluster.kafka_helpers import admin, create_topic, kops
from tests.cluster.sandboxes import own_sandbox

pytestmark = pytest.mark.cluster

TOPIC = "migrated"
MESSAGES = 3000


@pytest.fixture(scope="module")
def zk39(tmp_path_factory, request):
    """ZooKeeper mode, Kafka 3.9.2: 3 brokers in racks a, b, c."""
    from kops.sandbox import Sandbox

    yield from own_sandbox(Sandbox, tmp_path_factory, request, "kops-zk-migration", "migration sandbox", brokers=3,
                           racks="a,b,c", kafka_version="3.9.2")


def _layout(bs: str) -> dict[str, dict[int, list[int]]]:
    md = admin(bs).list_topics(timeout=10)
    return {t: {p: list(pm.replicas) for p, pm in tm.partitions.items()} for t, tm in md.topics.items()}


def _cli(sb, *args: str) -> dict:
    r = kops("sandbox", *args, "--workdir", str(sb.workdir), "--output", "json")
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return json.loads(r.stdout)


def _produce(bs: str) -> set[bytes]:
    acked: set[bytes] = set()

    def on_delivery(err, msg):
        if err is None:
            acked.add(msg.value())

    p = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    for i in range(MESSAGES):
        p.produce(TOPIC, value=f"m-{i}".encode(), key=str(i % 12).encode(), on_delivery=on_delivery)
        if i % 200 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    return acked


def _consume_all(bs: str, want: set[bytes]) -> set[bytes]:
    c = Consumer({"bootstrap.servers": bs, "group.id": "migration-check", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([TOPIC])
    got: set[bytes] = set()
    deadline = time.monotonic() + 60
    try:
        while not want <= got and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                got.add(m.value())
    finally:
        c.close()
    return got


def test_a_zookeeper_sandbox_migrates_to_kraft_end_to_end(zk39):
    from kops.sandbox import probe
    from kops.sandbox.procs import free_ports

    sb = zk39
    bs = sb.bootstrap_servers
    create_topic(bs, TOPIC, partitions=6, rf=3, min_isr=2)
    acked = _produce(bs)
    assert len(acked) == MESSAGES
    before = _layout(bs)
    zk_controller = sb.controller_id()
    assert zk_controller in sb.broker_ids
    t0 = time.monotonic()

    # a first attempt, rolled back from dual write (Kafka's revert procedure): ZooKeeper mode again
    _cli(sb, "migration", "controllers-up", "--controller-port", str(free_ports(1)[0]))
    for b in sb.broker_ids:
        _cli(sb, "restart", "--broker", str(b), "--phase", "migrate")
    assert _cli(sb, "migration", "wait", "--state", "MIGRATION")["migration"]["controller"] == 1000
    doc = _cli(sb, "migration", "rollback")
    assert doc["migration"] == {"state": "NONE", "controller": doc["migration"]["controller"],
                                "kraft_controller_epoch": None, "migration_znode": None}, doc["migration"]
    assert doc["migration"]["controller"] in sb.broker_ids and doc["mode"] == "zookeeper"
    assert doc["phases"] == {"0": "zookeeper", "1": "zookeeper", "2": "zookeeper"}
    assert [p["name"] for p in doc["processes"] if p["role"] == "controller"] == []
    assert _layout(bs) == before
    t_rollback = time.monotonic() - t0

    # 1. KRaft controllers in migration mode beside ZooKeeper: the quorum waits for the brokers
    ports = free_ports(3)
    doc = _cli(sb, "migration", "controllers-up", "--controllers", "3", "--controller-port", str(ports[0]))
    assert doc["migration"]["state"] == "PRE_MIGRATION", doc["migration"]
    assert doc["migration"]["controller"] in sb.broker_ids  # a ZooKeeper broker is still the controller
    assert {p["name"] for p in doc["processes"] if p["role"] == "controller" and p["alive"]} == {
        "controller-1000", "controller-1001", "controller-1002"}

    # 2. every broker in migration mode: the metadata is migrated, a KRaft controller takes over
    for b in sb.broker_ids:
        doc = _cli(sb, "restart", "--broker", str(b), "--phase", "migrate")
        assert doc["phase"] == "migrate"
    doc = _cli(sb, "migration", "wait", "--state", "MIGRATION", "--timeout", "120")
    mig = doc["migration"]
    assert mig["controller"] in (1000, 1001, 1002) and mig["kraft_controller_epoch"] is not None, mig
    assert mig["migration_znode"]["kraft_metadata_offset"] > 0, mig
    assert doc["phases"] == {"0": "migrate", "1": "migrate", "2": "migrate"}
    assert _layout(bs)[TOPIC] == before[TOPIC]

    # out of order: a finalize with ZooKeeper brokers left, a broker back to ZooKeeper mode
    r = kops("sandbox", "migration", "finalize", "--workdir", str(sb.workdir))
    assert r.returncode == 2 and "are not KRaft brokers yet" in r.stderr, r.stderr
    r = kops("sandbox", "restart", "--broker", "0", "--phase", "zookeeper", "--workdir", str(sb.workdir))
    assert r.returncode == 2, r.stderr  # not a --phase choice: the way back is `migration rollback`

    # 3. every broker a KRaft broker
    for b in sb.broker_ids:
        doc = _cli(sb, "restart", "--broker", str(b), "--phase", "kraft")
        assert doc["phase"] == "kraft"
    assert _cli(sb, "migration", "status")["migration"]["state"] == "MIGRATION"  # still dual write

    # 4. finalize: controllers without the migration settings, ZooKeeper stopped
    doc = _cli(sb, "migration", "finalize")
    assert doc["mode"] == "kraft" and doc["migration"]["state"] == "POST_MIGRATION", doc
    sb.state.load()  # the test's Sandbox takes over what the CLI processes did
    assert sb.mode == "kraft" and sb.config.migration == "finalized"
    assert not sb.nodes.running("zookeeper") and not probe.zk_ruok(sb.config.host, sb.config.zookeeper_port)
    assert {s.name for s in sb.status() if s.alive} == {
        "controller-1000", "controller-1001", "controller-1002", "broker-0", "broker-1", "broker-2"}

    r = kops("cluster", "describe", "--bootstrap-server", bs, "--output", "json")
    assert r.returncode == 0, r.stderr
    topo = json.loads(r.stdout)
    assert topo["mode"] == "kraft", topo.get("mode")
    assert topo["controller"] in (1000, 1001, 1002)

    after = _layout(bs)
    assert {t: after[t] for t in before} == before
    assert set(after) - set(before) <= {"__consumer_offsets"}
    got = _consume_all(bs, acked)
    assert acked <= got, f"{len(acked - got)} acknowledged messages lost"
    print(f"rollback round {t_rollback:.1f}s; with the migration of 3 brokers, 3 controllers: "
          f"{time.monotonic() - t0:.1f}s")
