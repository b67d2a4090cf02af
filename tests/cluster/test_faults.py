"""kops killed at the exact moments that matter for recovery (``KOPS_FAILPOINT``: the process
SIGKILLs itself there, like ``kill -9``), on the real cluster.

After each crash a later kops must finish or recover the work with no throttle left behind and
no stale lock blocking the next execution:

- ``throttles.applied``: throttle configs written, the journal not yet told. Resume must still
  remove every one of them (the journal records them *before* they are applied).
- ``wave.submitted``: the wave is in the cluster, the journal still says pending.
- ``execute.lock-taken``: the cluster lock names an execution that never wrote a journal.
- ``lock.topic-created``: the lock topic exists but no holder was recorded.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.cluster.kafka_helpers import all_in_sync, assert_lock_released, lock_topic_exists, wait_for
from tests.cluster.kafka_helpers import kops as run_kops
from tests.cluster.test_reassign import (
    broker_throttles,
    create_topic,
    delete_topic,
    kops,
    replicas,
    same_rack_swap,
    topic_throttles,
    write_plan,
)

pytestmark = pytest.mark.cluster


@pytest.fixture
def kops_home(tmp_path, monkeypatch):
    monkeypatch.setenv("KOPS_HOME", str(tmp_path / "kops-home"))
    return tmp_path / "kops-home"


def _execute(bootstrap, plan, *extra, failpoint=None, timeout=180):
    return kops("execute", "--reassignment-json-file", str(plan), "--throttle", "1000000", "--wait", "--yes",
                "--poll-interval", "1", "--bootstrap-server", bootstrap, "--output", "json", *extra,
                env_extra={"KOPS_FAILPOINT": failpoint} if failpoint else None, timeout=timeout)


def _killed_at(failpoint, sandbox, bootstrap, topic, tmp_path, mb):
    """A topic with real data, a plan swapping one replica per partition within its rack, and
    an ``execute`` of it that kills itself at ``failpoint``: (before, target, plan file)."""
    before = create_topic(bootstrap, topic, partitions=3, mb_per_partition=mb)
    target = same_rack_swap(sandbox, before)
    plan = write_plan(tmp_path / "plan.json", topic, target)
    r = _execute(bootstrap, plan, failpoint=failpoint)
    assert r.returncode == -9, (r.returncode, r.stderr)
    return before, target, plan


def _assert_clean(sandbox, bootstrap, topic):
    assert topic_throttles(bootstrap, topic) == {}
    # dynamic broker configs reach every broker asynchronously
    wait_for(lambda: broker_throttles(bootstrap, sandbox.broker_ids, fresh=True) == {}, 20, 0.5,
             "no broker throttle left")
    assert_lock_released(bootstrap)


@pytest.mark.parametrize("failpoint", ["throttles.applied", "wave.submitted"])
def test_killed_mid_execute_resume_removes_every_throttle(sandbox, bootstrap, unique_topic, tmp_path,
                                                           kops_home, failpoint):
    topic = unique_topic("fault-" + failpoint.split(".")[0])
    try:
        _, target, _ = _killed_at(failpoint, sandbox, bootstrap, topic, tmp_path, 2)
        assert topic_throttles(bootstrap, topic), "the killed kops had applied its throttles"
        r = kops("list", "--bootstrap-server", bootstrap, "--output", "json")
        execs = json.loads(r.stdout)["kops_executions"]
        assert [e["state"] for e in execs] == ["running"], execs
        r = kops("resume", "--poll-interval", "1", "--bootstrap-server", bootstrap, "--output", "json", timeout=180)
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["state"] == "complete" and doc["progress"] == {"done": 3}, doc
        assert replicas(bootstrap, topic) == target
        _assert_clean(sandbox, bootstrap, topic)
    finally:
        kops("cancel", "--bootstrap-server", bootstrap)
        delete_topic(bootstrap, topic)


@pytest.mark.parametrize("failpoint", ["execute.lock-taken", "lock.topic-created"])
def test_lock_left_by_a_killed_kops_does_not_block_the_next_execution(sandbox, bootstrap, unique_topic, tmp_path,
                                                                      kops_home, failpoint):
    topic = unique_topic("fault-lock")
    try:
        before, target, plan = _killed_at(failpoint, sandbox, bootstrap, topic, tmp_path, 1)
        # killed right after CreateTopics returned: the metadata of the new topic reaches the
        # broker that answers the check a moment later
        wait_for(lambda: lock_topic_exists(bootstrap), 10, 0.2, "the killed kops' lock topic __kops_lock")
        assert replicas(bootstrap, topic) == before and topic_throttles(bootstrap, topic) == {}
        # the next execution recognises the stale lock (nothing was started under it) and runs
        r = _execute(bootstrap, plan)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["state"] == "complete"
        assert replicas(bootstrap, topic) == target
        _assert_clean(sandbox, bootstrap, topic)
    finally:
        kops("cancel", "--bootstrap-server", bootstrap)
        delete_topic(bootstrap, topic)
        if lock_topic_exists(bootstrap):  # failed before the next execution cleared it
            delete_topic(bootstrap, "__kops_lock")


_READ_LOOP = r"""
import json, os, sys, time
from kops.cluster.config import ClientConfig
from kops.cluster.connection import Connection
from kops.cluster.topology import ReadOptions, read_topology
from kops.errors import ClusterError

