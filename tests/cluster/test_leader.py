"""Leadership against the real sandbox cluster (Kafka 3.9, ZooKeeper mode, 6 brokers in racks
a,a,b,b,c,c, ``auto.leader.rebalance.enable=false`` so only kops restores leaders).

Everything stopped is started again in ``finally``; reassignments started here are cancelled.
"""

from __future__ import annotations

import contextlib
import json
from collections import defaultdict

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from typer.testing import CliRunner

from kops.cli.leader import app as leader_app
from tests.cluster.kafka_helpers import all_in_sync, partitions_agreed, wait_for

pytestmark = pytest.mark.cluster


@pytest.fixture(autouse=True)
def _state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KOPS_HOME", str(tmp_path / "state"))


def leader(*args: str) -> tuple[int, dict | None, str]:
    r = CliRunner().invoke(leader_app, list(args))
    doc = None
    if "--output" in args and r.stdout.strip():
        doc = json.loads(r.stdout)
    out = r.output
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        out += f"\n{type(r.exception).__name__}: {r.exception}"
    return r.exit_code, doc, out


def create_topic(bootstrap: str, name: str, partitions: int = 12, rf: int = 3,
                 assignment: list[list[int]] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    nt = (NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment) if assignment
          else NewTopic(name, partitions, rf))
    admin.create_topics([nt])[name].result(30)
    n = len(assignment) if assignment else partitions

    def ready() -> bool:
        return sum(1 for (t, _), p in partitions_agreed(bootstrap).items()
                   if t == name and p["leader"] >= 0 and len(p["isr"]) == len(p["replicas"])) == n

    wait_for(ready, 30, what=f"topic {name} ready")


@contextlib.contextmanager
def slow_reassignment(sandbox, bootstrap: str, topic: str, target: list[int] | None = None):
    """A real reassignment that stays in progress: a new replica must copy ~3 MB under a
    1 KB/s replication throttle (from replicas [ids[0], ids[2]] to ``target``, by default
    [ids[0], ids[2], ids[4]]). Cancelled and un-throttled on exit."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
    from kafka import TopicPartition as KTP
    from kafka.admin import KafkaAdminClient

    ids = sorted(sandbox.broker_ids)
    create_topic(bootstrap, topic, assignment=[[ids[0], ids[2]]])
    prod = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for _ in range(3000):  # > replica.fetch.max.bytes (1 MB): the first fetch cannot take it all
        prod.produce(topic, b"x" * 1000)
        prod.poll(0)
    assert prod.flush(60) == 0, "the ~3 MB were not all acknowledged"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    rates = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")

    def alter(op):
        # the topic's throttled replicas first, then the brokers' rates: a broker applies config
        # changes in the order they were made, so one that reports its rate has the topic's too
        res = [ConfigResource("topic", topic, incremental_configs=[
            ConfigEntry(k, "*", incremental_operation=op)
            for k in ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")])]
        res += [ConfigResource("broker", str(b), incremental_configs=[
            ConfigEntry(k, "1000", incremental_operation=op) for k in rates]) for b in ids]
        for r in res:  # one broker resource per request
            for f in admin.incremental_alter_configs([r]).values():
                f.result(30)

    def throttled(b: int) -> bool:
        """Broker ``b`` itself (a broker resource is described by that broker) reports the rates:
        it has applied them. The alter returns once the change is stored, before brokers apply it
        -- a reassignment started in between copies the 3 MB at full speed (a CI failure)."""
        (f,) = admin.describe_configs([ConfigResource("broker", str(b))]).values()
        entries = f.result(30)
        return all(k in entries and entries[k].value == "1000" for k in rates)

    kp = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    alter(AlterConfigOpType.SET)
    started = False
    try:
        for b in ids:
            wait_for(lambda: throttled(b), 30, 0.2, what=f"broker {b} to apply the 1 KB/s throttle")
        kp.alter_partition_reassignments({KTP(topic, 0): target or [ids[0], ids[2], ids[4]]})
        started = True
        wait_for(lambda: kp.list_partition_reassignments(), 15, what="reassignment listed")
        yield
    finally:
        if started:
            kp.alter_partition_reassignments({KTP(topic, 0): None})
            wait_for(lambda: not kp.list_partition_reassignments(), 30, what="reassignment cancelled")
        alter(AlterConfigOpType.DELETE)
        kp.close()


def controller_imbalance(parts: dict, alive: set[int], threshold_pct: float) -> dict[int, tuple[int, int, bool]]:
    """The ZooKeeper controller's checkAndTriggerAutoLeaderRebalance, written out independently."""
    by_pref = defaultdict(list)
    for tp, p in parts.items():
        by_pref[p["replicas"][0]].append(p)
    out = {}
    for b, ps in by_pref.items():
        notp = [p for p in ps if p["leader"] != b]
        out[b] = (len(ps), len(notp), len(notp) / len(ps) > threshold_pct / 100)
    return out


