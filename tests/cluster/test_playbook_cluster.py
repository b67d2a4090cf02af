"""Playbooks on the real cluster: rack maintenance with the rack really stopped and started,
drain-rack killed mid-execution and resumed, bad input rejected before any change."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer

from tests.cluster.kafka_helpers import admin, create_topic, delete_topic, kops, leaders, replicas, wait_for

pytestmark = pytest.mark.cluster


@pytest.fixture
def kops_home(tmp_path, monkeypatch):
    home = tmp_path / "kops-home"
    monkeypatch.setenv("KOPS_HOME", str(home))
    return home


class Watch:
    """Background checks while a playbook runs: an acks=all producer and an offline monitor."""

    def __init__(self, bootstrap: str, topic: str):
        self.bootstrap, self.topic = bootstrap, topic
        self.acked: set[str] = set()
        self.errors: list[str] = []
        self.offline_seen: list[str] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._produce, daemon=True),
                        threading.Thread(target=self._monitor, daemon=True)]

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(60)

    def _produce(self):
        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                      "message.timeout.ms": 120000, "linger.ms": 5})

        def cb(err, msg):
            if err is None:
                self.acked.add(msg.value().decode())
            else:
                self.errors.append(str(err))

        i = 0
        while not self.stop.is_set():
            p.produce(self.topic, value=f"m{i}".encode(), on_delivery=cb)
            p.poll(0.02)
            i += 1
        p.flush(120)

    def _monitor(self):
        blind_since = None
        while not self.stop.is_set():
            try:
                md = admin(self.bootstrap).list_topics(timeout=5)
                for t, tm in md.topics.items():
                    for pid, pm in tm.partitions.items():
                        if pm.leader < 0:
                            self.offline_seen.append(f"{t}-{pid}")
                blind_since = None
            except Exception as e:
                # a metadata timeout on a loaded machine is not an offline partition; but a
                # monitor that cannot see for long proves nothing, so that fails the test
                blind_since = blind_since or time.monotonic()
                if time.monotonic() - blind_since > 30:
                    self.errors.append(f"monitor blind for 30 s: {e}")
                    blind_since = None
            time.sleep(0.3)


def consume_all(bootstrap: str, topic: str) -> set[str]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    seen: set[str] = set()
    idle_since = time.time()
    deadline = time.time() + 120
    while time.time() < deadline and time.time() - idle_since < 8:
        msg = c.poll(0.5)
        if msg is None or msg.error():
            continue
        seen.add(msg.value().decode())
        idle_since = time.time()
    c.close()
    return seen


def test_rack_maintenance_with_the_rack_really_down(sandbox, bootstrap, zk_connect, unique_topic, kops_home):
    # single-replica topics left by earlier tests cannot survive a rack going down: a real
    # rack-maintenance run refuses them at the demote step, so remove them first
    md = admin(bootstrap).list_topics(timeout=10)
    for t, tm in md.topics.items():
        if not t.startswith("__") and any(len(p.replicas) < 2 for p in tm.partitions.values()):
            delete_topic(bootstrap, t)
    topic = unique_topic("maint")
    create_topic(bootstrap, topic, partitions=6, rf=3, min_isr=2)
    # kops' journal topic exists, as on any cluster kops has worked on (in this module alone it
    # would be created by the run's cron pause while __consumer_offsets is brand new: the demote
    # step then finds offsets partitions whose leaders do not move in time; noted, not hidden)
    assert kops("rebalance", "pause", "--for", "1m", "--bootstrap-server", bootstrap).returncode == 0
    assert kops("rebalance", "unpause", "--bootstrap-server", bootstrap).returncode == 0
    rack = sandbox.rack_of(2)
    on_rack = set(sandbox.brokers_in_rack(rack))
    conn = ["--bootstrap-server", bootstrap, "--zookeeper", zk_connect]
    with Watch(bootstrap, topic) as w:
        # no terminal: the run demotes, waits for zero leaders on the rack, then stops at the
        # operator pause (exit 3) and says how to resume
        r = kops("playbook", "run", "rack-maintenance", "--param", f"rack={rack}", "--output", "json", *conn)
        assert r.returncode == 3, r.stderr
        rep = json.loads(r.stdout)
        assert [s["status"] for s in rep["steps"][:4]] == ["done", "done", "done", "paused"]
        run_id = rep["run_id"]
        assert f"--resume {run_id}" in r.stderr
        said = r.stderr.splitlines()  # a pause, not a failure
        assert any(ln.startswith("paused: ") for ln in said) and not any(ln.startswith("error:") for ln in said), r.stderr
        assert not [tp for tp, ldr in leaders(bootstrap).items() if ldr in on_rack], "leaders left on the rack"
        # while the run lasts, kops' cron jobs step aside: a leader rebalance now would give the
        # rack its leadership back in the middle of the maintenance
        for cron in (["leader", "rebalance"], ["rebalance", "step"]):
            c = kops(*cron, "--bootstrap-server", bootstrap, "--output", "json")
            doc = json.loads(c.stdout)
            assert c.returncode == 0 and doc["status"] == "stepped_aside", (cron, c.stdout, c.stderr)
            assert f"playbook rack-maintenance run {run_id}" in doc["reason"], doc["reason"]
        assert not [tp for tp, ldr in leaders(bootstrap).items() if ldr in on_rack]

        sandbox.stop(rack=rack)
        try:
            time.sleep(3)  # producers keep writing with the rack down
        finally:
            sandbox.start(rack=rack)
        r = kops("playbook", "run", "rack-maintenance", "--resume", run_id, "--output", "json", *conn)
        assert r.returncode == 0, r.stderr
        rep = json.loads(r.stdout)
        assert rep["status"] == "done" and all(s["status"] == "done" for s in rep["steps"])
        assert rep["leaders_moved"] > 0
        c = kops("rebalance", "status", "--bootstrap-server", bootstrap)
        assert c.returncode == 0 and "not paused" in c.stderr, c.stderr  # the run lifted its pause
        time.sleep(1)
    assert not w.offline_seen, f"offline partitions during maintenance: {sorted(set(w.offline_seen))[:10]}"
    assert not w.errors, w.errors[:5]
    assert len(w.acked) > 100
    missing = w.acked - consume_all(bootstrap, topic)
    assert not missing, f"{len(missing)} acknowledged messages lost"
    # leadership restored: every partition of the topic is led by its preferred replica again
    reps = replicas(bootstrap, topic)
    ldr = leaders(bootstrap, topic)
    assert {p: ldr[(topic, p)] for p in reps} == {p: r[0] for p, r in reps.items()}
    assert any(r[0] in on_rack for r in reps.values())
    delete_topic(bootstrap, topic)


def test_drain_rack_killed_mid_execute_then_resumed(sandbox, bootstrap, unique_topic, kops_home, tmp_path):
    topic = unique_topic("drain")
    create_topic(bootstrap, topic, partitions=4, rf=3, min_isr=1, mb_per_partition=3)
    rack = sandbox.rack_of(4)
    gone = set(sandbox.brokers_in_rack(rack))
    conn = ["--bootstrap-server", bootstrap]
    out = tmp_path / "run.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kops", "playbook", "run", "drain-rack", "--param", f"rack={rack}",
         "--param", "throttle=1MB", "--output", "json", *conn],
        stdout=open(out, "w"), stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=dict(os.environ),
    )
    try:
        runs = kops_home / "playbook-runs"

        def executing():
            for f in runs.glob("*.json"):
                st = json.loads(f.read_text())
                if any(s["id"] == "execute" and s["status"] == "running" for s in st["steps"]):
                    return st["run_id"]
            return None

        run_id = wait_for(executing, 120, 0.2, "the execute step to start")
        time.sleep(2)  # let the first wave start moving data
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    r = kops("playbook", "run", "drain-rack", "--resume", run_id, "--output", "json", *conn, timeout=600)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["status"] == "done" and rep["partitions_moved"] > 0
    # nothing left on the rack, and every partition rack-safe over the other two racks
    md = admin(bootstrap).list_topics(timeout=10)
    for t, tm in md.topics.items():
        for pid, pm in tm.partitions.items():
            assert not set(pm.replicas) & gone, f"{t}-{pid} still on rack {rack}: {pm.replicas}"
            racks = [sandbox.rack_of(b) for b in pm.replicas]
            if len(pm.replicas) >= 2:
                assert len(set(racks)) == 2, f"{t}-{pid} not rack-safe: {pm.replicas}"
    health = json.loads(kops("cluster", "health", "--output", "json", *conn).stdout)
    assert not {"offline", "under_min_isr", "under_replicated"} & set(health["summary"])
    # give the rack its share back (minimal-movement rebalance through kops itself)
    plan = tmp_path / "rebalance.json"
    p = kops("plan", "rebalance", "--output", "json", *conn)
    assert p.returncode == 0, p.stderr
    plan.write_text(json.dumps(json.loads(p.stdout)["plan"]))
    e = kops("reassign", "execute", "--reassignment-json-file", str(plan), "--wait", "--yes", *conn, timeout=600)
    assert e.returncode == 0, e.stderr
    delete_topic(bootstrap, topic)


def test_bad_parameters_rejected_before_any_change(sandbox, bootstrap, kops_home):
    r = kops("playbook", "run", "rack-maintenance", "--param", "rack=no-such-rack", "--bootstrap-server", bootstrap)
    assert r.returncode == 2 and "unknown rack 'no-such-rack'" in r.stderr
    r = kops("playbook", "run", "decommission-broker", "--param", "broker=x", "--bootstrap-server", bootstrap)
    assert r.returncode == 2 and "'x' is not a broker id" in r.stderr
    assert not (kops_home / "playbook-runs").exists() or not list((kops_home / "playbook-runs").glob("*.json"))
