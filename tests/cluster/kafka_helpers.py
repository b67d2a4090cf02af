"""Helpers for cluster tests, independent of kops' own reading code (plain confluent-kafka)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

_ADMINS: dict[tuple, AdminClient] = {}


def admin(bootstrap: str, client: dict | None = None) -> AdminClient:
    """An AdminClient of ``bootstrap``; ``client``: more librdkafka settings (a secured cluster's
    ``security.protocol``, ``sasl.*``: ``ClientConfig.librdkafka()``)."""
    # keep the client alive: a collected AdminClient fails its pending futures (_DESTROY). Its
    # log goes to Python's logging (shown with a failed test), not to stderr: a cluster torn down
    # before the run ends would otherwise fill the run's output with its reconnection attempts
    key = (bootstrap, *sorted((client or {}).items()))
    if key not in _ADMINS:
        _ADMINS[key] = AdminClient({"bootstrap.servers": bootstrap, **(client or {}),
                                    "logger": logging.getLogger("tests.kafka_helpers.admin")})
    return _ADMINS[key]


def to_controller(bootstrap: str, send, what: str, timeout: float = 60, client: dict | None = None):
    """``send(client)`` a controller-bound request (CreateTopics, DeleteTopics) and return its
    result. librdkafka sends these to the controller it last heard of and never re-routes them:
    when the controller has moved since (a broker stopped, a ZooKeeper session lost under load),
    the answer is NOT_CONTROLLER until a metadata answer names the new one. So: ask for metadata
    (it updates the client's controller id) and send again, until the controller answers."""
    a = admin(bootstrap, client)
    deadline = time.time() + timeout
    while True:
        try:
            return send(a)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.NOT_CONTROLLER:
                raise
            if time.time() > deadline:
                raise AssertionError(f"{what}: still NOT_CONTROLLER after {timeout:.0f} s") from e
        a.list_topics(timeout=10)
        time.sleep(0.2)


def wait_for(cond, timeout: float = 60, interval: float = 0.5, what: str = "condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def lock_topic_exists(bootstrap: str) -> bool:
    return "__kops_lock" in admin(bootstrap).list_topics(timeout=10).topics


def assert_lock_released(bootstrap: str) -> None:
    """kops released its cluster lock: the topic ``__kops_lock`` is gone. kops does not wait
    for the deletion, which completes asynchronously on ZooKeeper clusters (well under 1 s)."""
    wait_for(lambda: not lock_topic_exists(bootstrap), 15, 0.2, "the lock topic __kops_lock to be deleted")


def create_topic(bootstrap: str, name: str, partitions: int = 6, rf: int = 3, *, min_isr: int = 2,
                 mb_per_partition: float = 0, assignment: dict[int, list[int]] | None = None,
                 client: dict | None = None) -> dict[int, list[int]]:
    """Create a topic, wait until every partition has a leader and a full ISR, optionally fill it
    (``client``: more client settings, as :func:`admin`)."""
    a = admin(bootstrap, client)
    cfg = {"min.insync.replicas": str(min_isr)}
    topic = (NewTopic(name, num_partitions=len(assignment), replica_assignment=[assignment[p] for p in sorted(assignment)], config=cfg)
             if assignment else NewTopic(name, partitions, rf, config=cfg))
    to_controller(bootstrap, lambda c: c.create_topics([topic])[name].result(30), f"create topic {name}", client=client)
    n = len(assignment) if assignment else partitions
    want = len(next(iter(assignment.values()))) if assignment else rf
    wait_for(lambda: (md := a.list_topics(name, timeout=10).topics[name]).error is None
             and len(md.partitions) == n
             and all(p.leader >= 0 and len(p.isrs) == want for p in md.partitions.values()),
             30, 0.3, f"topic {name} ready")
    wait_for(lambda: _known_to_every_broker(a, name, n, client), 30, 0.3, f"topic {name} in every broker's metadata")
    if mb_per_partition:
        p = Producer({"bootstrap.servers": bootstrap, **(client or {}), "linger.ms": 20, "acks": "all",
                      "batch.size": 1_000_000, "compression.type": "none"})
        value = os.urandom(100_000)
        for i in range(int(n * mb_per_partition * 10)):
            p.produce(name, value=value, partition=i % n)
            if i % 20 == 0:
                p.poll(0)
        assert p.flush(60) == 0
    return replicas(bootstrap, name, client)


def _known_to_every_broker(a: AdminClient, name: str, n: int, client: dict | None = None) -> bool:
    """Every live broker's metadata cache has the topic and its ``n`` partitions. The controller
    tells the brokers one by one: a read right after the creation, answered by a broker not told
    yet, missed the topic (a compat test found no partition of it once, at load 15)."""
    for md in each_broker_metadata(a, client, topic=name).values():
        tm = md.topics.get(name)
        if tm is None or tm.error is not None or len(tm.partitions) != n:
            return False
    return True


def each_broker_metadata(a: AdminClient, client: dict | None = None, topic: str | None = None,
                         timeout: float = 5) -> dict:
    """Each live broker's own Metadata answer (of ``topic``, else of every topic), by broker id.
    Each broker is asked through a client of its own, which knows no other broker to ask (a
    client asks a random broker); one this host cannot reach (stopped, or cut off by a fault
    test) is left out."""
    out = {}
    for b in a.list_topics(topic, timeout=10).brokers.values():
        one = AdminClient({"bootstrap.servers": f"{b.host}:{b.port}", **(client or {}),
                           "logger": logging.getLogger("tests.kafka_helpers.admin")})
        try:
            out[b.id] = one.list_topics(topic, timeout=timeout)
        except KafkaException:
            continue
    return out


def partitions_agreed(bootstrap: str, timeout: float = 30, client: dict | None = None) -> dict[tuple[str, int], dict]:
    """Every partition (replicas, ISR sorted, leader) as every live broker reports it, once all
    of them agree. After an election, a reassignment or a restart the controller tells the
    brokers one by one: two agreeing reads of random brokers can both come from brokers not told
    yet (a fresh-clone run read the old leaders right after a real election)."""
    deadline = time.monotonic() + timeout
    while True:
        views = {b: {(t, p): {"replicas": list(pm.replicas), "isr": sorted(pm.isrs), "leader": pm.leader}
                     for t, tm in md.topics.items() for p, pm in tm.partitions.items()}
                 for b, md in each_broker_metadata(admin(bootstrap, client), client).items()}
        assert views, f"no broker of {bootstrap} answered a Metadata request"
        first = next(iter(views.values()))
        if all(v == first for v in views.values()):
            return first
        if time.monotonic() > deadline:
            differ = sorted(b for b, v in views.items() if v != first)
            raise AssertionError(f"brokers {differ} still disagree on the partitions after {timeout:.0f} s")
        time.sleep(0.2)


def all_in_sync(bootstrap: str, client: dict | None = None) -> bool:
    """Every partition led and its ISR whole, as every live broker reports it."""
    return all(p["leader"] >= 0 and p["isr"] == sorted(p["replicas"])
               for p in partitions_agreed(bootstrap, client=client).values())


def replicas(bootstrap: str, topic: str, client: dict | None = None) -> dict[int, list[int]]:
    md = admin(bootstrap, client).list_topics(topic, timeout=10).topics[topic]
    return {pid: list(pm.replicas) for pid, pm in sorted(md.partitions.items())}


def leaders(bootstrap: str, topic: str | None = None) -> dict[tuple[str, int], int]:
    md = admin(bootstrap).list_topics(topic, timeout=10) if topic else admin(bootstrap).list_topics(timeout=10)
    return {(t, p): pm.leader for t, tm in md.topics.items() for p, pm in tm.partitions.items()}


def delete_topic(bootstrap: str, topic: str) -> None:
    try:
        to_controller(bootstrap, lambda c: c.delete_topics([topic])[topic].result(30), f"delete topic {topic}")
    except Exception:
        pass


def kops(*args: str, timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run the real CLI in a fresh process (exit codes, stdout/stderr as a user sees them)."""
    return subprocess.run([sys.executable, "-m", "kops", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)


def ongoing(bootstrap: str) -> dict:
    """Reassignments in progress (ListPartitionReassignments), by (topic, partition)."""
    from kafka.admin import KafkaAdminClient

    c = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        return {(tp.topic, tp.partition): v for tp, v in c.list_partition_reassignments().items()}
    finally:
        c.close()


def requires(sandbox, feature) -> None:
    """Skip the test when the sandbox's Kafka predates ``feature`` (a
    :class:`kops.cluster.versions.Feature`), e.g. the whole suite run on an older Kafka with
    ``KOPS_TEST_KAFKA_VERSION``; what kops does there instead is the version matrix's to prove."""
    import pytest

    from kops.sandbox.dist import release

    if release(sandbox.kafka_version) < feature.since:
        pytest.skip(f"Kafka {sandbox.kafka_version}: {feature.what} needs {feature.needs()}")


class Producing:
    """An acks=all idempotent producer in the background; what was acknowledged (``client``: more
    client settings, e.g. a secured cluster's user, as :func:`admin`)."""

    def __init__(self, bs: str, topic: str, client: dict | None = None):
        self.topic = topic
        self.acked: set[bytes] = set()
        self.failed = 0
        self.errors: set[str] = set()  # the failed deliveries' errors, by name
        self._stop = threading.Event()
        self._p = Producer({"bootstrap.servers": bs, **(client or {}), "acks": "all", "enable.idempotence": True,
                            "linger.ms": 5, "delivery.timeout.ms": 120000})
        self._t = threading.Thread(target=self._run, daemon=True)

    def _cb(self, err, msg):
        if err is None:
            self.acked.add(msg.value())
        else:
            self.failed += 1
            self.errors.add(err.name())

    def _run(self):
        i = 0
        while not self._stop.is_set():
            self._p.produce(self.topic, value=f"m-{i}".encode(), key=str(i % 12).encode(), on_delivery=self._cb)
            self._p.poll(0)
            i += 1
            time.sleep(0.01)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join(10)
        self._p.flush(150)


def consume_all(bs: str, want: set[bytes], topic: str, client: dict | None = None) -> set[bytes]:
    """Every message of ``topic`` read back until ``want`` is seen (or 90 s passed), in group
    ``kops-check-<topic>`` (``client``: more client settings, as :func:`admin`)."""
    c = Consumer({"bootstrap.servers": bs, **(client or {}), "group.id": f"kops-check-{topic}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got: set[bytes] = set()
    deadline = time.monotonic() + 90
    try:
        while not want <= got and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                got.add(m.value())
    finally:
        c.close()
    return got