def test_rebalance_after_broker_restart(sandbox, bootstrap, zk_connect, unique_topic, monkeypatch, tmp_path):
    topic = unique_topic("lead")
    create_topic(bootstrap, topic, 12)
    from kops.sandbox import probe

    with probe.zk_client(zk_connect) as zk:  # not the controller: its stop moves the controller too,
        ctrl = probe.zk_controller(zk)       # and the metadata read right after can be stale
    victim = next(b for b in sandbox.broker_ids[1:] if b != ctrl)
    # Kafka's assignment gives every broker preferred partitions (metadata reaches every broker soon)
    mine = wait_for(lambda: [tp for tp, p in partitions_agreed(bootstrap).items()
                             if tp[0] == topic and p["replicas"][0] == victim], 20, what="metadata")
    # while a reassignment is in progress, rebalance steps aside (exit 0, says why)
    with slow_reassignment(sandbox, bootstrap, unique_topic("slow")):
        code, doc, out = leader("rebalance", "--bootstrap-server", bootstrap, "--output", "json")
        assert code == 0 and doc["status"] == "stepped_aside", out
        assert "being reassigned" in doc["reason"]

    try:
        sandbox.stop(victim)
        now = partitions_agreed(bootstrap)
        # controlled shutdown: its leaders moved away, nothing offline
        assert all(now[tp]["leader"] not in (victim, -1) for tp in mine)
        # balance cannot be reached while the broker is down: exit 3, the reason named
        code, doc, out = leader("rebalance", "--bootstrap-server", bootstrap, "--output", "json")
        assert code == 3, out
        assert victim in doc["unreachable_brokers"]
        assert any(b["reason"] == f"preferred replica {victim} is down" for b in doc["blocked"])
    finally:
        sandbox.start(victim)
    wait_for(lambda: all_in_sync(bootstrap), 90, what="ISR complete after restart")

    before = partitions_agreed(bootstrap)
    assert all(before[tp]["leader"] != victim for tp in mine)  # no auto rebalance in the sandbox
    expected = controller_imbalance(before, set(sandbox.broker_ids), 10)
    assert expected[victim][2]  # over the threshold

    # dry run: the figures the controller would compute, and nothing changes
    code, doc, out = leader("rebalance", "--bootstrap-server", bootstrap, "--dry-run", "--output", "json")
    assert code == 0, out
    got = {b["broker"]: (b["preferred_partitions"], b["not_preferred_leader"], b["over_threshold"])
           for b in doc["before"]["brokers"]}
    assert got == expected
    assert {(e["topic"], e["partition"]) for e in doc["would_elect"]} >= set(mine)
    assert {tp: p["leader"] for tp, p in partitions_agreed(bootstrap).items()} == {tp: p["leader"] for tp, p in before.items()}

    # only above the threshold: at 100% no broker can be strictly above, so nothing is elected
    code, doc, out = leader("rebalance", "--bootstrap-server", bootstrap, "--imbalance-threshold", "100",
                            "--output", "json")
    assert code == 0 and doc["status"] == "balanced" and "elections" not in doc, out
    assert partitions_agreed(bootstrap)[mine[0]]["leader"] != victim

    # a concurrent second run is refused (steps aside) while another run holds the lock
    from kops.cluster.connection import Connection
    from kops.cluster.config import ClientConfig
    from kops.ops.leader_rebalance import RunLock, cluster_key

    conn = Connection(bootstrap, ClientConfig.load(None), zk_connect)
    try:
        with RunLock(conn, cluster_key(conn), what="test holder"):
            code, doc, out = leader("rebalance", "--bootstrap-server", bootstrap, "--output", "json")
            assert code == 0 and doc["status"] == "stepped_aside" and "test holder" in doc["reason"], out
            # from "another host" (another state dir): the ZooKeeper guard refuses it too
            monkeypatch.setenv("KOPS_HOME", str(tmp_path / "other-host"))
            code, doc, out = leader("rebalance", "--bootstrap-server", bootstrap, "--zookeeper", zk_connect,
                                    "--output", "json")
            assert code == 0 and doc["status"] == "stepped_aside" and "/kops/locks/leadership" in doc["reason"], out
            monkeypatch.setenv("KOPS_HOME", str(tmp_path / "state"))
            assert partitions_agreed(bootstrap)[mine[0]]["leader"] != victim
    finally:
        conn.close()

    # the real run, with metrics
    metrics = sandbox.config.workdir / "leader.prom"
    code, doc, out = leader("rebalance", "--bootstrap-server", bootstrap, "--output", "json",
                            "--metrics-file", str(metrics), "--batch-size", "5")
    assert code == 0, out
    assert doc["status"] == "elected" and doc["elections"]["counts"]["failed"] == 0
    assert doc["elections"]["counts"]["elected"] >= len(mine)
    after = partitions_agreed(bootstrap)
    assert all(after[tp]["leader"] == victim for tp in mine)
    # every broker that was over the threshold leads all its preferred partitions again; brokers
    # at or under it were left alone, as the controller does
    over = {b for b, (_, _, o) in expected.items() if o}
    assert all(p["leader"] == p["replicas"][0] for p in after.values() if p["replicas"][0] in over)
    under = {tp for tp, p in before.items() if p["replicas"][0] not in over}
    assert {tp: after[tp]["leader"] for tp in under} == {tp: before[tp]["leader"] for tp in under}
    assert f'kops_leader_imbalance_ratio_before{{broker="{victim}"}}' in metrics.read_text()
    assert all(not b["over_threshold"] for b in doc["after"]["brokers"])
    # idempotent: the next run has nothing to do and is quiet
    code, _, out = leader("rebalance", "--bootstrap-server", bootstrap)
    assert code == 0 and "balanced" in out and len(out.strip().splitlines()) == 1