conn = Connection(sys.argv[1], ClientConfig(), timeout_s=15)
opts = ReadOptions(with_configs=False, with_sizes=False, with_reassignments=False)
next_read = 0.0
with open(sys.argv[3], "a") as log:
    while not os.path.exists(sys.argv[2]):
        t = time.monotonic()
        try:
            if t >= next_read:  # the whole read twice a second, DescribeCluster in between
                topo = read_topology(conn, opts)
                brokers, controller, next_read = [b.id for b in topo.brokers if b.alive], topo.controller, t + 0.5
            else:
                cluster = conn.describe_cluster()
                brokers, controller = [n.id for n in cluster.nodes], cluster.controller_id
            line = {"t": t, "brokers": sorted(brokers), "controller": controller}
        except ClusterError as e:  # a clean error is allowed while the controller moves
            line = {"t": t, "error": str(e)}
        log.write(json.dumps(line) + "\n")
        log.flush()
"""


def test_controller_killed_and_restarted_under_a_long_lived_connection(sandbox, bootstrap, tmp_path):
    """One kops connection asks DescribeCluster in a tight loop and reads the whole cluster twice a
    second (as `reassign execute --wait` polls it) while the controller is SIGKILLed and started
    again. confluent-kafka's DescribeCluster went to the broker it knew as the controller,
    which, just restarted, answered from an empty metadata cache, and librdkafka aborted the
    process (assertion in rd_kafka_admin_response_parse; this test with confluent-kafka's call
    in Connection.describe_cluster: exit -6 in 2 of 2 runs). kops' reads survive and see every
    broker again once it is back."""
    import os
    import subprocess
    import sys
    import time

    from kops.sandbox import probe

    if not sandbox.zookeeper_connect:
        pytest.skip("ZooKeeper mode: a KRaft cluster's controller is not a broker")
    with probe.zk_client(sandbox.zookeeper_connect) as zk:
        ctrl = probe.zk_controller(zk)
    assert ctrl is not None
    stop, log = tmp_path / "stop", tmp_path / "reads.jsonl"
    root = str(Path(__file__).resolve().parents[2])
    proc = subprocess.Popen([sys.executable, "-c", _READ_LOOP, bootstrap, str(stop), str(log)],
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": root})

    def reads() -> list[dict]:
        assert proc.poll() is None, f"the reading process died (exit {proc.returncode}): {proc.stderr.read()[-2000:]}"
        return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []

    everyone = sorted(sandbox.broker_ids)
    try:
        wait_for(lambda: any(r.get("brokers") == everyone for r in reads()), 30, 0.1, "a first whole read")
        sandbox.stop(broker=ctrl, kill=True)
        sandbox.start(broker=ctrl)
        back = time.monotonic()
        # reads after the restart see every broker (the loop ran through the restart window)
        wait_for(lambda: sum(1 for r in reads() if r["t"] > back + 2 and r.get("brokers") == everyone) >= 100,
                 60, 0.2, "whole reads after the controller's restart")
    finally:
        stop.touch()
        try:
            rc = proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
            sandbox.start(broker=ctrl)  # (nothing to do when it runs)
            # the next tests start from the cluster as it was: the restarted broker back in every
            # ISR and leading its preferred partitions again (the sandbox has no auto rebalance)
            wait_for(lambda: all_in_sync(bootstrap), 90, 0.5, "every ISR whole again")
            r = run_kops("leader", "elect", "--election-type", "preferred", "--all-topic-partitions",
                         "--bootstrap-server", bootstrap)
            assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert rc == 0, proc.stderr.read()[-2000:]
    after = [r for r in (json.loads(x) for x in log.read_text().splitlines()) if r["t"] > back + 2]
    assert after and all("error" not in r for r in after[-20:]), after[-20:]
