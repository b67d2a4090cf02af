"""The version matrix: kops' core workflow, as an operator runs it, on a real cluster of each
Kafka version and mode (tests/compat/conftest.py: fixtures ``kafka`` = (mode, version) and
``cluster``, a 6-broker sandbox in racks a,a,b,b,c,c with ZooKeeper or one KRaft controller),
through the real CLI in subprocesses.

What is asserted is the cluster's own state, read with plain confluent-kafka / kafka-python
(tests/cluster/kafka_helpers.py), never kops' reading code: topology, mode and Kafka version
(with ZooKeeper read too where there is one), health, a rebalance plan, a throttled reassignment
with real data (throttles present during the move, gone after) and its verify, cancel mid-move
rolling back, preferred elections and the cron rebalance, demote / restore of a rack, a bounded
``rebalance step``, the rack-maintenance playbook with the rack really down,
ZooKeeper-only options (refused on KRaft, exit 2, nothing changed; ``--via zookeeper`` on
ZooKeeper mode), and ``kops logs merge`` over the version's own state-change (and KRaft
controller) logs. What a version lacks is recorded with ``note`` for docs/compatibility.md.

Topics created here are left in place (the cluster is this module's alone): the last test reads
their history back from the logs. Everything stopped is started again in ``finally``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import jsonschema
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import ConfigResource, ResourceType

from kops.cluster.snapshot import topology_schema
from tests.cluster.kafka_helpers import (
    admin,
    all_in_sync,
    assert_lock_released,
    create_topic,
    delete_topic,
    each_broker_metadata,
    kops,
    leaders,
    ongoing,
    partitions_agreed,
    replicas,
    wait_for,
)

pytestmark = [pytest.mark.cluster, pytest.mark.compat]

RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
REPLICA_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


# ------------------------------------------------------------------------------------------
# helpers (independent of kops' reading code)
# ------------------------------------------------------------------------------------------


@pytest.fixture
def kops_home(tmp_path, monkeypatch):
    home = tmp_path / "kops-home"
    monkeypatch.setenv("KOPS_HOME", str(home))
    monkeypatch.delenv("KOPS_ZOOKEEPER", raising=False)
    return home


def kops_bg(*args: str, out: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "kops", *args], stdout=open(out, "w"),
                            stderr=open(str(out) + ".err", "w"), stdin=subprocess.DEVNULL, env=dict(os.environ))


def broker_throttles(bootstrap: str, brokers) -> dict[int, dict[str, str]]:
    out = {}
    for b in brokers:
        res = ConfigResource(ResourceType.BROKER, str(b))
        entries = admin(bootstrap).describe_configs([res], request_timeout=10)[res].result(15)
        v = {k: entries[k].value for k in RATE_KEYS if k in entries and not entries[k].is_default}
        if v:
            out[b] = v
    return out


def topic_throttles(bootstrap: str, topic: str) -> dict[str, str]:
    res = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin(bootstrap).describe_configs([res])[res].result(20)
    return {k: entries[k].value for k in REPLICA_KEYS if entries[k].value}


def zk_controller(zk_connect: str) -> int:
    """The ZooKeeper-mode controller, from ZooKeeper's /controller (kazoo)."""
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=zk_connect, timeout=10)
    zk.start(timeout=10)
    try:
        return int(json.loads(zk.get("/controller")[0])["brokerid"])
    finally:
        zk.stop()
        zk.close()


def expected_release(version: str) -> str:
    """What kops reports for a broker of ``version``: its ``major.minor``, or the newest release
    kafka-python's table knows, with ``+``, for a newer broker."""
    from kafka.protocol.broker_version_data import BROKER_API_VERSIONS

    major, minor = (int(x) for x in version.split(".")[:2])
    newest = max(BROKER_API_VERSIONS)[:2]
    return f"{newest[0]}.{newest[1]}+" if (major, minor) >= newest else f"{major}.{minor}"


def quorum_leader(bootstrap: str) -> int:
    """The active controller, from DescribeQuorum sent by plain kafka-python (its own
    ``describe_metadata_quorum()`` fails on KRaft before 3.9: kops/cluster/kp_client.py)."""
    from kafka.admin import KafkaAdminClient
    from kafka.protocol.admin import DescribeQuorumRequest

    t = DescribeQuorumRequest.TopicData
    req = DescribeQuorumRequest(topics=[t(topic_name="__cluster_metadata", partitions=[t.PartitionData(partition_index=0)])])
    c = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        return c._manager.run(c._manager.send, req).topics[0].partitions[0].leader_id
    finally:
        c.close()