def test_rebalance_asks_the_controller_when_the_preferred_replica_is_out_of_the_isr(sandbox, bootstrap,
                                                                                      unique_topic):
    """The metadata kops reads can lag the controller (right after a reassignment), so a live
    preferred replica out of the ISR as read is asked for too; when it really is out of the ISR
    the controller refuses, and kops reports it blocked (exit 3), not failed."""
    check_out_of_isr_ask(sandbox, bootstrap, unique_topic("outisr"))


def check_out_of_isr_ask(sandbox, bootstrap: str, topic: str) -> None:
    ids = sorted(sandbox.broker_ids)
    # during the reassignment the replicas are target ++ origin = [ids[4], ids[0], ids[2]]: the
    # preferred replica ids[4] is live and copying under a 1 KB/s throttle, not in the ISR
    with slow_reassignment(sandbox, bootstrap, topic, target=[ids[4], ids[0]]):
        p = wait_for(lambda: (lambda q: q if q["replicas"][0] == ids[4] else None)(partitions_agreed(bootstrap)[(topic, 0)]),
                     20, what="reassignment in the metadata")
        assert ids[4] not in p["isr"] and p["leader"] != ids[4], p
        code, doc, out = leader("rebalance", "--bootstrap-server", bootstrap, "--force",
                                "--imbalance-threshold", "0", "--output", "json")
        assert code == 3, out
        assert ids[4] in doc["unreachable_brokers"] and doc["asked_out_of_isr"] >= 1
        refused = {(f["topic"], f["partition"]): f["reason"] for f in doc["elections"]["failed"]}
        assert refused[(topic, 0)].startswith("PREFERRED_LEADER_NOT_AVAILABLE"), refused
        blocked = {(b["topic"], b["partition"]): b["reason"] for b in doc["blocked"]}
        assert blocked[(topic, 0)].startswith(f"preferred replica {ids[4]} is not in the ISR"), blocked
        assert partitions_agreed(bootstrap)[(topic, 0)]["leader"] == p["leader"]


def test_demote_rack_and_restore(sandbox, bootstrap, unique_topic):
    topic = unique_topic("demote")
    create_topic(bootstrap, topic, 12)
    wait_for(lambda: all_in_sync(bootstrap), 60, what="cluster in sync")
    rack = "b"
    rack_brokers = set(sandbox.brokers_in_rack(rack))
    before = partitions_agreed(bootstrap)
    sets_before = {tp: sorted(p["replicas"]) for tp, p in before.items()}
    movable = {tp for tp, p in before.items() if set(p["replicas"]) - rack_brokers}

    code, doc, out = leader("demote", "--rack", rack, "--bootstrap-server", bootstrap, "--output", "json")
    assert code in (0, 3), out

    def demoted():  # the new leaders reach every broker's metadata within moments (a busy host: seconds)
        now = partitions_agreed(bootstrap)
        return now if all(now[tp]["leader"] not in rack_brokers for tp in movable) else None

    now = wait_for(demoted, 30, what=f"no leader on rack {rack}")
    assert all(p["leader"] >= 0 for p in now.values()), "no offline partition"
    assert {tp: sorted(p["replicas"]) for tp, p in now.items()} == sets_before, "no data moved"
    assert all(now[tp]["replicas"][0] not in rack_brokers for tp in movable)
    assert code == (0 if movable == set(before) else 3), out
    assert doc["plan"]["reorders"] and doc["elections"]["counts"]["failed"] == 0

    # rebalance (cron) does not undo a demotion: the demoted brokers are no longer preferred
    code, rdoc, out = leader("rebalance", "--bootstrap-server", bootstrap, "--output", "json")
    assert code == 0, out
    assert all(partitions_agreed(bootstrap)[tp]["leader"] not in rack_brokers for tp in movable)

    code, doc, out = leader("restore", "--rack", rack, "--bootstrap-server", bootstrap, "--output", "json")
    assert code == 0, out
    after = partitions_agreed(bootstrap)
    assert {tp: p["replicas"] for tp, p in after.items()} == {tp: p["replicas"] for tp, p in before.items()}

    def restored():  # leadership changes reach every broker's metadata within moments
        now = partitions_agreed(bootstrap)
        return all(p["leader"] == p["replicas"][0] for tp, p in now.items()
                   if before[tp]["replicas"][0] in rack_brokers) and now

    after = wait_for(restored, 30, what="preferred leaders back on the rack")
    assert sum(1 for p in after.values() if p["leader"] in rack_brokers) > 0


