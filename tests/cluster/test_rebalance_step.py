"""``kops rebalance step`` on the live sandbox: bounded cron steps converge to the balance of a
one-shot ``plan rebalance``; each step stays within its bound and leaves every replica list
rack-safe; a pause (operator or playbook), or a stopped broker, makes it step aside."""

from __future__ import annotations

import json
import math

import pytest

from tests.cluster.kafka_helpers import create_topic, delete_topic, kops, wait_for

pytestmark = pytest.mark.cluster

MAX_MOVES = 6
#: the use goals' band, % of the mean (--balance-threshold: kops' own writes to its journal
#: topic move the mean a little with every step)
BAND = 1


def _run(bootstrap: str, *args: str, timeout: float = 300) -> tuple[int, dict, str]:
    r = kops(*args, "--bootstrap-server", bootstrap, "--output", "json", timeout=timeout)
    doc = json.loads(r.stdout) if r.stdout.strip() else {}
    return r.returncode, doc, r.stderr


def _snapshot(bootstrap: str) -> dict:
    r = kops("cluster", "describe", "--bootstrap-server", bootstrap, "--output", "json", timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def _assignment(snap: dict) -> dict[str, list[list[int]]]:
    return {t["name"]: [p["replicas"] for p in t["partitions"]] for t in snap["topics"]}


def _rack_unsafe(snap: dict) -> list[str]:
    rack = {b["id"]: b.get("rack") for b in snap["brokers"]}
    bad = []
    for t in snap["topics"]:
        for p in t["partitions"]:
            reps = p["replicas"]
            racks = [rack.get(b) for b in reps]
            # as many racks as the list can use (3 racks here)
            if len(set(racks)) < min(len(reps), len(set(rack.values()))):
                bad.append(f"{t['name']}-{p['partition']}: {reps}")
    return bad


def _spreads(bootstrap: str) -> dict:
    """The full plan's balance from here: what `plan rebalance` reports it would reach."""
    r = kops("plan", "rebalance", "--bootstrap-server", bootstrap, "--output", "json", timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)["report"]


def test_steps_converge_to_the_one_shot_plan(sandbox, bootstrap, unique_topic):
    # skew: every replica of a new topic on brokers 0, 2, 4 (one per rack: rack-safe, unbalanced)
    ids = sandbox.broker_ids
    topic = unique_topic("skew")
    create_topic(bootstrap, topic, assignment={p: [ids[0], ids[2], ids[4]] if p % 2 else [ids[2], ids[4], ids[0]]
                                               for p in range(18)}, mb_per_partition=1)
    try:
        one_shot = _spreads(bootstrap)
        full_moves = one_shot["replicas_moved"]
        assert full_moves >= MAX_MOVES, one_shot["balance"]
        target = one_shot["goals"]

        # dry run: the step it would take, nothing changed
        before = _snapshot(bootstrap)
        code, doc, err = _run(bootstrap, "rebalance", "step", "--max-moves", str(MAX_MOVES), "--dry-run")
        assert code == 0 and doc["status"] == "dry_run", (doc, err)
        assert 0 < doc["replicas_moved"] <= MAX_MOVES
        assert _assignment(_snapshot(bootstrap)) == _assignment(before)

        steps, moved = 0, 0
        limit = math.ceil(full_moves / MAX_MOVES) + 4
        while True:
            code, doc, err = _run(bootstrap, "rebalance", "step", "--max-moves", str(MAX_MOVES),
                                  "--throttle", "50M", "--max-duration", "2m", "--balance-threshold", str(BAND))
            assert code == 0, (doc.get("goals"), doc.get("reason"), err[-3000:])
            if doc["status"] == "balanced":
                break
            assert doc["status"] == "moved", doc
            steps += 1
            moved += doc["replicas_moved"]
            assert doc["replicas_moved"] <= MAX_MOVES, doc
            assert doc["execution"]["state"] == "complete" and doc["execution"]["throttles_left"] == []
            # no goal of the default set worse after a step unless a higher goal forced it (then
            # named), progress on the first one it moved for, and every replica list rack-safe
            goals = doc["goals"]
            assert list(goals)[:2] == ["replicas", "disk-usage"], goals
            assert all(g["verdict"] != "worse" or (g.get("yielded") and g.get("forced_by")) for g in goals.values()), goals
            assert any(g["verdict"] == "better" for g in goals.values()), goals
            assert _rack_unsafe(_snapshot(bootstrap)) == []
            assert steps <= limit, f"{steps} steps and not balanced (full plan: {full_moves} moves)"
        print(f"[rebalance step] converged in {steps} steps of <= {MAX_MOVES} moves: {moved} replicas moved "
              f"(one-shot plan: {full_moves})")
        # converged: the goals the one-shot plan reaches (replica counts, leaders and first
        # followers; disk use within a partition or two, since a different path ends a partition
        # either side of the mean; topic spread within a replica or a leader), give or take what
        # kops' own journal writes added meanwhile
        final = _spreads(bootstrap)["goals"]
        for g in ("replicas", "leaders", "first-followers"):
            assert final[g]["before"] <= max(1, target[g]["after"]) + (g != "replicas"), (g, final[g], target[g])
        biggest = max(p.get("size_bytes") or 0 for t in _snapshot(bootstrap)["topics"] for p in t["partitions"])
        assert final["disk-usage"]["off_band_before"] <= target["disk-usage"]["off_band_after"] + 2 * biggest / 2**20 + 0.3, \
            (final["disk-usage"], target["disk-usage"], biggest)
        assert final["topic-spread"]["before"] <= target["topic-spread"]["after"] + 1, (final["topic-spread"], target)
        assert steps >= math.ceil(full_moves / MAX_MOVES) - 1
    finally:
        delete_topic(bootstrap, topic)


def test_steps_aside_while_paused_and_while_a_broker_is_down(sandbox, bootstrap, unique_topic):
    ids = sandbox.broker_ids
    topic = unique_topic("skew2")
    create_topic(bootstrap, topic, assignment={p: [ids[0], ids[2], ids[4]] for p in range(6)})
    try:
        # an operator's pause: every kops cron job steps aside, saying why, until unpaused
        code, doc, err = _run(bootstrap, "rebalance", "pause", "--for", "10m", "--reason", "rack b patching")
        assert code == 0 and doc["paused"], err
        code, doc, _ = _run(bootstrap, "rebalance", "status")
        assert code == 3 and doc["paused"] and doc["reason"] == "rack b patching"
        code, doc, err = _run(bootstrap, "rebalance", "step")
        assert code == 0 and doc["status"] == "stepped_aside" and "rack b patching" in doc["reason"], (doc, err)
        code, doc, err = _run(bootstrap, "leader", "rebalance")
        assert code == 0 and doc["status"] == "stepped_aside" and "rack b patching" in doc["reason"], (doc, err)
        code, doc, _ = _run(bootstrap, "rebalance", "unpause")
        assert code == 0 and doc["lifted"]["reason"] == "rack b patching"
        code, doc, _ = _run(bootstrap, "rebalance", "status")
        assert code == 0 and not doc["paused"]

        # a broker down: the cluster is not healthy, nothing moves (a broker that holds replicas:
        # one that holds none, down, harms nothing — and kops' reads create no topic on it)
        victim = ids[0]
        snap = _snapshot(bootstrap)
        sandbox.stop(victim)
        try:
            code, doc, err = _run(bootstrap, "rebalance", "step")
            assert code == 0 and doc["status"] == "stepped_aside", (doc, err)
            assert "not healthy" in doc["reason"] and f"broker {victim}" in doc["reason"], doc["reason"]
            # nothing moved (topics other tests deleted or created meanwhile aside)
            now = _assignment(_snapshot(bootstrap))
            assert {t: now.get(t) for t in _assignment(snap)} == _assignment(snap)
            assert not ongoing_moves(bootstrap)
        finally:
            sandbox.start(victim)
        wait_for(lambda: all(len(p["isr"]) == len(p["replicas"]) for t in _snapshot(bootstrap)["topics"]
                             for p in t["partitions"]), 90, 1, "ISR complete after the restart")
    finally:
        kops("rebalance", "unpause", "--bootstrap-server", bootstrap, timeout=60)
        delete_topic(bootstrap, topic)


def test_bad_bounds_are_refused_before_connecting():
    for args, needle in ((["--max-moves", "0"], "--max-moves"), (["--max-duration", "nan"], "--max-duration"),
                         (["--throttle", "-5"], "--throttle"), (["--max-bytes", "9" * 400], "--max-bytes")):
        r = kops("rebalance", "step", *args, "--bootstrap-server", "127.0.0.1:1", "--output", "json", timeout=60)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert needle in r.stdout + r.stderr and "Traceback" not in r.stderr


def _configs(bootstrap: str, kind: str, name: str, keys: tuple[str, ...]) -> dict[str, str]:
    from confluent_kafka.admin import ConfigResource, ResourceType

    from tests.cluster.kafka_helpers import admin

    rt = ResourceType.BROKER if kind == "broker" else ResourceType.TOPIC
    fut = admin(bootstrap).describe_configs([ConfigResource(rt, name)])
    entries = next(iter(fut.values())).result(30)
    return {k: entries[k].value for k in keys if k in entries and entries[k].value and not entries[k].is_default}


def test_the_dry_run_of_an_execution_is_what_the_execution_does(sandbox, bootstrap, unique_topic, tmp_path):
    """Four moves into one broker, one at a time: the dry run's waves, throttles and bytes are
    those the engine then uses (first wave's throttles read back from the brokers and topic)."""
    ids = sandbox.broker_ids  # racks a,a,b,b,c,c
    topic = unique_topic("dry")
    src, dst = ids[0], ids[1]  # the same rack: every target list stays rack-safe
    create_topic(bootstrap, topic, assignment={p: [src, ids[2], ids[4]] for p in range(4)}, mb_per_partition=2)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": [dst, ids[2], ids[4]]} for p in range(4)]}))
    args = ["--reassignment-json-file", str(plan), "--throttle", "1048576", "--max-moves-per-broker", "1",
            "--bootstrap-server", bootstrap, "--output", "json"]
    try:
        r = kops("reassign", "execute", *args, "--dry-run", timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        dry = json.loads(r.stdout)
        assert dry["dry_run"] and dry["data_moves"] == 4 and len(dry["waves"]) == 4
        assert [[(p["topic"], p["partition"]) for p in w["partitions"]] for w in dry["waves"]] == \
            [[(topic, p)] for p in range(4)]
        size = sum(p["size_bytes"] for w in dry["waves"] for p in w["partitions"])
        assert dry["bytes_by_destination"] == {str(dst): size} and size >= 4 * 2_000_000
        assert _assignment(_snapshot(bootstrap))[topic] == [[src, ids[2], ids[4]]] * 4  # nothing changed
        assert not ongoing_moves(bootstrap)

        # the real thing, first wave only: the throttles on the brokers and the topic are the dry run's
        r = kops("reassign", "execute", *args, "--yes", timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        want = dry["waves"][0]["throttles"]
        for b, cfg in want["brokers"].items():
            assert _configs(bootstrap, "broker", b, tuple(cfg)) == cfg, b
        t = want["topics"][topic]
        assert _configs(bootstrap, "topic", topic, tuple(t)) == t
        # ... then every wave, as many as the dry run said
        r = kops("reassign", "resume", "--wait", "--bootstrap-server", bootstrap, "--output", "json", timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        done = json.loads(r.stdout)
        assert done["state"] == "complete" and done["waves"] == len(dry["waves"]) and done["throttles_left"] == []
        assert done["bytes_to_move"] == dry["bytes_to_move"]
    finally:
        if ongoing_moves(bootstrap):  # failed half way: roll back, nothing of it left for later tests
            kops("reassign", "cancel", "--bootstrap-server", bootstrap, timeout=180)
        delete_topic(bootstrap, topic)


def ongoing_moves(bootstrap: str) -> dict:
    from tests.cluster.kafka_helpers import ongoing

    return ongoing(bootstrap)


def test_a_killed_step_is_finished_by_the_next_run(sandbox, bootstrap, unique_topic):
    """SIGKILL in the middle of a step's execution: the next cron run finishes that step (its
    journal says a step started it, its process is gone) and lifts its throttles."""
    import os
    import signal
    import subprocess
    import sys

    ids = sandbox.broker_ids
    topic = unique_topic("killed")
    create_topic(bootstrap, topic, assignment={p: [ids[0], ids[2], ids[4]] for p in range(6)}, mb_per_partition=2)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "kops", "rebalance", "step", "--max-moves", "3",
                                 "--throttle", "300K", "--balance-threshold", "1", "--bootstrap-server", bootstrap],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        try:
            wait_for(lambda: ongoing_moves(bootstrap) or proc.poll() is not None, 60, 0.2, "the step's moves")
            assert proc.poll() is None, proc.communicate()
            os.killpg(proc.pid, signal.SIGKILL)
        finally:
            proc.wait(30)
        code, doc, err = _run(bootstrap, "rebalance", "step", "--max-moves", "3", "--throttle", "50M",
                              "--balance-threshold", "1")
        assert code == 0 and doc["status"] == "moved", (doc, err[-2000:])
        assert doc["execution"]["state"] == "complete" and doc["execution"]["throttles_left"] == []
        assert not ongoing_moves(bootstrap)
        # and the job goes on from there: the next run plans a new step (or finds balance)
        code, doc, err = _run(bootstrap, "rebalance", "step", "--max-moves", "3", "--throttle", "50M",
                              "--balance-threshold", "1")
        assert code == 0 and doc["status"] in ("moved", "balanced"), (doc, err[-2000:])
    finally:
        if ongoing_moves(bootstrap):
            kops("reassign", "cancel", "--bootstrap-server", bootstrap, timeout=180)
        delete_topic(bootstrap, topic)


def test_a_step_that_finds_the_lock_taken_after_it_looked_steps_aside(sandbox, bootstrap, unique_topic,
                                                                     monkeypatch):
    """Two cron hosts at once: both find the cluster free and plan; the one whose engine comes
    second finds the cluster lock taken by the other. It steps aside (exit 0, saying who holds
    the lock) and changes nothing. The other host is this test holding kops' real lock; the step
    runs in this process with its look (``cron.busy``) made before the lock was taken."""
    from kops.cluster.config import ClientConfig
    from kops.cluster.connection import Connection
    from kops.ops import cron, replica_rebalance
    from kops.ops.lock import ClusterLock

    from tests.cluster.kafka_helpers import assert_lock_released

    ids = sandbox.broker_ids
    topic = unique_topic("raced")
    before = create_topic(bootstrap, topic, assignment={p: [ids[0], ids[2], ids[4]] for p in range(6)})
    try:
        with Connection(bootstrap, ClientConfig(), None, 15) as other, Connection(bootstrap, ClientConfig(), None, 15) as conn:
            lock = ClusterLock(other)
            lock.acquire("raced-host-2", {"user": "cron", "host": "host-2", "pid": 4242})
            try:
                monkeypatch.setattr(cron, "busy", lambda conn, opts, **kw: None)  # it looked just before
                res = replica_rebalance.step(conn, bounds=replica_rebalance.StepBounds(max_moves=4),
                                             throttle=10_000_000)
            finally:
                lock.release("raced-host-2")
        assert (res.status, res.exit_code) == ("stepped_aside", 0), res.summary()
        assert "another kops took the cluster lock first: execution raced-host-2" in res.reason, res.reason
        assert "cron@host-2 (pid 4242)" in res.summary()
        snap = _snapshot(bootstrap)
        assert _assignment(snap)[topic] == [before[p] for p in range(6)]  # nothing moved
        assert not ongoing_moves(bootstrap)
        assert _configs(bootstrap, "topic", topic, ("leader.replication.throttled.replicas",
                                                    "follower.replication.throttled.replicas")) == {}
        assert_lock_released(bootstrap)
    finally:
        delete_topic(bootstrap, topic)


def test_topic_filters_leave_a_topic_where_it_is(sandbox, bootstrap, unique_topic):
    """--topics / --exclude-topics on the live cluster: two topics stacked on brokers 0, 2, 4;
    steps over both with one excluded move only the other (to balance), the excluded one keeps
    every replica where it was, the report names it; `leader balance-plan` with the same filter
    reorders only the topic kept (issue 41, item 3)."""
    ids = sandbox.broker_ids
    moved, kept = unique_topic("filtered"), unique_topic("leftout")
    stacked = {p: [ids[0], ids[2], ids[4]] for p in range(6)}
    for t in (moved, kept):
        create_topic(bootstrap, t, assignment=stacked)
    scope = ("--topics", f"{moved}|{kept}", "--exclude-topics", kept)
    try:
        before = _assignment(_snapshot(bootstrap))
        for _ in range(4):
            code, doc, err = _run(bootstrap, "rebalance", "step", *scope, "--max-moves", str(MAX_MOVES),
                                  "--throttle", "auto:50M-100M")  # the adaptive throttle (issue 41, item 1)
            assert code == 0, (doc.get("reason"), err[-3000:])
            left = doc["report"]["topics_left_out"]  # every topic of the cluster but one
            assert left["topics_kept"] == 1 and left["filter"] == f"--topics '{moved}|{kept}' --exclude-topics '{kept}'"
            assert f"topics left out by {left['filter']}" in doc["summary"], doc["summary"]
            if doc["status"] == "balanced":
                break
            assert doc["status"] == "moved" and doc["execution"]["state"] == "complete", doc
            assert doc["execution"]["throttle_auto"] == {"min": 50 * 2**20, "max": 100 * 2**20}
            assert doc["execution"]["throttles_left"] == []
            assert {p["topic"] for p in doc["plan"]["partitions"]} == {moved}
        else:
            raise AssertionError("four steps did not balance one 6-partition topic")
        after = _assignment(_snapshot(bootstrap))
        assert after[kept] == before[kept]  # the topic left out: not one replica moved
        assert after[moved] != before[moved]
        assert {b for r in after[moved] for b in r} == set(ids)  # spread over every broker now
        r = kops("leader", "balance-plan", "--topics", f"{moved}|{kept}", "--exclude-topics", moved,
                 "--bootstrap-server", bootstrap, "--output", "json", timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        bp = json.loads(r.stdout)
        assert {p["topic"] for p in bp["plan"]["partitions"]} <= {kept}
        assert bp["topics_left_out"]["topics_kept"] == 1
    finally:
        delete_topic(bootstrap, moved)
        delete_topic(bootstrap, kept)
