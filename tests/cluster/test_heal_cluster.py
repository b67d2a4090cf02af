"""``kops heal step | status`` on the live sandbox: heal's memory lives in the cluster; a broker
back before its grace gets nothing moved, nor one past it while kops' cron jobs are paused; two brokers down with ``--max-dead-brokers 1`` is an
outage (reported, exit 3, nothing moved); a broker stopped for good is healed, its replicas
re-created on live brokers rack-safe, and the next run has nothing to do; a broker over
``--disk-threshold`` (its disk from a capacity file) is relieved by ``--fix disk_over_threshold``. (Replica counts and
preferred leaders off their band, ``unbalanced``, are judged by tests/unit/test_heal.py and the
demo: here the session's other topics keep the stopped broker "down".)

Heal watches only this module's topics here (``--exclude-topics`` everything else), so that the
session's other tests keep their cluster as they expect it; every stopped broker is restarted.
"""

from __future__ import annotations

import json
import os
import re

import pytest

from tests.cluster.kafka_helpers import assert_lock_released, create_topic, delete_topic, kops, ongoing, wait_for

pytestmark = pytest.mark.cluster

#: heal watches and moves only the topics of this module
ONLY_OURS = "(?!heal-).*"


def _heal(bootstrap: str, *args: str, env: dict[str, str] | None = None, timeout: float = 300) -> tuple[int, dict, str]:
    r = kops("heal", *args, "--bootstrap-server", bootstrap, "--output", "json", timeout=timeout, env=env)
    doc = json.loads(r.stdout) if r.stdout.strip() else {}
    return r.returncode, doc, r.stderr


def _step(bootstrap: str, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict, str]:
    return _heal(bootstrap, "step", "--exclude-topics", ONLY_OURS, *args, env=env)