def test_balance_plan_on_skewed_topic(sandbox, bootstrap, unique_topic):
    topic = unique_topic("skew")
    # every partition prefers one of the two brokers of rack a; racks stay safe
    b = sorted(sandbox.broker_ids)  # racks a,a,b,b,c,c
    shape = [[0, 2, 4], [1, 3, 5], [0, 3, 5], [1, 2, 4], [0, 2, 5], [1, 3, 4]] * 2
    sets = [[b[i] for i in s] for s in shape]
    create_topic(bootstrap, topic, assignment=sets)
    code, doc, out = leader("balance-plan", "--topic", topic, "--bootstrap-server", bootstrap, "--output", "json")
    assert code == 0, out
    assert doc["replica_set_changes"] == 0
    plan = {(e["topic"], e["partition"]): e["replicas"] for e in doc["plan"]["partitions"]}
    for (t, p), r in plan.items():
        assert t == topic and sorted(r) == sorted(sets[p])
    lead = list(doc["after"]["preferred_leaders"].values())
    assert max(lead) - min(lead) <= 1
    foll = list(doc["after"]["first_followers"].values())
    assert max(foll) - min(foll) <= 1

    # apply it (reorder-only reassignment + preferred election): leaders end within +-1 per broker
    from kops.cluster.config import ClientConfig
    from kops.cluster.connection import Connection
    from kops.ops.elections import run_elections, submit_reorder, wait_reordered

    with Connection(bootstrap, ClientConfig.load(None)) as conn:
        assert all(v is None for v in submit_reorder(conn, plan).values())
        not_done, _ = wait_reordered(conn, plan, timeout_s=30)
        assert not not_done
        res = run_elections(conn, "preferred", sorted(plan))
        assert not res.failed

    def leader_counts():
        now = {tp: p for tp, p in partitions_agreed(bootstrap).items() if tp[0] == topic}
        counts = defaultdict(int)
        for p in now.values():
            counts[p["leader"]] += 1
        return now, counts

    # every broker's metadata catches up with the elections within moments
    wait_for(lambda: sorted(leader_counts()[1]) == sorted(sandbox.broker_ids), 20, what="leaders spread")
    now, counts = leader_counts()
    assert sorted(counts) == sorted(sandbox.broker_ids)
    assert max(counts.values()) - min(counts.values()) <= 1
    assert {tp[1]: sorted(p["replicas"]) for tp, p in now.items()} == {i: sorted(s) for i, s in enumerate(sets)}


def test_elect_command(sandbox, bootstrap, unique_topic, tmp_path):
    topic = unique_topic("elect")
    create_topic(bootstrap, topic, 3)
    code, doc, out = leader("elect", "--election-type", "preferred", "--topic", topic, "--bootstrap-server",
                            bootstrap, "--output", "json")
    assert code == 0, out
    assert doc["counts"] == {"elected": 0, "not_needed": 3, "failed": 0}
    code, doc, out = leader("elect", "--election-type", "preferred", "--topic", "no-such-topic",
                            "--bootstrap-server", bootstrap)
    assert code == 2
    f = tmp_path / "e.json"
    f.write_text(json.dumps({"partitions": [{"topic": topic, "partition": 0}, {"topic": topic, "partition": 9}]}))
    code, doc, out = leader("elect", "--election-type", "preferred", "--path-to-json-file", str(f),
                            "--bootstrap-server", bootstrap)
    assert code == 2 and f"{topic}-9" in out
    # unclean without --yes in JSON mode is refused before anything happens
    code, doc, out = leader("elect", "--election-type", "unclean", "--all-topic-partitions",
                            "--bootstrap-server", bootstrap, "--output", "json")
    assert code in (0, 2)
