"""kops reassign against the real sandbox cluster (Kafka 3.9, ZooKeeper mode, 6 brokers in 3 racks).

Real data is produced before it is moved. Each test restores what it changes (topics deleted,
foreign throttles removed, brokers restarted).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from kops.cluster import versions
from tests.cluster import kafka_helpers
from tests.cluster.kafka_helpers import admin, assert_lock_released, delete_topic, ongoing, replicas, requires, wait_for

pytestmark = pytest.mark.cluster

RUN = "from kops.cli.reassign import app; app(prog_name='kops reassign')"
RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
REPLICA_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
MB = 1024 * 1024
#: the throttle of the observed execution: 8 MiB partitions take ~20 s to move at it, time enough
#: to see kops' throttles and a watch's reads while the moves are in flight, even on a loaded host
RATE = 400_000


# ------------------------------------------------------------------------------------------
# helpers (independent of kops' own reading code)
# ------------------------------------------------------------------------------------------


@pytest.fixture
def kops_home(tmp_path, monkeypatch):
    monkeypatch.setenv("KOPS_HOME", str(tmp_path / "kops-home"))
    return tmp_path / "kops-home"


def kops(*args: str, timeout: float = 120, env_extra=None) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run([sys.executable, "-c", RUN, *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def kops_bg(*args: str, out: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", RUN, *args], stdout=open(out, "w"),
                            stderr=open(str(out) + ".err", "w"), env=dict(os.environ))


def create_topic(bootstrap: str, name: str, partitions: int = 4, mb_per_partition: int = 6) -> dict[int, list[int]]:
    """An RF 3 topic (min.insync.replicas 2) with ``mb_per_partition`` MB in each partition."""
    return kafka_helpers.create_topic(bootstrap, name, partitions, 3, min_isr=2, mb_per_partition=mb_per_partition)


def broker_throttles(bootstrap: str, brokers, *, fresh: bool = False) -> dict[int, dict[str, str]]:
    a = AdminClient({"bootstrap.servers": bootstrap}) if fresh else admin(bootstrap)
    out = {}
    for b in brokers:
        res = ConfigResource(ResourceType.BROKER, str(b))
        entries = a.describe_configs([res], request_timeout=10)[res].result(15)
        out[b] = {k: entries[k].value for k in RATE_KEYS if k in entries and not entries[k].is_default}
    return {b: v for b, v in out.items() if v}


def topic_throttles(bootstrap: str, topic: str) -> dict[str, str]:
    res = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin(bootstrap).describe_configs([res])[res].result(20)
    return {k: entries[k].value for k in REPLICA_KEYS if entries[k].value}


def alter(bootstrap: str, kind: str, name: str, key: str, value: str | None) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    op = AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
    rt = ResourceType.BROKER if kind == "broker" else ResourceType.TOPIC
    res = ConfigResource(rt, name, incremental_configs=[ConfigEntry(key, value, incremental_operation=op)])
    admin(bootstrap).incremental_alter_configs([res])[res].result(20)


def same_rack_swap(sandbox, reps: dict[int, list[int]], *, position: int = 1) -> dict[int, list[int]]:
    """For each partition, replace the replica at ``position`` by the other broker of its rack."""
    out = {}
    for p, r in reps.items():
        old = r[position]
        rack = sandbox.rack_of(old)
        new = next(b for b in sandbox.brokers_in_rack(rack) if b not in r)
        out[p] = [new if b == old else b for b in r]
    return out


def write_plan(path: Path, topic: str, assignment: dict[int, list[int]]) -> Path:
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
        for p, r in sorted(assignment.items())]}))
    return path


def check_json_progress(stderr: str, *, total: int, throttle: int) -> None:
    """``--progress json``: stderr's events, one JSON object per line, from start to stop, with a
    progress event per poll whose bytes only grow, a copy rate once two polls are apart, the
    throttle in force, and every partition done at the end."""
    events = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    assert events and events[0]["event"] == "start" and events[-1]["event"] == "stop", stderr
    assert events[0]["total"] == total and events[0]["bytes_total"] > 0
    progress = [e for e in events if e["event"] == "progress"]
    assert len(progress) >= 3, stderr  # polled every second over a copy of several seconds
    done = [e["bytes_done"] for e in progress]
    assert done == sorted(done) and done[-1] == progress[-1]["bytes_total"] == events[0]["bytes_total"]
    assert progress[-1]["done"] == progress[-1]["total"] == total
    assert any(e["rate_bytes_per_s"] for e in progress)
    assert {e["throttle_bytes_per_s"] for e in progress if e["in_flight"]} == {throttle}
    elapsed = [e["elapsed_s"] for e in events]
    assert elapsed == sorted(elapsed)


def check_watch(stdout: str, *, dests: set[int], leaders: set[int]) -> None:
    """``reassign list --watch`` off a terminal: a block per read, the brokers' rates once two
    reads are apart, and it ends by itself once nothing is in flight."""
    blocks = [b for b in stdout.split("\n\n") if b.strip()]
    assert len(blocks) >= 3, stdout
    assert "reassignments in flight" in blocks[0] and "measured from the next read on" in blocks[0]
    assert blocks[-1].splitlines()[-1] == "No partition reassignments found.", stdout
    receiving, sending = set(), set()
    for line in stdout.splitlines():
        cells = re.split(r"\s{3,}", line.strip())
        if len(cells) == 3 and cells[0].isdigit():
            if cells[1] != "-":
                receiving.add(int(cells[0]))
            if cells[2] != "-":
                sending.add(int(cells[0]))
    assert receiving and receiving <= dests, stdout
    assert sending and sending <= leaders, stdout


# ------------------------------------------------------------------------------------------
# tests
# ------------------------------------------------------------------------------------------


def test_execute_throttled_observes_throttles_then_cleans_up(sandbox, bootstrap, unique_topic, tmp_path, kops_home):
    topic = unique_topic("reassign-exec")
    before: dict[int, list[int]] = {}
    try:
        before = create_topic(bootstrap, topic, partitions=4, mb_per_partition=8)
        target = same_rack_swap(sandbox, before)
        plan = write_plan(tmp_path / "plan.json", topic, target)
        sources = sorted({b for r in before.values() for b in r})
        dests = sorted({b for p in before for b in target[p] if b not in before[p]})
        # throttles kops did not set: a rate on a source broker and an entry in a topic list
        foreign_broker = before[0][0]
        alter(bootstrap, "broker", str(foreign_broker), "leader.replication.throttled.rate", "987654321")
        alter(bootstrap, "topic", topic, "leader.replication.throttled.replicas", "99:5")

        t0 = time.monotonic()
        proc = kops_bg("execute", "--reassignment-json-file", str(plan), "--throttle", str(RATE),
                       "--wait", "--yes", "--poll-interval", "1", "--bootstrap-server", bootstrap,
                       "--output", "json", "--progress", "json", out=tmp_path / "exec.out")
        # another operator follows the moves, per broker, until they end: started as soon as they
        # are in flight (on a loaded host a kops process takes seconds to start reading)
        wait_for(lambda: ongoing(bootstrap), 60, 0.2, "the plan's moves in flight")
        watch = kops_bg("list", "--watch", "--interval", "1", "--bootstrap-server", bootstrap, out=tmp_path / "watch.out")
        # during the move: leader rate on sources, follower rate on destinations, replica lists
        # (dynamic configs reach the brokers asynchronously: wait until all are visible)
        want_follower = {f"{p}:{b}" for p in before for b in target[p] if b not in before[p]}
        want_leader = {f"{p}:{b}" for p, r in before.items() for b in r} | {"99:5"}

        def throttled():
            tt = topic_throttles(bootstrap, topic)
            bt = broker_throttles(bootstrap, sandbox.broker_ids)
            ok = (
                set(tt.get("follower.replication.throttled.replicas", "").split(",")) == want_follower
                and set(tt.get("leader.replication.throttled.replicas", "").split(",")) == want_leader
                and all(bt.get(b, {}).get("follower.replication.throttled.rate") == str(RATE) for b in dests)
                and all(bt.get(b, {}).get("leader.replication.throttled.rate") == str(RATE) for b in sources)
            )
            # seen while the moves are still in flight (kops lifts them as moves finish)
            return (tt, bt) if ok and ongoing(bootstrap) else None

        during_topic, during_brokers = wait_for(throttled, 30, 0.3, "kops' throttle configs while moving")
        for b in set(sandbox.broker_ids) - set(dests):
            assert "follower.replication.throttled.rate" not in during_brokers.get(b, {})

        assert proc.wait(120) == 0, (tmp_path / "exec.out.err").read_text()
        assert watch.wait(30) == 0, (tmp_path / "watch.out.err").read_text()
        check_watch((tmp_path / "watch.out").read_text(), dests=set(dests), leaders={r[0] for r in before.values()})
        elapsed = time.monotonic() - t0
        doc = json.loads((tmp_path / "exec.out").read_text())
        assert doc["state"] == "complete" and doc["finished"] and doc["throttles_left"] == []
        assert doc["progress"] == {"done": 4}
        check_json_progress((tmp_path / "exec.out.err").read_text(), total=4, throttle=RATE)
        # after: replicas at target, kops' throttles gone, the foreign ones restored
        assert replicas(bootstrap, topic) == target
        assert topic_throttles(bootstrap, topic) == {"leader.replication.throttled.replicas": "99:5"}
        assert broker_throttles(bootstrap, sandbox.broker_ids) == {
            foreign_broker: {"leader.replication.throttled.rate": "987654321"}}
        assert_lock_released(bootstrap)
        # 8 MiB into each destination broker at 0.4 MB/s: ~21 s (less Kafka's first fetch, taken
        # before its quota bites), and not hugely more
        assert 15 < elapsed < 110, elapsed
        r = kops("verify", "--reassignment-json-file", str(plan), "--bootstrap-server", bootstrap)
        assert r.returncode == 0, r.stderr
        assert r.stdout.count("is completed.") == 4
        # the journal is in the cluster (topic) and local
        local = list((kops_home / "journal").rglob("*.json"))
        assert len(local) == 1 and json.loads(local[0].read_text())["state"] == "complete"
        assert "__kops_journal" in admin(bootstrap).list_topics(timeout=10).topics
    finally:
        if before:
            alter(bootstrap, "broker", str(before[0][0]), "leader.replication.throttled.rate", None)
        delete_topic(bootstrap, topic)


def test_verify_states_second_execute_refused_and_cancel_rolls_back(sandbox, bootstrap, unique_topic, tmp_path, kops_home):
    topic = unique_topic("reassign-cancel")
    try:
        before = create_topic(bootstrap, topic, partitions=2, mb_per_partition=4)
        target = same_rack_swap(sandbox, before)
        # partition 1 only adds a replica (RF 3 -> 4): cancel must roll it back too
        extra = next(b for b in sandbox.broker_ids if b not in before[1])
        target[1] = before[1] + [extra]
        plan = write_plan(tmp_path / "plan.json", topic, target)
        rollback = write_plan(tmp_path / "rollback.json", topic, before)

        r = kops("execute", "--reassignment-json-file", str(plan), "--throttle", "50000", "--yes",
                 "--bootstrap-server", bootstrap, "--output", "json")
        assert r.returncode == 0, r.stderr
        exec_id = json.loads(r.stdout)["execution_id"]
        assert set(ongoing(bootstrap)) >= {(topic, 0), (topic, 1)}

        r = kops("verify", "--reassignment-json-file", str(plan), "--bootstrap-server", bootstrap, "--output", "json")
        assert r.returncode == 3, r.stderr
        doc = json.loads(r.stdout)
        assert doc["result"] == "in_progress" and doc["summary"] == {"in_progress": 2}
        assert doc["execution_id"] == exec_id

        # a second execution is refused, naming the first one; nothing changes
        other = write_plan(tmp_path / "other.json", topic, {0: before[0]})
        r = kops("execute", "--reassignment-json-file", str(other), "--yes", "--bootstrap-server", bootstrap)
        assert r.returncode == 3 and exec_id in r.stderr, r.stderr

        r = kops("list", "--bootstrap-server", bootstrap, "--output", "json")
        rows = {(x["topic"], x["partition"]): x for x in json.loads(r.stdout)["reassignments"]}
        assert rows[(topic, 1)]["adding"] == [extra] and rows[(topic, 1)]["removing"] == []
        assert rows[(topic, 0)]["kops_execution"] == exec_id

        r = kops("cancel", "--bootstrap-server", bootstrap, "--output", "json")
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["cancelled"] == [f"{topic}-0", f"{topic}-1"] and doc["execution_state"] == "cancelled"
        assert not any(tp[0] == topic for tp in ongoing(bootstrap))
        assert replicas(bootstrap, topic) == before  # original replicas, original order
        assert topic_throttles(bootstrap, topic) == {}
        assert broker_throttles(bootstrap, sandbox.broker_ids) == {}
        assert_lock_released(bootstrap)

        r = kops("verify", "--reassignment-json-file", str(rollback), "--bootstrap-server", bootstrap)
        assert r.returncode == 0, r.stdout + r.stderr
        r = kops("verify", "--reassignment-json-file", str(plan), "--bootstrap-server", bootstrap)
        assert r.returncode == 1 and "There is no active reassignment" in r.stdout
    finally:
        kops("cancel", "--bootstrap-server", bootstrap)
        delete_topic(bootstrap, topic)


def test_cancel_all_cancels_every_reassignment_whoever_started_it(sandbox, bootstrap, unique_topic, tmp_path,
                                                                   kops_home):
    """``cancel --all``: refused (exit 3, nothing changed) while a kops execution runs; once it
    is gone, every reassignment in flight is cancelled — kops' own, its original order put back
    and its throttles lifted, and another tool's, named as one whose order kops does not know,
    its throttles left alone (kops removes only what it set)."""
    from kafka.admin import KafkaAdminClient
    from kafka.structs import TopicPartition as KTP

    mine, theirs = unique_topic("cancel-all-kops"), unique_topic("cancel-all-other")
    ids = sandbox.broker_ids  # racks a, a, b, b, c, c: kops' moves on ids[0..3], the other tool's on ids[4..5]
    theirs_throttles = {"leader.replication.throttled.replicas": f"0:{ids[4]}",
                        "follower.replication.throttled.replicas": f"0:{ids[5]}"}
    try:
        before = kafka_helpers.create_topic(bootstrap, mine, rf=2, min_isr=1, mb_per_partition=4,
                                            assignment={0: [ids[0], ids[2]], 1: [ids[2], ids[0]]})
        plan = write_plan(tmp_path / "plan.json", mine, same_rack_swap(sandbox, before))
        proc = kops_bg("execute", "--reassignment-json-file", str(plan), "--throttle", "50000", "--wait", "--yes",
                       "--poll-interval", "1", "--bootstrap-server", bootstrap, out=tmp_path / "exec.out")
        wait_for(lambda: {(mine, 0), (mine, 1)} <= set(ongoing(bootstrap)), 60, 0.3, "kops' moves in flight")
        r = kops("cancel", "--all", "--bootstrap-server", bootstrap)
        assert r.returncode == 3 and "--all --force" in " ".join(r.stderr.split()), r.stdout + r.stderr
        assert {(mine, 0), (mine, 1)} <= set(ongoing(bootstrap))  # nothing was cancelled
        proc.send_signal(signal.SIGINT)  # the operator stops it; its moves stay in flight
        proc.wait(60)
        assert {(mine, 0), (mine, 1)} <= set(ongoing(bootstrap))

        # another tool's reassignment, throttled by that tool
        other = kafka_helpers.create_topic(bootstrap, theirs, rf=1, min_isr=1, mb_per_partition=4,
                                           assignment={0: [ids[4]]})
        for key, value in theirs_throttles.items():
            alter(bootstrap, "topic", theirs, key, value)
        for b in (ids[4], ids[5]):
            for key in RATE_KEYS:
                alter(bootstrap, "broker", str(b), key, "50000")
        # each broker answers DescribeConfigs of itself with the rates it applies, and applies
        # config changes in the order they were made: once both report their rates, both apply the
        # topic's throttled-replica lists set before them, and 4 MB at 50 KB/s stays in flight
        # for over a minute (a reassignment started earlier could finish before kops reads it)
        wait_for(lambda: broker_throttles(bootstrap, ids[4:])
                 == {b: dict.fromkeys(RATE_KEYS, "50000") for b in ids[4:]},
                 30, 0.3, f"brokers {ids[4:]} to apply the other tool's throttle rates")
        c = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
        try:
            c.alter_partition_reassignments({KTP(theirs, 0): [ids[4], ids[5]]})
        finally:
            c.close()
        wait_for(lambda: (theirs, 0) in ongoing(bootstrap), 30, 0.3, "the other tool's reassignment in flight")

        r = kops("cancel", "--all", "--bootstrap-server", bootstrap, "--output", "json")
        assert r.returncode == 0, r.stdout + r.stderr
        doc = json.loads(r.stdout)
        assert {f"{mine}-0", f"{mine}-1", f"{theirs}-0"} <= set(doc["cancelled"]), doc
        assert doc["order_unknown"] == [f"{theirs}-0"] and len(doc["executions_cancelled"]) == 1, doc
        assert any(f"{theirs}-0" in n and "not started by kops" in n for n in doc["notes"]), doc["notes"]
        assert not any(tp[0] in (mine, theirs) for tp in ongoing(bootstrap))
        assert replicas(bootstrap, mine) == before  # original replicas, original order
        assert replicas(bootstrap, theirs) == other
        assert topic_throttles(bootstrap, mine) == {}
        assert broker_throttles(bootstrap, ids[:4]) == {}
        assert topic_throttles(bootstrap, theirs) == theirs_throttles  # not kops': left alone
        assert set(broker_throttles(bootstrap, ids[4:])) == {ids[4], ids[5]}
        assert_lock_released(bootstrap)
    finally:
        kops("cancel", "--all", "--force", "--bootstrap-server", bootstrap)
        for b in (ids[4], ids[5]):
            for key in RATE_KEYS:
                alter(bootstrap, "broker", str(b), key, None)
        delete_topic(bootstrap, mine)
        delete_topic(bootstrap, theirs)


def test_bad_plans_change_nothing(sandbox, bootstrap, unique_topic, tmp_path, kops_home):
    topic = unique_topic("reassign-bad")
    try:
        before = create_topic(bootstrap, topic, partitions=3, mb_per_partition=1)
        plan = tmp_path / "bad.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "no-such-topic-x", "partition": 0, "replicas": [0, 1, 2]},
            {"topic": topic, "partition": 9, "replicas": [0, 1, 2]},
            {"topic": topic, "partition": 0, "replicas": [0, 77, 2]},
            {"topic": topic, "partition": 1, "replicas": [before[1][1], before[1][0], before[1][2]],
             "log_dirs": ["any", "relative/dir", "any"]},
            {"topic": topic, "partition": 2, "replicas": [3, 4, 5]},  # fine on its own
        ]}))
        r = kops("execute", "--reassignment-json-file", str(plan), "--throttle", "1000", "--yes",
                 "--bootstrap-server", bootstrap)
        assert r.returncode == 2, r.stdout + r.stderr
        err = " ".join(r.stderr.split())
        for needle in ("no-such-topic-x-0", f"{topic}-9", "unknown broker 77",
                       'partitions[3].log_dirs: must be "any" or absolute paths'):
            assert needle in err, (needle, err)
        dup = tmp_path / "dup.json"
        dup.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "replicas": [1, 1, 2]},
            {"topic": "no-such-topic-y", "partition": 0, "replicas": [0, 1, 2]}]}))
        r = kops("execute", "--reassignment-json-file", str(dup), "--yes", "--bootstrap-server", bootstrap)
        err = " ".join(r.stderr.split())
        # a problem of the file and one only the cluster shows, named together (issue 17)
        assert r.returncode == 2 and "duplicate replica 1" in err, err
        assert "topic 'no-such-topic-y' does not exist" in err, err
        # nothing changed
        assert replicas(bootstrap, topic) == before
        assert topic_throttles(bootstrap, topic) == {}
        assert broker_throttles(bootstrap, sandbox.broker_ids) == {}
        assert not any(tp[0] == topic for tp in ongoing(bootstrap))
        assert not (kops_home / "journal").exists() or not list((kops_home / "journal").rglob("*.json"))
    finally:
        delete_topic(bootstrap, topic)


def test_kill_9_mid_execute_then_resume_completes(sandbox, bootstrap, zk_connect, unique_topic, tmp_path, kops_home):
    """Journal and lock in ZooKeeper (--zookeeper); kops killed outright while moving."""
    topic = unique_topic("reassign-kill")
    try:
        before = create_topic(bootstrap, topic, partitions=3, mb_per_partition=6)
        target = same_rack_swap(sandbox, before, position=2)
        plan = write_plan(tmp_path / "plan.json", topic, target)
        # the legacy path (/admin/reassign_partitions), in waves of 2 moves
        proc = kops_bg("execute", "--reassignment-json-file", str(plan), "--throttle", "400000",
                       "--max-moves-in-flight", "2", "--via", "zookeeper", "--wait", "--yes",
                       "--poll-interval", "1", "--bootstrap-server", bootstrap, "--zookeeper", zk_connect,
                       out=tmp_path / "exec.out")
        wait_for(lambda: any(tp[0] == topic for tp in ongoing(bootstrap)), 30, 0.3, "moves in flight")
        time.sleep(1)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert topic_throttles(bootstrap, topic), "throttles stay while the moves run"
        assert broker_throttles(bootstrap, sandbox.broker_ids)

        # the journal outlives the process and the host: use a fresh local home
        env = {"KOPS_HOME": str(tmp_path / "other-host")}
        r = kops("list", "--bootstrap-server", bootstrap, "--zookeeper", zk_connect, "--output", "json", env_extra=env)
        execs = json.loads(r.stdout)["kops_executions"]
        assert len(execs) == 1 and execs[0]["state"] == "running"
        r = kops("resume", "--poll-interval", "1", "--bootstrap-server", bootstrap, "--zookeeper", zk_connect,
                 "--output", "json", env_extra=env, timeout=180)
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["state"] == "complete" and doc["progress"] == {"done": 3}
        assert doc["waves"] >= 2
        assert replicas(bootstrap, topic) == target
        assert topic_throttles(bootstrap, topic) == {}
        assert broker_throttles(bootstrap, sandbox.broker_ids) == {}
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=zk_connect)
        zk.start(10)
        try:
            assert not zk.exists("/kops/reassign/lock")
            assert not zk.exists("/admin/reassign_partitions")
            assert execs[0]["id"] in zk.get_children("/kops/reassign/executions")
        finally:
            zk.stop()
            zk.close()
    finally:
        kops("cancel", "--bootstrap-server", bootstrap, "--zookeeper", zk_connect)
        delete_topic(bootstrap, topic)


def test_broker_down_is_skipped_and_never_hangs(sandbox, bootstrap, unique_topic, tmp_path, kops_home):
    """Moving replicas off a broker that is down (the decommission case): validation refuses
    new replicas on it, throttles skip it, the moves complete, nothing of kops' is left on it
    when it comes back."""
    topic = unique_topic("reassign-down")
    down = None
    try:
        before = create_topic(bootstrap, topic, partitions=3, mb_per_partition=2)
        down = before[0][1]
        sandbox.stop(broker=down)
        # a plan that adds replicas on the down broker: exit 2 unless --allow-offline
        p1 = next(p for p, r in before.items() if down not in r) if any(down not in r for r in before.values()) else None
        if p1 is not None:
            onto = write_plan(tmp_path / "onto.json", topic,
                              {p1: [down if i == 2 else b for i, b in enumerate(before[p1])]})
            r = kops("execute", "--reassignment-json-file", str(onto), "--yes", "--bootstrap-server", bootstrap)
            assert r.returncode == 2 and f"broker {down} is down" in " ".join(r.stderr.split()), r.stderr
        # move every replica off the down broker to its rack mate
        mate = next(b for b in sandbox.brokers_in_rack(sandbox.rack_of(down)) if b != down)
        target = {p: [mate if b == down else b for b in r] for p, r in before.items() if down in r}
        plan = write_plan(tmp_path / "off.json", topic, target)
        t0 = time.monotonic()
        r = kops("execute", "--reassignment-json-file", str(plan), "--throttle", "2000000", "--wait",
                 "--timeout", "90", "--yes", "--poll-interval", "1", "--bootstrap-server", bootstrap,
                 "--output", "json", timeout=150)
        assert r.returncode == 0, r.stdout + r.stderr
        assert time.monotonic() - t0 < 90
        doc = json.loads(r.stdout)
        assert doc["state"] == "complete"
        assert any(f"broker {down} is down" in n for n in doc["notes"])  # skipped, said so
        cur = replicas(bootstrap, topic)
        assert all(cur[p] == target[p] for p in target)
        assert topic_throttles(bootstrap, topic) == {}
        assert broker_throttles(bootstrap, [b for b in sandbox.broker_ids if b != down]) == {}
    finally:
        if down is not None:
            sandbox.start(broker=down)

            def clean_after_restart():
                try:
                    return broker_throttles(bootstrap, [down], fresh=True) == {}
                except Exception:  # the restarted broker may take a moment to answer
                    return False

            wait_for(clean_after_restart, 60, 1, f"broker {down} to answer without throttles")
        delete_topic(bootstrap, topic)


def test_log_dirs_are_verified(sandbox, bootstrap, unique_topic, tmp_path, kops_home):
    """A plan with log_dirs completes only with its replicas in the requested dirs (the sandbox's
    brokers have one log dir each: naming it completes; naming a dir the broker lacks is a
    mismatch, not a success)."""
    topic = unique_topic("reassign-logdirs")
    try:
        before = create_topic(bootstrap, topic, partitions=2, mb_per_partition=1)
        target = same_rack_swap(sandbox, before)
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": p, "replicas": r,
             "log_dirs": [str(sandbox.broker_data_dir(b)) if b not in before[p] else "any" for b in r]}
            for p, r in sorted(target.items())]}))
        r = kops("execute", "--reassignment-json-file", str(plan), "--replica-alter-log-dirs-throttle", "50000000",
                 "--wait", "--yes", "--poll-interval", "1", "--timeout", "90", "--bootstrap-server", bootstrap,
                 "--output", "json", timeout=150)
        assert r.returncode == 0, r.stdout + r.stderr
        assert json.loads(r.stdout)["state"] == "complete"
        assert replicas(bootstrap, topic) == target
        v = kops("verify", "--reassignment-json-file", str(plan), "--bootstrap-server", bootstrap, "--output", "json")
        assert v.returncode == 0, v.stdout + v.stderr
        doc = json.loads(v.stdout)
        assert {p["partition"]: set(p.get("log_dirs", {}).values()) for p in doc["partitions"]} == {0: {"done"}, 1: {"done"}}
        for b in sandbox.broker_ids:  # the log-dir rate was lifted with the rest
            res = ConfigResource(ResourceType.BROKER, str(b))
            e = admin(bootstrap).describe_configs([res], request_timeout=10)[res].result(15)
            key = "replica.alter.log.dirs.io.max.bytes.per.second"
            assert key not in e or e[key].is_default, (b, e[key].value)

        # a dir the broker does not have: the replicas are in place, the log dir never will be
        leader0 = target[0][0]
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "replicas": target[0],
             "log_dirs": ["/nonexistent-kops-log-dir" if b == leader0 else "any" for b in target[0]]}]}))
        r = kops("execute", "--reassignment-json-file", str(bad), "--wait", "--yes", "--poll-interval", "1",
                 "--timeout", "90", "--bootstrap-server", bootstrap, "--output", "json", timeout=150)
        assert r.returncode == 1, r.stdout + r.stderr
        doc = json.loads(r.stdout)
        assert doc["state"] == "failed" and doc["progress"] == {"mismatch": 1}
        assert any("has no log dir /nonexistent-kops-log-dir" in n for n in doc["notes"]), doc["notes"]
        v = kops("verify", "--reassignment-json-file", str(bad), "--bootstrap-server", bootstrap, "--output", "json")
        assert v.returncode == 1, v.stdout + v.stderr
        st = json.loads(v.stdout)["partitions"][0]
        assert st["state"] == "mismatch" and st["log_dirs"] == {str(leader0): "elsewhere"}
    finally:
        delete_topic(bootstrap, topic)


_DISK_LINE = re.compile(r"broker (\d+) log dir (\S+): needs (\d+) bytes .*usable (\d+) bytes .* of (\d+) total")


def test_plan_that_would_not_fit_a_destination_disk_is_refused(sandbox, bootstrap, unique_topic, tmp_path, kops_home):
    """Free space comes from DescribeLogDirs (total and usable bytes, KIP-827). The sandbox's
    brokers share one roomy disk, so the plan is made too big for it with the documented knob,
    never a faked answer: ``--disk-reserve 100`` keeps the whole volume free, and any data is too
    much. Refused before any write (exit 2), every destination named with its figures."""
    requires(sandbox, versions.DISK_CAPACITY)
    topic = unique_topic("reassign-disk")
    try:
        before = create_topic(bootstrap, topic, partitions=3, mb_per_partition=1)
        target = same_rack_swap(sandbox, before)
        incoming: dict[int, int] = {}
        for p, r in target.items():
            for b in r:
                if b not in before[p]:
                    incoming[b] = incoming.get(b, 0) + 1
        plan = write_plan(tmp_path / "plan.json", topic, target)

        r = kops("execute", "--reassignment-json-file", str(plan), "--throttle", "1000000", "--yes",
                 "--disk-reserve", "100", "--bootstrap-server", bootstrap, "--output", "json")
        assert r.returncode == 2, r.stdout + r.stderr
        err = json.loads(r.stdout)["error"]
        assert err["type"] == "bad_input" and "would not fit" in err["message"], err
        assert "nothing was changed" in err["message"]
        lines = {int(m.group(1)): m for d in err["details"] if (m := _DISK_LINE.match(d))}
        assert sorted(lines) == sorted(incoming), err["details"]
        for b, m in lines.items():
            data_dir = str(sandbox.broker_data_dir(b))
            assert m.group(2).rstrip("/") == data_dir.rstrip("/")
            needed, usable, total = int(m.group(3)), int(m.group(4)), int(m.group(5))
            assert needed >= incoming[b] * 1_000_000  # ~1 MB per partition it receives
            st = os.statvfs(data_dir)  # the broker's volume, seen from here
            assert total == st.f_blocks * st.f_frsize
            assert 0 < usable <= total
        # nothing changed
        assert replicas(bootstrap, topic) == before
        assert topic_throttles(bootstrap, topic) == {}
        assert broker_throttles(bootstrap, sandbox.broker_ids) == {}
        assert not any(tp[0] == topic for tp in ongoing(bootstrap))
        assert not (kops_home / "journal").exists() or not list((kops_home / "journal").rglob("*.json"))

        # with the default reserve (5 %) the same plan fits; without --yes and a terminal kops
        # stops after the check and the figures it shows, still before any write
        st = os.statvfs(str(sandbox.broker_data_dir(sorted(incoming)[0])))
        if st.f_bavail * st.f_frsize > 0.05 * st.f_blocks * st.f_frsize + 100 * MB:
            r = kops("execute", "--reassignment-json-file", str(plan), "--bootstrap-server", bootstrap)
            assert r.returncode == 2 and "without --yes" in r.stderr, r.stderr
            assert f"destination disks: {len(incoming)} log dir(s) checked, all fit keeping 5 % free" in r.stderr
            assert replicas(bootstrap, topic) == before
    finally:
        delete_topic(bootstrap, topic)


def test_a_later_wave_that_would_not_fit_halts_and_cancel_rolls_back(sandbox, bootstrap, unique_topic, tmp_path, kops_home):
    """Before each later wave kops reads the destinations' usable bytes again (a disk may fill
    up mid-move). Provoked honestly with ``resume --disk-reserve 100``: the execution halts
    before wave 2 (exit 1, said), submits nothing new, the move in flight goes on, and
    ``cancel`` rolls it back and cleans up."""
    requires(sandbox, versions.DISK_CAPACITY)
    topic = unique_topic("reassign-diskwave")
    try:
        before = create_topic(bootstrap, topic, partitions=3, mb_per_partition=1)
        # 6 MB more on partition 1: its move still copies when partition 0's is done
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, "compression.type": "none"})
        for _ in range(60):
            p.produce(topic, value=os.urandom(100_000), partition=1)
            p.poll(0)
        assert p.flush(60) == 0
        target = same_rack_swap(sandbox, before)
        plan = write_plan(tmp_path / "plan.json", topic, target)
        r = kops("execute", "--reassignment-json-file", str(plan), "--throttle", "300000", "--max-moves-in-flight", "2",
                 "--yes", "--bootstrap-server", bootstrap, "--output", "json")
        assert r.returncode == 0, r.stdout + r.stderr
        exec_id = json.loads(r.stdout)["execution_id"]
        wait_for(lambda: (topic, 0) not in ongoing(bootstrap), 60, 0.3, "partition 0's move to finish")
        assert (topic, 1) in ongoing(bootstrap), "partition 1's move ended too soon for this test"

        r = kops("resume", "--disk-reserve", "100", "--poll-interval", "1", "--timeout", "60",
                 "--bootstrap-server", bootstrap, "--output", "json", timeout=120)
        assert r.returncode == 1, r.stdout + r.stderr
        doc = json.loads(r.stdout)
        assert doc["execution_id"] == exec_id and doc["state"] == "halted", doc
        assert "halted by the disk check" in doc["message"] and "kops reassign cancel" in doc["message"]
        assert doc["progress"] == {"done": 1, "in_flight": 1, "pending": 1}, doc["progress"]
        assert any(n.startswith("stopped before wave 2") for n in doc["notes"]), doc["notes"]
        assert "stopped before wave 2" in r.stderr  # said to the operator too
        now = ongoing(bootstrap)
        assert (topic, 2) not in now  # nothing new was submitted
        moving = (topic, 1) in now  # the move in flight goes on (~17 s left), under its throttle
        if moving:
            assert broker_throttles(bootstrap, sandbox.broker_ids)

        r = kops("cancel", "--bootstrap-server", bootstrap, "--output", "json", timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert json.loads(r.stdout)["execution_state"] == "cancelled"
        assert not any(tp[0] == topic for tp in ongoing(bootstrap))
        after = replicas(bootstrap, topic)
        assert after[0] == target[0] and after[2] == before[2]  # a finished move stays
        assert after[1] == (before[1] if moving else target[1])  # rolled back if it was still moving
        assert topic_throttles(bootstrap, topic) == {}
        assert broker_throttles(bootstrap, sandbox.broker_ids) == {}
        assert_lock_released(bootstrap)
    finally:
        kops("cancel", "--bootstrap-server", bootstrap)
        delete_topic(bootstrap, topic)


def kafka_tool(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    from kops.sandbox.dist import java_executable, kafka_classpath

    cmd = [java_executable(), "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", kafka_classpath(),
           "org.apache.kafka.tools.reassign.ReassignPartitionsCommand", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def test_interop_with_kafka_reassign_partitions_tool(sandbox, bootstrap, unique_topic, tmp_path, kops_home):
    """A plan from Kafka's --generate runs and verifies with kops; a plan from kops generate
    runs and verifies with Kafka's tool (3.9, the sandbox's jars)."""
    topic = unique_topic("reassign-interop")
    try:
        create_topic(bootstrap, topic, partitions=4, mb_per_partition=1)
        topics = tmp_path / "topics.json"
        topics.write_text(json.dumps({"topics": [{"topic": topic}], "version": 1}))
        # 1. Kafka's plan, kops executes and verifies
        r = kafka_tool("--bootstrap-server", bootstrap, "--generate", "--topics-to-move-json-file", str(topics),
                       "--broker-list", "0,1,2,3,4,5")
        assert r.returncode == 0, r.stdout + r.stderr
        lines = r.stdout.splitlines()
        proposed = lines[lines.index("Proposed partition reassignment configuration") + 1]
        kplan = tmp_path / "kafka-plan.json"
        kplan.write_text(proposed)
        r = kops("execute", "--reassignment-json-file", str(kplan), "--wait", "--yes", "--poll-interval", "1",
                 "--bootstrap-server", bootstrap)
        assert r.returncode == 0, r.stderr
        r = kops("verify", "--reassignment-json-file", str(kplan), "--bootstrap-server", bootstrap)
        assert r.returncode == 0, r.stdout + r.stderr
        want = {e["partition"]: e["replicas"] for e in json.loads(proposed)["partitions"]}
        assert replicas(bootstrap, topic) == want
        # 2. kops' plan (minimal strategy, moving the topic off broker 5), Kafka executes and verifies
        r = kops("generate", "--topics-to-move-json-file", str(topics), "--broker-list", "0,1,2,3,4",
                 "--bootstrap-server", bootstrap)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        oplan = tmp_path / "kops-plan.json"
        oplan.write_text(lines[lines.index("Proposed partition reassignment configuration") + 1])
        r = kafka_tool("--bootstrap-server", bootstrap, "--execute", "--reassignment-json-file", str(oplan),
                       "--throttle", "50000000")
        assert r.returncode == 0, r.stdout + r.stderr

        def kafka_verified():
            v = kafka_tool("--bootstrap-server", bootstrap, "--verify", "--reassignment-json-file", str(oplan))
            return "still in progress" not in v.stdout and v.returncode == 0 and v

        v = wait_for(kafka_verified, 90, 1, "Kafka's --verify to report completion")
        assert "There is no active reassignment" not in v.stdout, v.stdout
        r = kops("verify", "--reassignment-json-file", str(oplan), "--bootstrap-server", bootstrap)
        assert r.returncode == 0, r.stdout + r.stderr
        assert all(5 not in reps for reps in replicas(bootstrap, topic).values())
        assert topic_throttles(bootstrap, topic) == {}  # Kafka's verify cleared its own throttles
    finally:
        delete_topic(bootstrap, topic)