def write_plan(path: Path, topic: str, assignment: dict[int, list[int]]) -> Path:
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
        for p, r in sorted(assignment.items())]}))
    return path


def same_rack_swap(sb, reps: dict[int, list[int]]) -> dict[int, list[int]]:
    """For each partition, replace its second replica by the other broker of the same rack."""
    out = {}
    for p, r in reps.items():
        old = r[1]
        new = next(b for b in sb.brokers_in_rack(sb.rack_of(old)) if b not in r)
        out[p] = [new if b == old else b for b in r]
    return out


def json_of(r: subprocess.CompletedProcess) -> dict:
    assert r.stdout.strip(), r.stderr
    return json.loads(r.stdout)


def free_port() -> int:
    from kops.sandbox.procs import free_ports

    return free_ports(1)[0]


# ------------------------------------------------------------------------------------------
# tests (in this order on each version; the last one reads the others' history from the logs)
# ------------------------------------------------------------------------------------------


def test_describe_reads_mode_version_controller_racks_and_health(cluster, kafka, unique_topic, kops_home):
    (mode, version), sb, bs = kafka, cluster, cluster.bootstrap_servers
    topic = unique_topic("wf-topo")
    create_topic(bs, topic, partitions=6, rf=3)
    zk = ["--zookeeper", sb.zookeeper_connect] if mode == "zookeeper" else []
    r = kops("cluster", "describe", "--bootstrap-server", bs, *zk, "--output", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, topology_schema())
    assert doc["mode"] == mode
    # ZooKeeper mode: the Admin API and ZooKeeper agree (kops reports every disagreement)
    assert not doc.get("notes"), doc.get("notes")
    if mode == "kraft":  # the active controller is the metadata quorum's leader: a controller node
        assert doc["controller"] == quorum_leader(bs) and doc["controller"] in sb.controller_ids
    else:
        assert doc["controller"] == zk_controller(sb.zookeeper_connect) and doc["controller"] in sb.broker_ids
    assert {b["id"]: (b["rack"], b["alive"]) for b in doc["brokers"]} == {b: (sb.rack_of(b), True) for b in sb.broker_ids}
    # the Kafka release each broker runs, from its own ApiVersions answer
    assert {b["kafka_version"] for b in doc["brokers"]} == {expected_release(version)}
    t = next(t for t in doc["topics"] if t["name"] == topic)
    assert t["configs"]["min.insync.replicas"] == "2"
    for p in t["partitions"]:  # Kafka's rack-aware placement: 3 replicas in 3 racks, all in sync
        assert len({sb.rack_of(b) for b in p["replicas"]}) == 3 and sorted(p["isr"]) == sorted(p["replicas"])

    human = kops("cluster", "describe", "--bootstrap-server", bs, "--topic", topic)
    assert human.returncode == 0, human.stderr
    head = human.stdout.splitlines()[0]
    assert f"mode {mode}" in head and f"kafka {expected_release(version)}" in head, head
    assert f"controller {doc['controller']}" in head, head

    r = kops("cluster", "health", "--bootstrap-server", bs, *zk, "--output", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert json_of(r)["healthy"]


def test_cordon_sets_kafkas_own_where_the_version_has_one(cluster, kafka, unique_topic, kops_home, note):
    """``kops broker cordon``: kops' record everywhere; Kafka's own cordon (KIP-1066,
    ``cordoned.log.dirs=*``) where the version has it (KRaft, 4.3+), so that a topic Kafka places
    avoids the broker; elsewhere the answer names the version it needs. Uncordon lifts both."""
    (mode, version), bs = kafka, cluster.bootstrap_servers
    own = mode == "kraft" and tuple(int(x) for x in version.split(".")[:2]) >= (4, 3)
    r = kops("broker", "cordon", "5", "--reason", "compat", "--bootstrap-server", bs, "--output", "json")
    try:
        assert r.returncode == 0, r.stdout + r.stderr
        said = json_of(r)["kafka_cordon"]["5"]
        if own:
            assert said == "cordoned.log.dirs=*", said
            # the broker tells the controller at its next heartbeat (broker.heartbeat.interval.ms, 2 s):
            # from then on, a topic Kafka places avoids it
            placed: list[dict[int, list[int]]] = []

            def kafka_avoids_it() -> bool:
                topic = unique_topic("wf-cordon")
                placed.append(create_topic(bs, topic, partitions=12, rf=2))
                delete_topic(bs, topic)
                return all(5 not in rs for rs in placed[-1].values())

            wait_for(kafka_avoids_it, 30, 1.0, "Kafka's placement of a new topic avoids cordoned broker 5")
        else:
            assert "needs Kafka 4.3" in said, said
            note("no cordon of Kafka's own (KIP-1066 needs KRaft 4.3+): `broker cordon` keeps kops' plans "
                 "off the broker; topics created by others may still use it")
        r = kops("cluster", "describe", "--bootstrap-server", bs, "--output", "json")
        assert [b["id"] for b in json_of(r)["brokers"] if b.get("cordoned")] == [5]
    finally:
        r = kops("broker", "uncordon", "5", "--bootstrap-server", bs, "--output", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert json_of(r)["changed"] == [5]
    if own:
        assert json_of(r)["kafka_cordon"]["5"] == "cordoned.log.dirs deleted"
    r = kops("cluster", "describe", "--bootstrap-server", bs, "--output", "json")
    assert not [b["id"] for b in json_of(r)["brokers"] if b.get("cordoned")]


def test_zookeeper_only_options_refused_nothing_changed(cluster, kafka, unique_topic, tmp_path, kops_home):
    if kafka[0] != "kraft":
        pytest.skip("ZooKeeper mode: --zookeeper and --via zookeeper apply (test_reassignment_through_zookeeper)")
    sb, bs = cluster, cluster.bootstrap_servers
    topic = unique_topic("wf-nozk")
    before = create_topic(bs, topic, partitions=2, rf=3, mb_per_partition=1)
    plan = write_plan(tmp_path / "plan.json", topic, same_rack_swap(sb, before))
    leaders_before = leaders(bs, topic)
    zk = f"127.0.0.1:{free_port()}"  # nothing listens there: the refusal comes before any ZooKeeper access
    attempts = [
        ("reassign", "execute", "--reassignment-json-file", str(plan), "--via", "zookeeper", "--yes"),
        ("reassign", "execute", "--reassignment-json-file", str(plan), "--via", "zookeeper", "--zookeeper", zk, "--yes"),
        ("reassign", "execute", "--reassignment-json-file", str(plan), "--zookeeper", zk, "--yes"),
        ("cluster", "describe", "--zookeeper", zk),
        ("leader", "rebalance", "--zookeeper", zk),
        ("leader", "demote", "--rack", "b", "--zookeeper", zk),
        ("playbook", "run", "rack-maintenance", "--param", "rack=b", "--zookeeper", zk),
    ]
    for args in attempts:
        r = kops(*args, "--bootstrap-server", bs, timeout=60)
        err = " ".join(r.stderr.split())
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        if "--via" in args and "--zookeeper" not in args:  # judged before connecting (the input layer)
            assert err.startswith("error: --via zookeeper needs --zookeeper HOST:PORT"), (args, err)
            continue
        assert "runs in KRaft mode" in err and "no ZooKeeper" in err and "Nothing was changed" in err, (args, err)
        flag = "--via zookeeper" if "--via" in args else "--zookeeper"
        assert err.startswith(f"error: {flag}:"), (args, err)
    # nothing changed: no move, no throttle, no lock, no leadership change, no run state
    assert replicas(bs, topic) == before and not ongoing(bs)
    assert leaders(bs, topic) == leaders_before
    assert broker_throttles(bs, sb.broker_ids) == {} and topic_throttles(bs, topic) == {}
    assert_lock_released(bs)
    assert not list(kops_home.rglob("*.json"))


def test_reassignment_through_zookeeper(cluster, kafka, unique_topic, tmp_path, kops_home):
    """``--via zookeeper``: the plan written to /admin/reassign_partitions, as Kafka's tool did
    before KIP-455, with kops' throttles and journal in ZooKeeper."""
    if kafka[0] != "zookeeper":
        pytest.skip("KRaft: no ZooKeeper (--via zookeeper is refused: test_zookeeper_only_options_refused_nothing_changed)")
    sb, bs = cluster, cluster.bootstrap_servers
    topic = unique_topic("wf-viazk")
    before = create_topic(bs, topic, partitions=2, rf=3, mb_per_partition=1)
    target = same_rack_swap(sb, before)
    plan = write_plan(tmp_path / "plan.json", topic, target)
    r = kops("reassign", "execute", "--reassignment-json-file", str(plan), "--via", "zookeeper",
             "--zookeeper", sb.zookeeper_connect, "--throttle", "20000000", "--wait", "--yes", "--poll-interval", "1",
             "--bootstrap-server", bs, "--output", "json", timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json_of(r)
    assert doc["state"] == "complete" and doc["throttles_left"] == []
    assert replicas(bs, topic) == target and not ongoing(bs)
    assert topic_throttles(bs, topic) == {} and broker_throttles(bs, sb.broker_ids) == {}


def test_plan_rebalance_of_a_stacked_topic(cluster, kafka, unique_topic, tmp_path, kops_home, note):
    """``kops plan rebalance`` on the live cluster, and the dry run of its plan (every check an
    execution makes first, the disk check among them)."""
    version, sb, bs = kafka[1], cluster, cluster.bootstrap_servers
    topic = unique_topic("wf-stack")
    ids = sorted(sb.broker_ids)
    stacked = [ids[0], ids[2], ids[4]]  # one broker per rack: rack-safe, but all on three brokers
    create_topic(bs, topic, min_isr=2, mb_per_partition=0.2, assignment={p: stacked for p in range(6)})
    wait_for(lambda: all_in_sync(bs), 60, what="cluster in sync")
    r = kops("plan", "rebalance", "--bootstrap-server", bs, "--output", "json", timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json_of(r)
    moves = {(p["topic"], p["partition"]): p["replicas"] for p in doc["plan"]["partitions"]}
    assert any(t == topic for t, _ in moves), "the stacked topic is not spread"
    for (t, _p), reps in moves.items():  # every planned partition rack-safe
        assert len(set(reps)) == len(reps) and len({sb.rack_of(b) for b in reps}) == min(3, len(reps)), (t, reps)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(doc["plan"]))
    r = kops("reassign", "execute", "--reassignment-json-file", str(plan), "--throttle", "50000000", "--dry-run",
             "--bootstrap-server", bs, "--output", "json", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    disk = json_of(r)["disk_check"]
    if tuple(int(x) for x in version.split(".")[:2]) < (3, 3):
        assert not disk["figures"], disk
        assert any("KIP-827" in w and "Kafka 3.3 or later" in w and "not checked" in w for w in disk["warnings"]), disk
        note("the disk-fit check is skipped, with a warning naming Kafka 3.3: brokers before 3.3 do not report "
             "their log dirs' total and usable bytes (KIP-827)")
    else:  # every destination's volume checked
        assert disk["figures"] and not [w for w in disk["warnings"] if "KIP-827" in w], disk
    assert not ongoing(bs) and replicas(bs, topic) == {p: stacked for p in range(6)}  # a dry run changes nothing


def test_throttled_reassignment_execute_and_verify(cluster, unique_topic, tmp_path, kops_home):
    sb, bs = cluster, cluster.bootstrap_servers
    topic = unique_topic("wf-move")
    before = create_topic(bs, topic, partitions=4, rf=3, mb_per_partition=6)  # 24 MB, 72 MB with replicas
    target = same_rack_swap(sb, before)
    plan = write_plan(tmp_path / "plan.json", topic, target)
    sources = sorted({b for r in before.values() for b in r})
    dests = sorted({b for p in before for b in target[p] if b not in before[p]})
    rate = 1_500_000

    t0 = time.monotonic()
    proc = kops_bg("reassign", "execute", "--reassignment-json-file", str(plan), "--throttle", str(rate),
                   "--wait", "--yes", "--poll-interval", "1", "--bootstrap-server", bs, "--output", "json",
                   out=tmp_path / "exec.out")
    try:
        want_follower = {f"{p}:{b}" for p in before for b in target[p] if b not in before[p]}
        want_leader = {f"{p}:{b}" for p, r in before.items() for b in r}

        def throttled():  # dynamic configs reach the brokers asynchronously
            tt = topic_throttles(bs, topic)
            bt = broker_throttles(bs, sb.broker_ids)
            ok = (set(tt.get("follower.replication.throttled.replicas", "").split(",")) == want_follower
                  and set(tt.get("leader.replication.throttled.replicas", "").split(",")) == want_leader
                  and all(bt.get(b, {}).get("follower.replication.throttled.rate") == str(rate) for b in dests)
                  and all(bt.get(b, {}).get("leader.replication.throttled.rate") == str(rate) for b in sources))
            return bt if ok else None

        during = wait_for(throttled, 30, 0.3, "kops' throttles during the move")
        for b in set(sb.broker_ids) - set(dests):  # the follower rate only where data arrives
            assert "follower.replication.throttled.rate" not in during.get(b, {})
        # KRaft brokers apply the rates within milliseconds: they can show before kops, which
        # submits once it has seen them applied, has submitted the moves
        wait_for(lambda: {tp for tp in ongoing(bs) if tp[0] == topic} or None, 15, 0.1, "moves in flight")
        assert proc.wait(180) == 0, (tmp_path / "exec.out.err").read_text()
    finally:
        if proc.poll() is None:  # failed above: leave no execution behind for the next tests
            proc.kill()
            proc.wait(10)
            kops("reassign", "cancel", "--bootstrap-server", bs)
    elapsed = time.monotonic() - t0
    doc = json.loads((tmp_path / "exec.out").read_text())
    assert doc["state"] == "complete" and doc["finished"] and doc["throttles_left"] == []
    assert doc["progress"] == {"done": 4}
    assert replicas(bs, topic) == target and not ongoing(bs)
    assert topic_throttles(bs, topic) == {} and broker_throttles(bs, sb.broker_ids) == {}
    assert_lock_released(bs)
    # 6 MB into each destination at 1.5 MB/s: the throttle really held the copy back
    assert elapsed > 3.5, elapsed
    r = kops("reassign", "verify", "--reassignment-json-file", str(plan), "--bootstrap-server", bs)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("is completed.") == 4


def test_cancel_mid_move_rolls_back(cluster, unique_topic, tmp_path, kops_home):
    sb, bs = cluster, cluster.bootstrap_servers
    topic = unique_topic("wf-cancel")
    before = create_topic(bs, topic, partitions=2, rf=3, mb_per_partition=4)
    target = same_rack_swap(sb, before)
    plan = write_plan(tmp_path / "plan.json", topic, target)
    try:
        r = kops("reassign", "execute", "--reassignment-json-file", str(plan), "--throttle", "50000", "--yes",
                 "--bootstrap-server", bs, "--output", "json")
        assert r.returncode == 0, r.stderr
        exec_id = json_of(r)["execution_id"]
        assert {(topic, 0), (topic, 1)} <= set(ongoing(bs))
        r = kops("reassign", "verify", "--reassignment-json-file", str(plan), "--bootstrap-server", bs, "--output", "json")
        assert r.returncode == 3, r.stderr
        doc = json_of(r)
        assert doc["result"] == "in_progress" and doc["execution_id"] == exec_id
        assert broker_throttles(bs, sb.broker_ids), "throttled while moving"

        r = kops("reassign", "cancel", "--bootstrap-server", bs, "--output", "json")
        assert r.returncode == 0, r.stderr
        doc = json_of(r)
        assert doc["cancelled"] == [f"{topic}-0", f"{topic}-1"] and doc["execution_state"] == "cancelled"
        assert not ongoing(bs)
        assert replicas(bs, topic) == before  # original replicas, original order
        assert topic_throttles(bs, topic) == {} and broker_throttles(bs, sb.broker_ids) == {}
        assert_lock_released(bs)
        r = kops("reassign", "verify", "--reassignment-json-file", str(write_plan(tmp_path / "rb.json", topic, before)),
                 "--bootstrap-server", bs)
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        kops("reassign", "cancel", "--bootstrap-server", bs)


def _election_seen(bs: str, tp: tuple[str, int], elect: dict, before: dict) -> str:
    """What the election answered and what every broker's metadata says of ``tp`` now, for a
    failure's message."""
    seen = {}
    try:
        for b, md in each_broker_metadata(admin(bs), topic=tp[0]).items():
            pm = md.topics[tp[0]].partitions.get(tp[1])
            seen[b] = {"leader": pm.leader, "isr": sorted(pm.isrs), "controller": md.controller_id} if pm else None
    except Exception as e:  # noqa: BLE001 - a diagnostic: whatever the brokers said
        seen["error"] = repr(e)
    return json.dumps({"election": elect, "before": before.get(tp), "per_broker_now": seen}, default=str)[-6000:]


def test_preferred_election_and_cron_rebalance(cluster, unique_topic, kops_home):
    sb, bs = cluster, cluster.bootstrap_servers
    topic = unique_topic("wf-lead")
    create_topic(bs, topic, partitions=12, rf=3)
    victim = sb.broker_ids[1]
    mine = sorted(tp for tp, p in partitions_agreed(bs).items() if tp[0] == topic and p["replicas"][0] == victim)
    assert mine
    try:
        sb.stop(victim)  # controlled shutdown: the controller moves its leaders away
        now = partitions_agreed(bs)
        assert all(now[tp]["leader"] not in (victim, -1) for tp in mine)
        r = kops("cluster", "health", "--bootstrap-server", bs, "--output", "json")
        assert r.returncode == 3, r.stdout + r.stderr
        assert [f["broker"] for f in json_of(r)["findings"] if f["check"] == "broker_down"] == [victim]
        # balance cannot be reached while the preferred replica is down: exit 3, the reason named
        r = kops("leader", "rebalance", "--bootstrap-server", bs, "--output", "json")
        assert r.returncode == 3, r.stdout + r.stderr
        doc = json_of(r)
        assert victim in doc["unreachable_brokers"]
        assert any(b["reason"] == f"preferred replica {victim} is down" for b in doc["blocked"])
    finally:
        sb.start(victim)
    wait_for(lambda: all_in_sync(bs), 90, what="ISR complete after the restart")
    before = partitions_agreed(bs)
    assert all(before[tp]["leader"] != victim for tp in mine)  # the sandbox's controller does not rebalance

    # kops applies its own threshold on KRaft too (the KRaft controller ignores the percentage):
    # at 100 % no broker is strictly above it, so nothing is elected
    r = kops("leader", "rebalance", "--imbalance-threshold", "100", "--bootstrap-server", bs, "--output", "json")
    assert r.returncode == 0 and json_of(r)["status"] == "balanced", r.stdout + r.stderr
    assert {tp: p["leader"] for tp, p in partitions_agreed(bs).items()} == {tp: p["leader"] for tp, p in before.items()}

    # one preferred election by hand
    t, p = mine[0]
    r = kops("leader", "elect", "--election-type", "preferred", "--topic", t, "--partition", str(p),
             "--bootstrap-server", bs, "--output", "json")
    assert r.returncode == 0, r.stderr
    elect = json_of(r)
    # "not needed" here (once on 3.9.2, stop 52; once on 2.8.2 in the cron run below, stop 50)
    # says the controller already had the preferred replica as leader while every broker's
    # metadata said otherwise, or that a first request was answered late (then "resent"): what
    # each broker and the controller said is in the message, to find which. A first request
    # answered too late (zookeeper 3.3.2 under load: no answer within 60 s, "resent") counts as
    # elected since kops read that the partition needed it before sending
    assert elect["counts"] == {"elected": 1, "not_needed": 0, "failed": 0}, _election_seen(bs, (t, p), elect, before)
    wait_for(lambda: partitions_agreed(bs)[(t, p)]["leader"] == victim, 20, what="the elected leader")

    # the cron run elects the rest; a second run has nothing to do
    r = kops("leader", "rebalance", "--bootstrap-server", bs, "--output", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json_of(r)
    done = doc["elections"]["counts"]
    assert doc["status"] == "elected" and done["failed"] == 0, doc["elections"]
    # a partition whose preferred replica leads by the time the controller gets the request is
    # answered ELECTION_NOT_NEEDED (seen once on 2.8.2, stop 50: 0 elected, cause not found; a
    # request sent again after a lost answer would do it: the elections' "resent" names any)
    assert done["elected"] + done["not_needed"] >= len(mine) - 1, doc["elections"]
    after = wait_for(lambda: (lambda n: n if all(n[tp]["leader"] == victim for tp in mine) else None)(partitions_agreed(bs)),
                     20, what="leaders back on the preferred broker")
    # a preferred leader is never moved away
    assert all(after[tp]["leader"] == q["leader"] for tp, q in before.items() if q["leader"] == q["replicas"][0])
    r = kops("leader", "rebalance", "--bootstrap-server", bs)
    assert r.returncode == 0 and "balanced" in r.stdout + r.stderr, r.stdout + r.stderr


def test_rebalance_asks_the_controller_when_the_preferred_replica_is_out_of_the_isr(cluster, unique_topic, kops_home):
    """The metadata kops reads can lag the controller, so a live preferred replica out of the ISR
    is asked for too; the controller (ZooKeeper-mode or KRaft, of this version) refuses it and
    kops reports it blocked (exit 3), not failed."""
    from tests.cluster.test_leader import check_out_of_isr_ask

    check_out_of_isr_ask(cluster, cluster.bootstrap_servers, unique_topic("wf-outisr"))


def test_demote_and_restore_a_rack(cluster, unique_topic, kops_home):
    sb, bs = cluster, cluster.bootstrap_servers
    topic = unique_topic("wf-demote")
    create_topic(bs, topic, partitions=12, rf=3)
    wait_for(lambda: all_in_sync(bs), 60, what="cluster in sync")
    rack = "b"
    on_rack = set(sb.brokers_in_rack(rack))
    before = partitions_agreed(bs)
    movable = {tp for tp, p in before.items() if set(p["replicas"]) - on_rack}
    assert any(before[tp]["leader"] in on_rack for tp in movable)

    r = kops("leader", "demote", "--rack", rack, "--bootstrap-server", bs, "--output", "json")
    assert r.returncode == (0 if movable == set(before) else 3), r.stdout + r.stderr
    now = wait_for(lambda: (lambda n: n if all(n[tp]["leader"] not in on_rack for tp in movable) else None)(partitions_agreed(bs)),
                   20, what="no leader on the rack")
    assert all(p["leader"] >= 0 for p in now.values()), "no offline partition"
    assert {tp: sorted(p["replicas"]) for tp, p in now.items()} == {tp: sorted(p["replicas"]) for tp, p in before.items()}
    assert all(now[tp]["replicas"][0] not in on_rack for tp in movable)

    r = kops("leader", "restore", "--rack", rack, "--bootstrap-server", bs, "--output", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    led = {tp for tp in movable if before[tp]["leader"] == before[tp]["replicas"][0]}  # by their preferred replica
    back = wait_for(lambda: (lambda n: n if all(n[tp]["leader"] == n[tp]["replicas"][0] for tp in led) else None)(
        partitions_agreed(bs)), 30, what="preferred leaders back")
    assert {tp: p["replicas"] for tp, p in back.items()} == {tp: p["replicas"] for tp, p in before.items()}
    assert any(p["leader"] in on_rack for p in back.values())


def test_rebalance_step_moves_a_bounded_step(cluster, unique_topic, kops_home):
    """The cron job's bounded step on a cluster with a topic stacked on two brokers: it moves at
    most --max-moves replicas under its throttle, finishes them, lifts its throttles."""
    sb, bs = cluster, cluster.bootstrap_servers
    topic = unique_topic("wf-step")
    ids = sorted(sb.broker_ids)
    create_topic(bs, topic, min_isr=1, mb_per_partition=0.2, assignment={p: [ids[0], ids[2]] for p in range(8)})
    wait_for(lambda: all_in_sync(bs), 60, what="cluster in sync")  # a step steps aside while under-replicated
    before = partitions_agreed(bs)
    r = kops("rebalance", "step", "--max-moves", "4", "--throttle", "50M", "--bootstrap-server", bs, "--output", "json",
             timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json_of(r)
    assert doc["status"] == "moved", doc
    assert 0 < doc["replicas_moved"] <= 4
    assert doc["execution"]["state"] == "complete" and doc["execution"]["throttles_left"] == []
    after = partitions_agreed(bs)
    moved = sum(len(set(after[tp]["replicas"]) - set(p["replicas"])) for tp, p in before.items() if tp in after)
    assert moved == doc["replicas_moved"]
    assert not ongoing(bs) and broker_throttles(bs, sb.broker_ids) == {}
    assert_lock_released(bs)


def test_rack_maintenance_playbook_with_the_rack_down(cluster, unique_topic, kops_home):
    sb, bs = cluster, cluster.bootstrap_servers
    topic = unique_topic("wf-maint")
    create_topic(bs, topic, partitions=6, rf=3, min_isr=2)
    rack = sb.rack_of(4)
    on_rack = set(sb.brokers_in_rack(rack))
    acked: set[str] = set()
    errors: list[str] = []
    offline: list[str] = []
    stop = threading.Event()

    def produce():
        p = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True,
                      "message.timeout.ms": 120000, "linger.ms": 5})

        def cb(err, msg):
            (errors.append(str(err)) if err is not None else acked.add(msg.value().decode()))

        i = 0
        while not stop.is_set():
            p.produce(topic, value=f"m{i}".encode(), on_delivery=cb)
            p.poll(0.02)
            i += 1
        p.flush(120)

    def monitor():
        while not stop.is_set():
            try:
                md = admin(bs).list_topics(timeout=5)
                offline.extend(f"{t}-{q}" for t, tm in md.topics.items() for q, pm in tm.partitions.items() if pm.leader < 0)
            except Exception:  # a metadata hiccup is not an offline partition
                pass
            time.sleep(0.3)

    threads = [threading.Thread(target=produce, daemon=True), threading.Thread(target=monitor, daemon=True)]
    for th in threads:
        th.start()
    try:
        # no terminal: demote, wait until the rack leads nothing, stop at the operator pause (exit 3)
        r = kops("playbook", "run", "rack-maintenance", "--param", f"rack={rack}", "--output", "json",
                 "--bootstrap-server", bs)
        assert r.returncode == 3, r.stdout + r.stderr
        rep = json_of(r)
        assert [s["status"] for s in rep["steps"][:4]] == ["done", "done", "done", "paused"]
        assert not [tp for tp, ldr in leaders(bs).items() if ldr in on_rack], "leaders left on the rack"
        sb.stop(rack=rack)
        try:
            time.sleep(3)  # producers keep writing with the rack down
        finally:
            sb.start(rack=rack)
        r = kops("playbook", "run", "rack-maintenance", "--resume", rep["run_id"], "--output", "json",
                 "--bootstrap-server", bs)
        assert r.returncode == 0, r.stdout + r.stderr
        rep = json_of(r)
        assert rep["status"] == "done" and all(s["status"] == "done" for s in rep["steps"])
        assert rep["leaders_moved"] > 0
    finally:
        stop.set()
        for th in threads:
            th.join(60)
    assert not offline, f"offline partitions during maintenance: {sorted(set(offline))[:10]}"
    assert not errors, errors[:5]
    assert len(acked) > 100
    c = Consumer({"bootstrap.servers": bs, "group.id": f"check-{topic}", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    seen: set[str] = set()
    idle = time.time()
    while time.time() - idle < 6 and not acked <= seen:
        m = c.poll(0.5)
        if m is not None and not m.error():
            seen.add(m.value().decode())
            idle = time.time()
    c.close()
    assert acked <= seen, f"{len(acked - seen)} acknowledged messages lost"
    # leadership restored: every partition of the topic is led by its preferred replica again
    reps = replicas(bs, topic)
    wait_for(lambda: {p: leaders(bs, topic)[(topic, p)] for p in reps} == {p: r[0] for p, r in reps.items()},
             20, what="preferred leaders of the topic")
    assert any(r[0] in on_rack for r in reps.values())


@pytest.fixture(scope="module")
def spark():
    from kops.pipeline.session import get_spark

    return get_spark("local[2]", shuffle_partitions=1, input_bytes=0)  # one session for the whole run; small logs: the small-input JVM


def test_logs_merge_reads_this_versions_logs(cluster, kafka, spark, tmp_path, note):
    """`kops logs merge` and the leadership timeline over every node's state-change.log and
    controller.log, after the tests above (their formats differ across Kafka versions): every line
    parsed and classified, attributed to the node that wrote it, and the last leader in the
    timeline of each of this module's partitions is its leader now. (In-process: one Spark
    session for the run.)"""
    from typer.testing import CliRunner

    from kops.cli.logs import app
    from kops.pipeline import statechange as sc
    from kops.pipeline import timeline as tl

    mode, sb, bs = kafka[0], cluster, cluster.bootstrap_servers
    now = partitions_agreed(bs)
    snap = tmp_path / "logs"
    for node in [*sb.broker_ids, *sb.controller_ids]:
        src = sb.config.log_dir(node)
        d = snap / (f"broker-{node}" if node in sb.broker_ids else f"controller-{node}")
        d.mkdir(parents=True)
        for f in [*src.glob("state-change.log*"), *src.glob("controller.log*")]:
            shutil.copy(f, d / f.name)
    out, summary = tmp_path / "merged.jsonl", tmp_path / "summary.json"
    r = CliRunner().invoke(app, ["merge", "--logs", str(snap), "--controller-log", "--format", "json",
                                 "--output", str(out), "--summary-json", str(summary), "-q"])
    assert r.exit_code == 0, r.output
    s = json.loads(summary.read_text())["summary"]
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert s["unparsed_lines"] == 0 and s["written"] == len(recs) > 0
    for x in recs:  # attributed to the node whose file it is
        assert str(x["broker"]) == x["file"].split("/")[-2].split("-")[1], x
    sc_recs = [x for x in recs if "/state-change.log" in x["file"]]
    assert sc_recs and not [x["message"] for x in sc_recs if x["event"] == "other"][:5]
    events = {x["event"] for x in sc_recs}
    if mode == "kraft":
        assert {x["broker"] for x in sc_recs} <= set(sb.broker_ids)  # a KRaft controller writes none
        ctl = [x for x in recs if x["broker"] in sb.controller_ids]
        assert {"partition_create", "reassignment", "topic_create", "broker_change"} <= {x["event"] for x in ctl}
    else:  # the ZooKeeper-mode controller's state machines, and the brokers' become-leader lines
        assert {"partition_state", "leader_change", "become_leader", "become_follower"} <= events, sorted(events)
    note(f"{s['written']} records from {len({x['file'] for x in recs})} files; events: {', '.join(sorted(events))}")

    t = tl.build_timeline(spark, sc.expand_sources([str(snap)], include_controller=True),
                          sc.Filters(topic_regex="wf-.*"), sc.MergeStats())
    last: dict[tuple[str, int], tuple[str, int]] = {}
    for row in t.leadership.collect():
        tp = (row.topic, row.partition)
        if tp not in last or row.ts >= last[tp][0]:
            last[tp] = (row.ts, row.leader)
    ours = {tp: p["leader"] for tp, p in now.items() if tp[0].startswith("wf-")}
    assert ours and {tp: last[tp][1] for tp in ours} == ours
