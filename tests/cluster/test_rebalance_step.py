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
#: by bytes, balanced when every broker is within this % of the mean (kops' own writes to its
#: journal topic move the mean a little with every step)
BAND = 3


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
        target = one_shot["balance"]

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
            # no goal worse after a step, and every replica list rack-safe
            assert all(g["after"] <= g["before"] or g.get("yielded") for g in doc["goals"].values()), doc["goals"]
            assert doc["goals"]["bytes_distance"]["after"] < doc["goals"]["bytes_distance"]["before"]
            assert _rack_unsafe(_snapshot(bootstrap)) == []
            assert steps <= limit, f"{steps} steps and not balanced (full plan: {full_moves} moves)"
        print(f"[rebalance step] converged in {steps} steps of <= {MAX_MOVES} moves: {moved} replicas moved "
              f"(one-shot plan: {full_moves})")
        # converged: the last run found every broker within the band of the mean bytes — the
        # balance the one-shot plan reaches (it ends within about one partition of the mean)
        assert doc["bytes_deviation_pct"] is not None and doc["bytes_deviation_pct"] <= BAND, doc
        assert one_shot["balance_by"] == "bytes"
        final = _spreads(bootstrap)["balance"]
        assert final["leader_spread_before"] <= target["leader_spread_after"] + 2, (final, target)
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

        # a broker down: the cluster is not healthy, nothing moves
        victim = ids[1]
        snap = _snapshot(bootstrap)
        sandbox.stop(victim)
        try:
            code, doc, err = _run(bootstrap, "rebalance", "step")
            assert code == 0 and doc["status"] == "stepped_aside", (doc, err)
            assert "not healthy" in doc["reason"] and f"broker {victim}" in doc["reason"], doc["reason"]
            assert _assignment(_snapshot(bootstrap)) == _assignment(snap)
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