def _snapshot(bootstrap: str) -> dict:
    r = kops("cluster", "describe", "--bootstrap-server", bootstrap, "--output", "json", timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def _replicas(bootstrap: str, topic: str) -> dict[int, list[int]]:
    snap = _snapshot(bootstrap)
    (t,) = [t for t in snap["topics"] if t["name"] == topic]
    return {p["partition"]: p["replicas"] for p in t["partitions"]}


def _one_per_rack(ids: list[int]) -> dict[int, list[int]]:
    """Six partitions, one replica per rack (a: ids 0-1, b: 2-3, c: 4-5), every broker used,
    replicas and preferred leaders within their balance band (leaders rotate over the racks)."""
    lists = [[ids[p % 2], ids[2 + (p // 2) % 2], ids[4 + (p + 1) % 2]] for p in range(6)]
    return {p: r[p % 3:] + r[:p % 3] for p, r in enumerate(lists)}


def _full_isr(bootstrap: str) -> bool:
    return all(len(p["isr"]) == len(p["replicas"]) for t in _snapshot(bootstrap)["topics"] for p in t["partitions"])


def _anomaly(doc: dict, key: str) -> dict | None:
    return next((a for a in doc.get("anomalies", []) if a["key"] == key), None)


def test_the_memory_is_in_the_cluster_not_on_the_host(sandbox, bootstrap, unique_topic, tmp_path):
    """First-seen times survive a host change: a step from one KOPS_HOME, the status and the
    next step from another see the same anomaly with the same first-seen time."""
    from kops.cluster.config import ClientConfig
    from kops.cluster.connection import Connection
    from kops.ops.heal import memory
    from kops.ops.heal.anomalies import BROKER_FAILURE, IN_GRACE, Anomaly

    # the store itself, through two connections
    a = Anomaly("broker_failure/999", BROKER_FAILURE, "broker 999", "a test record", first_seen=1234.5,
                state=IN_GRACE, brokers=(999,), count=1)
    with Connection(bootstrap, ClientConfig.load(None)) as conn:
        before = memory.load(conn)
        writes = memory.changes(before, memory.records([a], {999: "z"}, None, now=2000.0))
        assert memory.save(conn, writes) == len(writes) >= 1
    with Connection(bootstrap, ClientConfig.load(None)) as conn:
        mem = memory.load(conn)
        assert mem.anomalies["broker_failure/999"] == a and mem.racks[999] == "z"
        memory.save(conn, {"heal/anomaly/broker_failure/999": None})
    with Connection(bootstrap, ClientConfig.load(None)) as conn:
        assert "broker_failure/999" not in memory.load(conn).anomalies

    # through the commands, from two "hosts" (two KOPS_HOMEs)
    ids = sandbox.broker_ids
    topic = unique_topic("heal-mem")
    create_topic(bootstrap, topic, assignment=_one_per_rack(ids))
    host1 = dict(os.environ, KOPS_HOME=str(tmp_path / "host1"))
    host2 = dict(os.environ, KOPS_HOME=str(tmp_path / "host2"))
    victim = ids[0]
    try:
        code, doc, err = _step(bootstrap, env=host1)
        assert code == 0 and doc["status"] == "nothing_to_do", (doc, err)
        sandbox.stop(victim)
        try:
            code, doc, err = _step(bootstrap, "--broker-grace", "1h", env=host1)
            assert code == 0 and doc["status"] == "watching", (doc, err)
            first = _anomaly(doc, f"broker_failure/{victim}")
            assert first is not None and first["state"] == "in_grace", doc
            assert "rack a" in first["detail"], first  # the rack it had, remembered while it was up
            code, st, err = _heal(bootstrap, "status", env=host2)
            assert code == 3, (st, err)
            seen = _anomaly(st, f"broker_failure/{victim}")
            assert seen is not None and seen["first_seen"] == first["first_seen"], (st, first)
            # the recorded run is the one host1 made, its summary with its real duration
            recorded = st["last_run"]
            assert recorded["status"] == "watching", (recorded, doc)
            took = re.search(r"; ([0-9.]+) s$", recorded["summary"])
            assert took and float(took.group(1)) > 0, recorded  # (once written before it was measured)
            code, doc, err = _step(bootstrap, "--broker-grace", "1h", env=host2)
            again = _anomaly(doc, f"broker_failure/{victim}")
            assert again["first_seen"] == first["first_seen"] and again["age_s"] >= first["age_s"], (again, first)
        finally:
            sandbox.start(victim)
        wait_for(lambda: _full_isr(bootstrap), 90, 1, "ISR complete after the restart")
    finally:
        delete_topic(bootstrap, topic)


def test_a_broker_back_before_its_grace_gets_nothing_moved(sandbox, bootstrap, unique_topic):
    ids = sandbox.broker_ids
    topic = unique_topic("heal-back")
    create_topic(bootstrap, topic, assignment=_one_per_rack(ids))
    victim = ids[1]
    try:
        code, doc, err = _step(bootstrap)
        assert code == 0, (doc, err)
        before = _replicas(bootstrap, topic)
        sandbox.stop(victim)
        try:
            code, doc, err = _step(bootstrap, "--broker-grace", "10m")
            assert code == 0 and doc["status"] == "watching" and doc["replicas_moved"] == 0, (doc, err)
            assert _anomaly(doc, f"broker_failure/{victim}")["state"] == "in_grace", doc
            assert _replicas(bootstrap, topic) == before and not ongoing(bootstrap)
            # past its grace but kops' cron jobs paused (a maintenance): nothing moved, said why
            r = kops("rebalance", "pause", "--for", "10m", "--reason", "heal test maintenance",
                     "--bootstrap-server", bootstrap, timeout=60)
            assert r.returncode == 0, r.stderr
            try:
                code, doc, err = _step(bootstrap, "--broker-grace", "0s")
                assert code == 0 and doc["status"] == "stepped_aside" and doc["replicas_moved"] == 0, (doc, err)
                a = _anomaly(doc, f"broker_failure/{victim}")
                assert a["state"] == "refused" and "heal test maintenance" in a["why"], a
                assert _replicas(bootstrap, topic) == before and not ongoing(bootstrap)
            finally:
                kops("rebalance", "unpause", "--bootstrap-server", bootstrap, timeout=60)
        finally:
            sandbox.start(victim)
        wait_for(lambda: _full_isr(bootstrap), 90, 1, "ISR complete after the restart")
        code, doc, err = _step(bootstrap, "--broker-grace", "10m")
        assert code == 0 and doc["status"] == "nothing_to_do", (doc, err)
        (ended,) = [a for a in doc["ended"] if a["key"] == f"broker_failure/{victim}"]
        assert ended["state"] == "cleared" and not ended["fixes"], ended
        assert _replicas(bootstrap, topic) == before
    finally:
        delete_topic(bootstrap, topic)


def test_replicas_off_their_band_are_reported_then_rebalanced_with_fix_unbalanced(sandbox, bootstrap, unique_topic):
    """A goal violation: a topic stacked on three brokers (one per rack) is ``unbalanced``;
    reported by default, mended by bounded rebalance steps with ``--fix unbalanced``."""
    ids = sandbox.broker_ids
    topic = unique_topic("heal-stacked")
    # brokers 0, 2, 4 hold 9 replicas each, 1, 3, 5 hold 3 (band: 6 ± 1)
    heavy, light = [ids[0], ids[2], ids[4]], [ids[1], ids[3], ids[5]]
    create_topic(bootstrap, topic, assignment={p: heavy[p % 3:] + heavy[:p % 3] if p % 4 < 3 else light
                                               for p in range(12)})
    try:
        code, doc, err = _step(bootstrap, "--broker-grace", "0s")
        assert code == 0 and doc["status"] == "watching" and doc["replicas_moved"] == 0, (doc, err)
        found = _anomaly(doc, "unbalanced")
        assert found and found["state"] == "refused" and "not in --fix" in found["why"], doc
        assert set(found["brokers"]) == set(ids), found  # three above the band, three below it
        runs = 0
        while _anomaly(doc, "unbalanced") is not None:
            assert runs < 6, doc
            code, doc, err = _step(bootstrap, "--broker-grace", "0s", "--fix", "unbalanced", "--max-moves", "4",
                                   "--throttle", "10M")
            assert code == 0, (doc, err)
            runs += 1
        assert runs >= 2, "bounded: --max-moves 4 cannot move the 9 replicas it takes at once"
        counts = {b: sum(b in r for r in _replicas(bootstrap, topic).values()) for b in ids}
        assert all(5 <= c <= 7 for c in counts.values()), counts
        assert not ongoing(bootstrap)
        assert_lock_released(bootstrap)
    finally:
        delete_topic(bootstrap, topic)


def test_a_broker_over_the_disk_threshold_is_relieved_with_fix_disk_over_threshold(sandbox, bootstrap, unique_topic,
                                                                                  tmp_path):
    """A goal violation on disks (``--disk-threshold``): a capacity file gives broker 0 a disk
    that what it holds fills to 84 % (the sandbox's brokers share one volume: each one's use is
    the sizes of the replicas it holds, of every topic); heal reports it, then moves this
    module's data off it until it is under 80 %, moving nothing onto it."""
    ids = sandbox.broker_ids
    topic = unique_topic("heal-disk")
    # 12 partitions of 0.5 MB on broker 0 and one broker of each other rack
    create_topic(bootstrap, topic, mb_per_partition=0.5,
                 assignment={p: [ids[0], ids[2 + p % 2], ids[4 + p % 2]] for p in range(12)})
    before = _replicas(bootstrap, topic)

    def held(snap: dict, broker: int) -> int:
        return sum(p.get("size_bytes") or 0 for t in snap["topics"] for p in t["partitions"] if broker in p["replicas"])

    def read_sized() -> dict:
        snap = _snapshot(bootstrap)
        (t,) = [t for t in snap["topics"] if t["name"] == topic]
        assert all(p.get("size_bytes") for p in t["partitions"]), "sizes read"
        return snap

    wait_for(lambda: all(p.get("size_bytes") for t in _snapshot(bootstrap)["topics"] if t["name"] == topic
                         for p in t["partitions"]), 30, 0.5, f"the sizes of {topic}")
    snap = read_sized()
    h = held(snap, ids[0])
    ours = sum(p["size_bytes"] for t in snap["topics"] if t["name"] == topic for p in t["partitions"])
    assert ours / h > 0.06, (ours, h)  # moving this module's data off can bring it under 80 %
    cap = tmp_path / "capacity.json"
    cap.write_text(json.dumps({"brokerCapacities": [
        {"brokerId": "-1", "capacity": {"DISK": "1000000"}},
        {"brokerId": str(ids[0]), "capacity": {"DISK": str(h / 0.84 / 1048576)}}]}))
    disks = ("--disk-threshold", "80", "--capacity-file", str(cap), "--broker-grace", "0s")
    try:
        code, doc, err = _step(bootstrap, *disks)
        assert code == 0 and doc["status"] == "watching" and doc["replicas_moved"] == 0, (doc, err)
        found = _anomaly(doc, f"disk_over_threshold/{ids[0]}")
        assert found and found["state"] == "refused" and "not in --fix" in found["why"], doc
        # (84 % as sized by the snapshot; the journal's own records may have grown a little since)
        assert 83 <= float(re.search(r"uses ([\d.]+)% of its disk", found["detail"]).group(1)) <= 85, found
        assert doc["settings"]["disk_threshold_pct"] == 80.0
        runs = 0
        while _anomaly(doc, f"disk_over_threshold/{ids[0]}") is not None:
            assert runs < 4, doc
            code, doc, err = _step(bootstrap, *disks, "--fix", "disk_over_threshold", "--throttle", "20M")
            assert code == 0, (doc, err)
            runs += 1
        assert [a for a in doc["ended"] if a["key"] == f"disk_over_threshold/{ids[0]}"][0]["state"] == "fixed", doc
        after = _replicas(bootstrap, topic)
        assert sum(ids[0] in r for r in after.values()) < 12
        assert not [p for p, r in after.items() if ids[0] in r and ids[0] not in before[p]], after
        assert held(read_sized(), ids[0]) < 0.8 * h / 0.84
        assert not ongoing(bootstrap)
        assert_lock_released(bootstrap)
    finally:
        delete_topic(bootstrap, topic)


def test_two_brokers_down_is_an_outage_nothing_moved(sandbox, bootstrap, unique_topic):
    ids = sandbox.broker_ids
    topic = unique_topic("heal-outage")
    create_topic(bootstrap, topic, assignment=_one_per_rack(ids))
    victims = [ids[2], ids[4]]  # racks b and c
    try:
        before = _replicas(bootstrap, topic)
        sandbox.stop(brokers=victims)
        try:
            code, doc, err = _step(bootstrap, "--broker-grace", "0s", "--max-dead-brokers", "1")
            assert code == 3 and doc["status"] == "refused" and doc["replicas_moved"] == 0, (doc, err)
            outage = _anomaly(doc, "too_much_down")
            assert outage is not None and outage["state"] == "refused", doc
            assert "not a job for automation" in doc["reason"], doc
            for v in victims:
                a = _anomaly(doc, f"broker_failure/{v}")
                assert a["state"] == "refused" and "too much down" in a["why"], a
            assert _replicas(bootstrap, topic) == before and not ongoing(bootstrap)
            assert "nothing moved" in _heal_line(bootstrap, "--broker-grace", "0s")
        finally:
            sandbox.start(brokers=victims)
        wait_for(lambda: _full_isr(bootstrap), 90, 1, "ISR complete after the restart")
    finally:
        delete_topic(bootstrap, topic)


def _heal_line(bootstrap: str, *args: str) -> str:
    """The one summary line a cron log gets (no --output json)."""
    r = kops("heal", "step", "--exclude-topics", ONLY_OURS, *args, "--bootstrap-server", bootstrap, timeout=300)
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 3 and r.stdout == "" and len(lines) == 1, (r.stdout, r.stderr)
    return lines[0]


def test_a_broker_lost_for_good_is_healed_rack_safe(sandbox, bootstrap, unique_topic, tmp_path):
    ids = sandbox.broker_ids
    rack = {ids[0]: "a", ids[1]: "a", ids[2]: "b", ids[3]: "b", ids[4]: "c", ids[5]: "c"}
    topic = unique_topic("heal-lost")
    create_topic(bootstrap, topic, assignment=_one_per_rack(ids))
    victim = ids[5]
    metrics = tmp_path / "heal.prom"
    try:
        code, doc, err = _step(bootstrap)  # heal sees the victim registered (its rack) before it dies
        assert code == 0, (doc, err)
        before = _replicas(bootstrap, topic)
        lost = sorted(p for p, r in before.items() if victim in r)
        assert lost
        sandbox.stop(victim)
        try:
            # a dry run: the step it would take, nothing changed (not even heal's memory)
            code, doc, err = _step(bootstrap, "--broker-grace", "0s", "--max-moves", "2", "--dry-run")
            assert code == 0 and doc["status"] == "dry_run" and doc["records_written"] == 0, (doc, err)
            assert 0 < doc["replicas_moved"] <= 2 and doc["plan"]["partitions"], doc
            assert _replicas(bootstrap, topic) == before and not ongoing(bootstrap)
            events = tmp_path / "events.jsonl"
            code, doc, err = _step(bootstrap, "--broker-grace", "0s", "--max-moves", "2", "--throttle", "10M",
                                   "--metrics-file", str(metrics), "--notify-command", f"cat >> {events}; echo >> {events}")
            assert code == 0 and doc["status"] == "moved" and not doc.get("notes"), (doc, err)
            told = [json.loads(x) for x in events.read_text().splitlines() if x.strip()]
            assert [(e["key"], e["event"], e["state"]) for e in told] == [
                (f"broker_failure/{victim}", "new", "fixing")], told
            assert 0 < doc["replicas_moved"] <= 2 and doc["fix"]["goal"] == {"kind": "decommission", "brokers": [victim]}
            assert _anomaly(doc, f"broker_failure/{victim}")["state"] == "fixing"
            assert "kops_heal_step_replicas_moved" in metrics.read_text()
            runs = 1
            # cron runs until the failure is fixed
            while not any(a["key"] == f"broker_failure/{victim}" for a in doc["ended"]):
                assert runs < len(lost) + 2, doc
                code, doc, err = _step(bootstrap, "--broker-grace", "0s", "--max-moves", "2", "--throttle", "10M")
                assert code == 0, (doc, err)
                runs += 1
            (ended,) = [a for a in doc["ended"] if a["key"] == f"broker_failure/{victim}"]
            assert ended["state"] == "fixed" and ended["fixes"], ended
            after = _replicas(bootstrap, topic)
            for p, reps in after.items():
                assert victim not in reps and len(reps) == 3, (p, reps)
                assert sorted(rack[b] for b in reps) == ["a", "b", "c"], (p, reps)  # rack-safe
                if p in lost:  # its own rack: the victim's sibling in rack c
                    assert set(reps) - set(before[p]) == {ids[4]}, (p, before[p], reps)
                else:
                    assert reps == before[p]
            assert not ongoing(bootstrap)
            assert_lock_released(bootstrap)
            # the next run: nothing to do (the victim's sibling holds twice what the others do, but
            # balance is not judged while a broker holding replicas is down: the victim still
            # holds the session's other topics'); the status keeps the history of the fix
            code, doc, err = _step(bootstrap, "--broker-grace", "0s")
            assert code == 0 and doc["status"] == "nothing_to_do" and not doc["anomalies"], (doc, err)
            code, st, err = _heal(bootstrap, "status")
            (hist,) = [a for a in st["history"] if a["key"] == f"broker_failure/{victim}"]
            assert hist["state"] == "fixed" and sum(f["replicas_moved"] for f in hist["fixes"]) >= len(lost), hist
            assert all(f["execution_id"] for f in hist["fixes"]), hist
            r = kops("heal", "status", "--bootstrap-server", bootstrap, timeout=120)
            assert r.returncode == 0 and f"broker_failure/{victim}" in r.stdout and "fixed" in r.stdout, r
            # no throttle left behind on the brokers or the topic
            snap = _snapshot(bootstrap)
            assert not any(k.endswith("replication.throttled.rate") for b in snap["brokers"]
                           for k in (b.get("configs") or {})), snap["brokers"]
        finally:
            sandbox.start(victim)
        wait_for(lambda: _full_isr(bootstrap), 90, 1, "ISR complete after the restart")
    finally:
        delete_topic(bootstrap, topic)
