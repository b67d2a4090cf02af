"""Self-healing under the workload (issue 40, items 5a, 5b, 5f and 5g). First a broker SIGKILLed
and started again within its grace (5b): heal steps watch it, nothing is moved, the anomaly ends
as cleared. Then a broker SIGKILLed and left down; `kops heal step` runs in a loop as cron would
(every few seconds here, with a short grace); once the grace is over its replicas are re-created on live brokers, its own rack first,
rack-safe, in bounded steps. The first step that acts runs with a second one at once (5f: the
first held once its moves are submitted, the second run meanwhile: it must step aside, moving
nothing); the next step that acts is SIGKILLed once its moves are submitted (5g), so the run
after it must finish that execution first. Asserted: the faults happened (the broker is gone
from the cluster's metadata and heal watched it in grace before acting; the two steps overlapped;
the killed step died with its execution unfinished), every partition fully replicated on live
brokers and rack-safe, no acknowledged message lost, nothing of kops' left (throttles,
reassignments, lock).
The session's cluster is given back: the broker started again (empty: its replicas live
elsewhere now) and filled by heal's own ``new_broker`` fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from tests.faults.helpers import (
    admin,
    assert_clean,
    assignment,
    create_topic,
    cron_runs,
    delete_topic,
    fully_replicated,
    kops,
    unique,
    wait_for,
    wait_recovered,
    workload_topics,
)
from tests.faults.workload import Workload

pytestmark = pytest.mark.faults

GRACE = "8s"  # (cron's default is 30m: here the broker is known to be gone for good)
RACKS = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}


def _heal_step(bootstrap: str, *args: str, grace: str = GRACE, max_moves: int = 6,
               env: dict[str, str] | None = None) -> tuple[int, dict, str]:
    r = kops("heal", "step", "--broker-grace", grace, "--max-moves", str(max_moves), "--throttle", "10M", *args,
             "--bootstrap-server", bootstrap, "--output", "json", timeout=300, env=env)
    try:
        doc = json.loads(r.stdout)
    except ValueError:
        doc = {}
    return r.returncode, doc, r.stderr


def _registered(bootstrap: str) -> set[int]:
    return set(admin(bootstrap).list_topics(timeout=10).brokers)


def _unfinished(bootstrap: str) -> list[str]:
    """The ids of the kops executions in progress (`reassign list`: the journal's unfinished ones)."""
    r = kops("reassign", "list", "--bootstrap-server", bootstrap, "--output", "json", timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return [e["id"] for e in json.loads(r.stdout)["kops_executions"]]


def _anomaly(doc: dict, key: str) -> dict | None:
    return next((a for a in doc.get("anomalies", []) if a["key"] == key), None)


def _back_within_grace(sb, bootstrap: str, broker: int) -> dict:
    """5b. ``broker`` SIGKILLed, watched in its grace (5 min) by heal steps, started again before
    the grace is over: nothing moved, and the run after it is back ends the anomaly as cleared.
    What the runs said, for the scenario's row."""
    before = assignment(bootstrap)
    sb.stop(broker=broker, kill=True)
    watching = []
    try:
        wait_for(lambda: broker not in _registered(bootstrap), 60, 0.5, f"broker {broker} gone from the metadata")
        for _ in range(2):
            code, doc, err = _heal_step(bootstrap, grace="5m")
            assert code == 0 and doc["status"] == "watching" and not doc.get("replicas_moved"), (doc, err[-2000:])
            assert _anomaly(doc, f"broker_failure/{broker}")["state"] == "in_grace", doc
            watching.append(doc)
    finally:
        sb.start(broker=broker)  # (back whatever happened: the next scenarios need every broker)
    wait_for(lambda: broker in _registered(bootstrap) and fully_replicated(bootstrap), 120, 0.5,
             f"broker {broker} back in every ISR")
    code, doc, err = _heal_step(bootstrap, grace="5m")
    assert code == 0 and not doc.get("replicas_moved"), (doc, err[-2000:])
    ended = [a for a in doc["ended"] if a["key"] == f"broker_failure/{broker}"]
    assert ended and ended[0]["state"] == "cleared", doc
    assert assignment(bootstrap) == before  # nothing moved
    return {"watched": len(watching), "ended": ended[0]["state"]}


def _two_at_once(bootstrap: str, release) -> tuple[dict, tuple[int, dict, str]]:
    """5f. Two heal steps at once: the first held once its moves are submitted (its execution
    and the cluster lock are then known to be there), the second run meanwhile; then the first
    let go. (The first report, the second's (exit code, report, stderr).)"""
    args = [sys.executable, "-m", "kops", "heal", "step", "--broker-grace", GRACE, "--max-moves", "6", "--throttle",
            "10M", "--bootstrap-server", bootstrap, "--output", "json"]
    first = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                             env={**os.environ, "KOPS_HOLDPOINT": "wave.submitted",
                                  "KOPS_HOLDPOINT_RELEASE": str(release)})
    try:
        wait_for(lambda: first.poll() is not None or bool(_unfinished(bootstrap)), 120, 0.5,
                 "the first step's execution")
        assert first.poll() is None, first.communicate()  # held with its moves submitted
        second = _heal_step(bootstrap)
    finally:
        release.touch()
    out, err = first.communicate(timeout=300)
    assert first.returncode == 0, (out[-2000:], err[-2000:])
    return json.loads(out), second


def test_a_broker_killed_for_good_is_healed_by_cron_heal_steps(dsandbox, dbootstrap, kops_home, record, tmp_path):
    """5a. broker 3 (rack b) SIGKILLed and left down under the acks=all workload; heal steps every
    2 s (grace 8 s, at most 6 copies per step): its replicas re-created on broker 2 (its rack) and
    nothing else moved."""
    sb, bs = dsandbox, dbootstrap
    dead = 3
    work = workload_topics(bs)
    data = unique("healdata")
    # (12 partitions: broker 3 holds enough for the pair's step, the killed one and more)
    create_topic(bs, data, partitions=12, rf=3, min_isr=2, mb_per_partition=0.5)
    runs: list[dict] = []
    try:
        code, doc, err = _heal_step(bs)  # heal sees every broker registered first (their racks)
        assert code == 0, err[-2000:]
        with Workload(bs, work) as w:
            w.wait_acknowledged(200)
            back = _back_within_grace(sb, bs, 1)  # 5b: broker 1 (rack a) down for less than the grace
            before = assignment(bs)
            on_dead = {tp for tp, reps in before.items() if dead in reps}
            assert on_dead
            t_fault = time.monotonic()
            sb.stop(broker=dead, kill=True)
            deadline = time.monotonic() + 60
            while dead in _registered(bs):  # the fault: the broker is gone from the metadata
                assert time.monotonic() < deadline, "broker 3 still registered 60 s after SIGKILL"
                time.sleep(0.5)
            t0 = time.monotonic()
            killed = resumed = pair = None
            while True:
                if killed is None:
                    # the first run that would act (a dry run says so; it changes nothing) runs
                    # with a second one at once (5f); the next is SIGKILLed once its first wave
                    # of moves is submitted (5g): mid-fix
                    code, probe, err = _heal_step(bs, "--dry-run")
                    assert code == 0, (probe, err[-2000:])
                    if probe["status"] == "dry_run" and probe.get("plan") and pair is None:
                        pair = _two_at_once(bs, tmp_path / "release")
                        runs.append(pair[0])
                        continue
                    if probe["status"] == "dry_run" and probe.get("plan"):
                        code, _doc, err = _heal_step(bs, env={"KOPS_FAILPOINT": "wave.submitted"})
                        assert code == -9, (code, err[-2000:])  # the fault: killed mid-fix
                        killed = _unfinished(bs)
                        assert killed, "the killed run left no unfinished execution"
                        continue
                code, doc, err = _heal_step(bs)
                assert code == 0, (doc, err[-2000:])
                runs.append(doc)
                if killed is not None and resumed is None:
                    resumed = doc  # the run after the kill: it finishes the killed run's execution first
                if any(a["key"] == f"broker_failure/{dead}" for a in doc.get("ended", [])):
                    break
                assert len(runs) < 40, doc
                time.sleep(2)
            kops_s = round(time.monotonic() - t0, 1)
            recover_s = wait_recovered(bs, t_fault)
            w.wait_acknowledged(100)
            res = w.finish()
        watched = [d for d in runs if (a := _anomaly(d, f"broker_failure/{dead}")) and a["state"] == "in_grace"]
        moved = sum(d.get("replicas_moved") or 0 for d in runs)
        acted, (aside_code, aside, aside_err) = pair
        record(scenario="heal a/b/f/g. a broker back within its grace, then one killed for good, `heal step` from "
                        "cron (grace 8 s, 6 copies per step); two steps at once; one step SIGKILLed mid-fix",
               workload=res, kops_exit=0, recover_s=recover_s, kops_s=kops_s,
               detail=f"broker 1 (rack a) SIGKILLed and started again within its 5 min grace: {back['watched']} runs "
                      f"watched it, nothing moved, then {back['ended']}; broker {dead} (rack b) killed; "
                      f"{len(watched)} runs watched it in grace; the first fixing run "
                      f"held with its moves submitted while a second ran: it {aside.get('status')} "
                      f"({(aside.get('reason') or '')[:60]}...); the next fixing run SIGKILLed with its moves "
                      f"submitted, the run after it finished its execution; the replicas of "
                      f"{len(on_dead)} partitions re-created by {1 + sum(1 for d in runs if d['status'] == 'moved')} "
                      f"steps in all ({moved} copies by the runs not killed)")
        assert watched, "heal never saw the broker in its grace: it acted before the grace or never saw it"
        # 5f: one acted, the other stepped aside while it ran, moving nothing
        assert acted["status"] == "moved" and acted["replicas_moved"] > 0, acted
        assert aside_code == 0 and aside["status"] == "stepped_aside", (aside, aside_err[-2000:])
        assert "a kops execution is in progress" in aside["reason"] and not aside.get("replicas_moved"), aside
        assert _anomaly(aside, f"broker_failure/{dead}")["why"].startswith("waits: "), aside
        assert resumed is not None and resumed.get("execution"), resumed
        assert resumed["execution"]["execution_id"] == killed[0], (killed, resumed["execution"])
        assert runs[0]["status"] == "watching" and not runs[0].get("replicas_moved"), runs[0]
        assert sum(1 for d in runs if d["status"] == "moved") >= 2, "bounded: 6 copies per step"
        after = assignment(bs)
        assert [tp for tp, reps in after.items() if dead in reps] == []
        for tp in on_dead:  # its own rack first: broker 2 took its place
            assert set(after[tp]) - set(before[tp]) == {2}, (tp, before[tp], after[tp])
        assert all(after[tp] == reps for tp, reps in before.items() if tp not in on_dead)  # nothing else moved
        assert all(len({RACKS[b] for b in reps}) == min(3, len(reps)) for reps in after.values())
        assert fully_replicated(bs)
        assert_clean(bs, record)
        assert res.lost == 0, res.lost_examples
    finally:
        _give_back(sb, dead)
        for t in (data, *work):
            delete_topic(sb.bootstrap_servers, t)


def _give_back(sb, broker: int) -> None:
    """Broker ``broker`` started again (empty now) and filled by heal's ``new_broker`` fix, the
    cluster fully replicated, nothing of kops' left."""
    sb.start(broker=broker)
    bs = sb.bootstrap_servers
    deadline = time.monotonic() + 120
    while broker not in _registered(bs) or not fully_replicated(bs):
        assert time.monotonic() < deadline, "the broker did not come back"
        time.sleep(1)
    for _ in range(20):
        code, doc, err = _heal_step(bs, "--fix", "new_broker", grace="0s", max_moves=50)
        assert code == 0, (doc, err[-2000:])
        if not _anomaly(doc, f"new_broker/{broker}") and doc["status"] != "moved":
            break
    assert any(broker in reps for reps in assignment(bs).values())
    assert_clean(bs)


#: how long rack b stays down in "heal c.": five minutes (a rack's maintenance window overrun, an
#: AZ's outage), under the acks=all producer; KOPS_FAULT_RACK_DOWN_S for another length
RACK_DOWN_S = float(os.environ.get("KOPS_FAULT_RACK_DOWN_S", "300"))


def test_a_rack_down_during_a_paused_rack_maintenance_is_left_alone(dsandbox, dbootstrap, tmp_path, kops_home, record):
    """c. The rack-maintenance playbook moves leadership off rack b and stops at its operator
    pause; rack b then goes down hard (both brokers SIGKILLed) for RACK_DOWN_S under the
    ``acks=all`` workload (RF 3 over 3 racks, min.insync.replicas 2: writes go on). `heal step`,
    run as cron would with a grace of 0 s, sees both brokers failed and the whole rack down -- an
    outage, and the playbook's pause -- and moves nothing, run after run (exit 3); `rebalance step`
    and `leader rebalance` step aside. The rack comes back, the playbook is resumed and gives
    leadership back; the next heal step ends both anomalies as cleared. Asserted: the rack really
    was down (gone from the metadata, acknowledged writes went on meanwhile), not one replica
    moved, no acknowledged message lost, nothing of kops' left."""
    sb, bs = dsandbox, dbootstrap
    rack = "b"
    on_rack = set(sb.brokers_in_rack(rack))
    work = workload_topics(bs)
    code, doc, err = _heal_step(bs, grace="0s")  # every broker registered: heal knows their racks
    assert code == 0, (doc, err[-2000:])
    heal_runs: list[tuple[int, dict]] = []
    try:
        with Workload(bs, work) as w:
            w.wait_acknowledged(200)
            original = assignment(bs)  # (the playbook's demote reorders replica lists; its restore puts them back)
            r = kops("playbook", "run", "rack-maintenance", "--param", f"rack={rack}", "--bootstrap-server", bs,
                     "--output", "json", timeout=600)
            assert r.returncode == 3, r.stdout[-2000:] + r.stderr[-2000:]  # stopped at its operator pause
            rep = json.loads(r.stdout)
            run_id = rep["run_id"]
            assert [s["status"] for s in rep["steps"][:4]] == ["done", "done", "done", "paused"], rep["steps"]
            before = assignment(bs)
            led = admin(bs).list_topics(timeout=10).topics
            assert not [t for t, tm in led.items() for pm in tm.partitions.values() if pm.leader in on_rack]
            t_fault = time.monotonic()
            sb.stop(rack=rack, kill=True)
            wait_for(lambda: not (on_rack & _registered(bs)), 60, 0.5, f"rack {rack} gone from the metadata")
            acked_down = w.acknowledged()
            deadline = time.monotonic() + RACK_DOWN_S
            while time.monotonic() < deadline:  # cron, every few seconds, for as long as the rack is down
                code, doc, err = _heal_step(bs, grace="0s")
                heal_runs.append((code, doc))
                assert code == 3 and doc["status"] == "refused" and not doc.get("replicas_moved"), (doc, err[-2000:])
                assert assignment(bs) == before, "heal moved a replica during the outage"
                time.sleep(5)
            for cron in (["leader", "rebalance"], ["rebalance", "step"]):
                c = kops(*cron, "--bootstrap-server", bs, "--output", "json", timeout=300)
                assert c.returncode == 0 and json.loads(c.stdout)["status"] == "stepped_aside", (cron, c.stdout)
            acked_down = w.acknowledged() - acked_down
            down_s = round(time.monotonic() - t_fault, 1)
            sb.start(rack=rack)
            r = kops("playbook", "run", "rack-maintenance", "--resume", run_id, "--bootstrap-server", bs,
                     "--output", "json", timeout=900)
            assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
            recover_s = wait_recovered(bs, t_fault)
            code, after_doc, err = _heal_step(bs, grace="0s")
            assert code == 0, (after_doc, err[-2000:])
            w.wait_acknowledged(100)
            res = w.finish()
        last = heal_runs[-1][1]
        outage = _anomaly(last, "too_much_down")
        record(scenario=f"heal c. rack b down (SIGKILL, {RACK_DOWN_S:.0f} s) during a paused rack-maintenance "
                        "playbook, `heal step` from cron (grace 0 s)",
               workload=res, kops_exit=0, recover_s=recover_s, kops_s=down_s,
               detail=f"the playbook moved leadership off rack b and paused; both brokers killed, gone from the "
                      f"metadata; {acked_down} writes acknowledged while the rack was down; {len(heal_runs)} heal "
                      f"runs refused (outage, the playbook's pause), exit 3, nothing moved; rebalance step and "
                      f"leader rebalance stepped aside; the rack back, the playbook resumed and finished; the next "
                      f"heal run ended {sorted(a['key'] for a in after_doc.get('ended', []))}")
        assert len(heal_runs) >= 3, heal_runs
        assert outage is not None and "every broker of rack b is down" in outage["detail"], last
        for b in sorted(on_rack):
            a = _anomaly(last, f"broker_failure/{b}")
            assert a is not None and a["state"] == "refused" and "too much down at once" in a["why"], last
        assert acked_down > 0, "no write was acknowledged while the rack was down"
        ended = {a["key"]: a["state"] for a in after_doc.get("ended", [])}
        assert all(ended.get(f"broker_failure/{b}") == "cleared" for b in on_rack), after_doc
        assert assignment(bs) == original  # not one replica moved, every replica order given back
        assert fully_replicated(bs)
        assert_clean(bs, record)
        assert res.lost == 0, res.lost_examples
    finally:
        sb.start(rack=rack)
        for t in work:
            delete_topic(sb.bootstrap_servers, t)


NEW_BROKERS = {6: "a", 7: "c"}


def test_two_new_brokers_are_filled_by_cron_heal_steps(dsandbox, dbootstrap, kops_home, record, tmp_path):
    """e. Two brokers join under the ``acks=all`` workload (6 in rack a, 7 in rack c) and hold
    nothing; `heal step --fix new_broker,unbalanced` runs as cron would (grace 8 s, at most 20
    copies per step, throttled): it watches them in grace, then the add-brokers planner fills
    them in bounded steps and the rebalance steps after it bring every broker within the replica
    band. Asserted: the brokers really joined empty (registered, no replica), heal waited out the
    grace, more than one step moved data, each new broker ends within the band of the mean replica
    count, every partition rack-safe and fully replicated, no acknowledged message lost, nothing
    of kops' left. The cluster is given back: both brokers decommissioned by kops and removed."""
    from kops.placement.goals import BAND, band

    sb, bs = dsandbox, dbootstrap
    work = workload_topics(bs)
    data = unique("filldata")
    create_topic(bs, data, partitions=24, rf=3, min_isr=2, mb_per_partition=0.5)
    added: list[int] = []
    try:
        code, doc, err = _heal_step(bs, grace="0s")  # every broker registered: heal knows their racks
        assert code == 0, (doc, err[-2000:])
        with Workload(bs, work) as w:
            w.wait_acknowledged(200)
            before = assignment(bs)
            t_fault = time.monotonic()
            for b, rack in NEW_BROKERS.items():
                sb.add(b, rack)
                added.append(b)
            wait_for(lambda: set(NEW_BROKERS) <= _registered(bs), 60, 0.5, "the new brokers registered")
            assert not [tp for tp, reps in assignment(bs).items() if set(reps) & set(NEW_BROKERS)]  # empty
            t0 = time.monotonic()
            runs = cron_runs(lambda: _heal_step(bs, "--fix", "new_broker,unbalanced", max_moves=20),
                             lambda doc: doc["status"] == "nothing_to_do" and not {a["key"] for a in doc["anomalies"]}
                             & {"unbalanced", "new_broker/6", "new_broker/7"}, limit=40)
            kops_s = round(time.monotonic() - t0, 1)
            recover_s = wait_recovered(bs, t_fault)
            w.wait_acknowledged(100)
            res = w.finish()
        after = assignment(bs)
        counts = {b: sum(b in reps for reps in after.values()) for b in _registered(bs)}
        rack_of = {**RACKS, **NEW_BROKERS}
        # RF 3 over 3 racks: each rack holds a third of the replicas, so rack b's two brokers hold
        # more than racks a's and c's three; a new broker is filled when it is within the band of
        # its rack's mean (heal's own rule, kops/ops/heal/anomalies.py: _off_band)
        lo = {b: band(sum(counts[x] for x in counts if rack_of[x] == rack_of[b])
                      / sum(1 for x in counts if rack_of[x] == rack_of[b]), 1.0, BAND)[0] for b in NEW_BROKERS}
        watched = [d for d in runs if any(a["key"].startswith("new_broker/") and a["state"] == "in_grace"
                                          for a in d.get("anomalies", []))]
        moving = [d for d in runs if d["status"] == "moved"]
        moved = sum(d.get("replicas_moved") or 0 for d in runs)
        record(scenario="heal e. two brokers added under load, filled by `heal step --fix new_broker,unbalanced` "
                        "from cron (grace 8 s, 20 copies per step)",
               workload=res, kops_exit=0, recover_s=recover_s, kops_s=kops_s,
               detail=f"brokers 6 (rack a) and 7 (rack c) joined empty; {len(watched)} runs watched them in grace; "
                      f"{len(moving)} steps moved {moved} replicas ({sum(1 for d in moving if 'new_broker' in json.dumps(d.get('fix')))} "
                      f"of them filling the new brokers, the rest rebalance steps); replicas per broker after: "
                      f"{dict(sorted(counts.items()))}")
        assert watched and watched[0] is runs[0], "heal acted before the grace was over"
        assert len(moving) >= 2 and all((d.get("replicas_moved") or 0) <= 20 for d in moving), moving
        for b in NEW_BROKERS:
            assert counts[b] >= lo[b], (b, counts, lo)
        assert all(len({RACKS.get(b, NEW_BROKERS.get(b)) for b in reps}) == min(3, len(reps))
                   for reps in after.values())
        assert set(after) == set(before) and fully_replicated(bs)
        assert_clean(bs, record)
        assert res.lost == 0, res.lost_examples
    finally:
        _take_back(sb, added, tmp_path / "take-back.json")
        for t in (data, *work):
            delete_topic(sb.bootstrap_servers, t)


def _take_back(sb, brokers: list[int], path) -> None:
    """The brokers of scenario e decommissioned by kops (their replicas back on the six) and
    removed from the sandbox with their data."""
    if not brokers:
        return
    bs = sb.bootstrap_servers
    if any(set(reps) & set(brokers) for reps in assignment(bs).values()):
        r = kops("plan", "decommission", "--brokers", ",".join(map(str, brokers)), "--no-balance",
                 "--bootstrap-server", bs, "--output", "json", timeout=300)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        path.write_text(json.dumps(json.loads(r.stdout)["plan"]))
        r = kops("reassign", "execute", "--reassignment-json-file", str(path), "--throttle", "50M", "--wait", "--yes",
                 "--bootstrap-server", bs, timeout=600)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    for b in brokers:
        sb.remove(b, purge=True)
    assert_clean(bs)
