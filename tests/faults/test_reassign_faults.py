"""Reassignments and elections under real faults, on the containerised cluster (issue 16, item 4).

Every scenario runs the workload (idempotent acks=all producer + consumer, RF 3 over 3 racks,
min.insync.replicas=2) from before the fault to after recovery, and asserts: no acknowledged
message lost, kops' exit code and message as documented (docs/reassignment.md), nothing of
kops' left behind (throttles, reassignments, unfinished journal, lock), the cluster at the
plan's target, and kops within its documented time bounds.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

import pytest

from kops.ops.elections import ELECTION_ATTEMPTS, ELECTION_WAIT_S
from kops.sandbox.probe import zk_ruok
from tests.faults.helpers import (
    admin,
    assert_clean,
    data_topic,
    delete_topic,
    fully_replicated,
    kops,
    kops_bg,
    moves_in_flight,
    ongoing,
    replicas,
    wait_for,
    wait_in_flight,
    wait_recovered,
    workload_topics,
)
from tests.faults.workload import Workload

pytestmark = pytest.mark.faults

#: `leader rebalance`'s bound with one batch of elections (docs/leadership.md): the ElectLeaders
#: request answered or given up within ELECTION_WAIT_S, sent ELECTION_ATTEMPTS times in all (a
#: ZooKeeper-mode controller that lost its session can leave the first unanswered), and its reads
REBALANCE_BOUND_S = ELECTION_ATTEMPTS * ELECTION_WAIT_S + 30
THROTTLE = "1000000"  # 1 MB/s: 6 MB partitions take several seconds to move, long enough to hit
EXEC_TIMEOUT = 240


def _execute_args(bootstrap: str, plan, *extra: str) -> list[str]:
    return ["reassign", "execute", "--reassignment-json-file", str(plan), "--throttle", THROTTLE, "--wait",
            "--timeout", str(EXEC_TIMEOUT), "--yes", "--poll-interval", "1", "--bootstrap-server", bootstrap,
            "--output", "json", *extra]


def _cleanup(bootstrap: str, topics: list[str]) -> None:
    kops("reassign", "cancel", "--bootstrap-server", bootstrap)
    for t in topics:
        delete_topic(bootstrap, t)


def execute_through(sb, tmp_path, record, fault, *, scenario: str, extra: tuple[str, ...] = (), mb: int = 6) -> None:
    """The shape of the scenarios where kops must simply complete: the workload runs, `execute
    --wait` starts, ``fault(moving)`` strikes once moves are in flight and returns what happened,
    for the record; it calls ``moving()`` (the plan's partitions the cluster still shows being
    reassigned) to prove the fault overlapped the moves: just before a fault that stops the
    moves' completion (a killed controller completes none), else once it has landed. kops
    completes (exit 0, state complete, the plan's target, nothing left). ``mb``: each moved
    partition's data (at the 1 MB/s throttle, about that many seconds of moving)."""
    bs = sb.bootstrap_servers
    work = workload_topics(bs)
    topic, _before, target, plan = data_topic(bs, sb, tmp_path, mb=mb)
    run = None
    try:
        with Workload(bs, work) as w:
            w.wait_acknowledged(200)
            run = kops_bg(*_execute_args(bs, plan, *extra), out=tmp_path / "execute.json")
            wait_in_flight(bs, topic)
            t_fault = time.monotonic()
            detail = fault(lambda: moves_in_flight(bs, topic))
            rc, out, err = run.finish(EXEC_TIMEOUT + 60)
            recover_s = wait_recovered(bs, t_fault)
            if "could not be removed yet" in err:  # kops ended while a broker was still restarting:
                v = kops("reassign", "verify", "--reassignment-json-file", str(plan),  # as documented,
                         "--bootstrap-server", bs, "--output", "json", timeout=120)  # verify lifts it
                assert v.returncode == 0, v.stdout[-2000:] + v.stderr[-2000:]
                detail += "; a throttle on the restarting broker lifted by the documented `verify`"
            w.wait_acknowledged(100)
            res = w.finish()
        record(scenario=scenario, workload=res, kops_exit=rc, recover_s=recover_s,
               kops_s=round(run.elapsed, 1), detail=detail)
        assert rc == 0, err[-3000:]
        assert json.loads(out)["state"] == "complete", out[-2000:]
        assert replicas(bs, topic) == target
        assert run.elapsed < EXEC_TIMEOUT
        assert_clean(bs, record)
        assert res.lost == 0, res.lost_examples
    finally:
        if run is not None:
            run.stop()
        _cleanup(bs, [topic, *work])


def test_controller_killed_mid_execute(dsandbox, dbootstrap, tmp_path, kops_home, record):
    """a. The active controller is SIGKILLed while `execute --wait` has moves in flight, and
    restarted: a new controller takes over the reassignment; kops completes (exit 0)."""
    sb = dsandbox

    def kill_controller(moving) -> str:
        ctrl = sb.controller_id()
        at_kill = moving()  # in flight as the controller dies: none of them can be completed by it
        assert at_kill > 0, "the moves had finished before the kill"
        sb.stop(broker=ctrl, kill=True)
        try:
            wait_for(lambda: sb.controller_id() not in (None, ctrl), 60, 0.5, "another broker to be the controller")
            new = sb.controller_id()
            left = moving()  # asked of the new controller, before the old one is back (a figure: the
            # replicas copy on without a controller, so on a loaded machine the new one may find them all caught up)
        finally:
            sb.start(broker=ctrl)  # (back whatever happened: the next scenarios need every broker)
        return (f"controller {ctrl} killed with {at_kill} moves in flight, {new} took over "
                f"({left} still in flight when it was asked)")

    # 24 MB a partition (~24 s of moving): the moves are asked just before the kill, and the 6 MB
    # of the other scenarios had ended by then on a loaded machine (12 s after the start); the
    # killed controller's ZooKeeper session expiring (18 s, in ticks of 2 s) and another taking
    # over may outlast the copy: the new controller then completes the moves at once
    execute_through(sb, tmp_path, record, kill_controller, mb=24,
                    scenario="a. controller killed mid `reassign execute --wait`")


def test_destination_broker_killed_mid_move_then_resume(dsandbox, dbootstrap, tmp_path, kops_home, record):
    """b. A destination broker is SIGKILLed mid-move and stays down: `execute --wait` stops
    waiting once every move in flight waits on it (exit 3, documented: 60 s), instead of
    hanging; the broker comes back; `resume` completes and removes every throttle."""
    sb, bs = dsandbox, dbootstrap
    work = workload_topics(bs)
    topic, before, target, plan = data_topic(bs, sb, tmp_path)
    dest = next(b for p in sorted(target) for b in target[p] if b not in before[p])
    run = None
    try:
        with Workload(bs, work) as w:
            w.wait_acknowledged(200)
            run = kops_bg(*_execute_args(bs, plan), out=tmp_path / "execute.json")
            wait_in_flight(bs, topic)
            t_fault = time.monotonic()
            sb.stop(broker=dest, kill=True)
            err_file = Path(f"{run.out}.err")
            wait_for(lambda: "waits on down broker" in err_file.read_text() or run.proc.poll() is not None,
                     EXEC_TIMEOUT, 0.2, "kops to see every move in flight wait on the killed broker")
            t_seen = time.monotonic()
            rc, out, err = run.finish(EXEC_TIMEOUT + 60)
            seen_s = round(t_seen - t_fault, 1)  # the broker's session expiring, and kops' next poll
            stalled_s = round(time.monotonic() - t_seen, 1)  # kops' documented 60 s, and its exit
            doc = json.loads(out)
            sb.start(broker=dest)
            r = kops("reassign", "resume", "--poll-interval", "1", "--timeout", str(EXEC_TIMEOUT),
                     "--bootstrap-server", bs, "--output", "json", timeout=EXEC_TIMEOUT + 60)
            recover_s = wait_recovered(bs, t_fault)
            w.wait_acknowledged(100)
            res = w.finish()
        record(scenario="b. destination broker killed mid-move, back later; `resume`",
               workload=res, kops_exit=f"execute {rc}, resume {r.returncode}", recover_s=recover_s,
               kops_s=round(run.elapsed, 1), detail=f"broker {dest} killed; execute stopped waiting after "
               f"{stalled_s}s of seeing it down ({seen_s}s after the kill)")
        assert rc == 3, err[-3000:]
        assert doc["state"] != "complete", doc
        assert "down" in err or any("down" in n for n in doc.get("notes", [])), err[-2000:]
        assert "waits on down broker" in err, err[-2000:]
        assert 60 <= stalled_s < 60 + 30, "execute --wait waited on the dead broker past its documented bound"
        assert r.returncode == 0, r.stderr[-3000:]
        assert json.loads(r.stdout)["state"] == "complete"
        assert replicas(bs, topic) == target
        assert_clean(bs, record)
        assert res.lost == 0, res.lost_examples
    finally:
        sb.start(broker=dest)
        if run is not None:
            run.stop()
        _cleanup(bs, [topic, *work])


def test_destination_broker_back_with_an_empty_data_dir_mid_move(dsandbox, dbootstrap, tmp_path, kops_home, record):
    """b2. A destination broker is SIGKILLed mid-move, its data dir emptied (a replaced disk) and
    started again: it fetches every replica it holds from the start, the move to it included;
    kops completes (exit 0, the plan's target, nothing left), nothing acknowledged is lost. The
    fault is checked: moves in flight after the kill, the dir held partitions and was empty at
    the restart, and holds them all again at the end."""
    sb = dsandbox
    bs = sb.bootstrap_servers
    seen: dict = {}

    def replace_disk(moving) -> str:
        adding = sorted({b for (t, _), v in ongoing(bs).items() if t.startswith("moved-") for b in v["adding_replicas"]})
        assert adding, "no move in flight to aim at"
        dest = adding[0]
        data = sb.config.data_dir(dest)
        sb.stop(broker=dest, kill=True)
        try:
            left = moving()
            assert left > 0, "the kill landed after the moves had finished"
            held = [d for d in data.iterdir() if d.is_dir() and "-" in d.name]
            assert held, f"broker {dest}'s data dir {data} held no partition"
            for entry in data.iterdir():
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
            assert not any(data.iterdir())
        finally:
            sb.start(broker=dest)  # (back whatever happened: the next scenarios need every broker)
        seen.update(dest=dest, data=data, held=len(held))
        return (f"broker {dest} killed with {left} moves in flight, its data dir ({len(held)} partition dirs) "
                "emptied, started again")

    execute_through(sb, tmp_path, record, replace_disk,
                    scenario="b2. destination broker back with an empty data dir (replaced disk) mid-move")
    # every replica the broker holds is back on its new disk (the moved topic is gone: cleaned up)
    md = admin(bs).list_topics(timeout=10)
    want = {f"{t}-{p}" for t, tm in md.topics.items() for p, pm in tm.partitions.items() if seen["dest"] in pm.replicas}
    have = {d.name for d in seen["data"].iterdir() if d.is_dir()}
    assert want <= have, sorted(want - have)[:10]


def test_rack_partitioned_for_60s_mid_reassignment(dsandbox, dbootstrap, tmp_path, kops_home, record):
    """c. A whole rack (b, where moves land) is cut off from the rest of the cluster for 60 s
    while `execute --wait` runs (the cut checked: the ISRs drop rack b's brokers), then healed.
    Documented outcomes: kops completes (exit 0), or stops waiting on the unreachable
    destinations (exit 3) and `resume` completes."""
    sb, bs = dsandbox, dbootstrap
    work = workload_topics(bs)
    topic, _before, target, plan = data_topic(bs, sb, tmp_path)
    rack = "b"
    run = None
    try:
        with Workload(bs, work) as w:
            w.wait_acknowledged(200)
            run = kops_bg(*_execute_args(bs, plan), out=tmp_path / "execute.json")
            wait_in_flight(bs, topic)
            t_fault = time.monotonic()
            sb.faults.partition(rack=rack)
            try:
                cut_s = _wait_isr_shrank(sb, bs, work, rack, t_fault)  # the cut bit
                time.sleep(max(0.0, t_fault + 60 - time.monotonic()))  # the fault lasts 60 s
            finally:
                sb.faults.heal()
            rc, out, err = run.finish(EXEC_TIMEOUT + 60)
            codes = f"execute {rc}"
            if rc == 3:
                r = kops("reassign", "resume", "--poll-interval", "1", "--timeout", str(EXEC_TIMEOUT),
                         "--bootstrap-server", bs, "--output", "json", timeout=EXEC_TIMEOUT + 60)
                codes += f", resume {r.returncode}"
                assert r.returncode == 0, r.stderr[-3000:]
                out = r.stdout
            recover_s = wait_recovered(bs, t_fault)
            w.wait_acknowledged(100)
            res = w.finish()
        record(scenario="c. rack partitioned from the others for 60 s mid-reassignment, then healed",
               workload=res, kops_exit=codes, recover_s=recover_s, kops_s=round(run.elapsed, 1),
               detail=f"rack {rack} (brokers {sb.brokers_in_rack(rack)}) cut off; its followers out of the "
                      f"ISRs {cut_s:.0f} s later")
        assert rc in (0, 3), err[-3000:]
        assert json.loads(out)["state"] == "complete"
        assert replicas(bs, topic) == target
        assert_clean(bs, record)
        assert res.lost == 0, res.lost_examples
    finally:
        sb.faults.heal()
        if run is not None:
            run.stop()
        _cleanup(bs, [topic, *work])


def _wait_isr_shrank(sb, bootstrap: str, topics: list[str], rack: str, since: float) -> float:
    """Wait until a partition of ``topics`` led outside ``rack`` has dropped the rack's brokers
    from its ISR -- what proves them cut off (their followers cannot fetch: Kafka removes them
    after replica.lag.time.max.ms, 30 s) -- asking only brokers outside the rack (a cut-off
    broker's metadata is stale); returns the seconds from ``since``."""
    from confluent_kafka.admin import AdminClient

    cut = set(sb.brokers_in_rack(rack))
    outside = ",".join(sb.broker_address(b) for b in sb.broker_ids if b not in cut)

    def shrank() -> bool:
        md = AdminClient({"bootstrap.servers": outside}).list_topics(timeout=10)
        return any(pm.leader not in cut and set(pm.replicas) & cut and not set(pm.isrs) & cut
                   for t in topics for pm in md.topics[t].partitions.values())

    wait_for(shrank, 90, 1.0, f"a partition led outside rack {rack} to drop its brokers {sorted(cut)} from the ISR")
    return time.monotonic() - since


def _restart_zookeeper_soon(sb, delay_s: float, down_s: float) -> threading.Thread:
    def go():
        time.sleep(delay_s)
        sb.faults.restart_zookeeper(down_s=down_s)
        t.back = time.monotonic()  # type: ignore[attr-defined]

    t = threading.Thread(target=go, daemon=True)
    t.back = None  # type: ignore[attr-defined]
    t.start()
    return t


def _wait_settled_after_zookeeper(sb, bootstrap: str, back: float, since: float) -> float:
    """After a ZooKeeper restart: a broker session that was not resumed in time expires at the
    latest one session timeout (plus a tick) after ZooKeeper is back, and its broker registers
    anew -- ISRs shrink and grow again. Waits until no session from before the restart can still
    expire, every broker is registered, and every partition is fully replicated; returns the
    seconds from ``since``."""
    from kops.sandbox.config import ZK_SESSION_TIMEOUT_MS, ZK_TICK_MS

    def settled() -> bool:
        return (time.monotonic() > back + (ZK_SESSION_TIMEOUT_MS + ZK_TICK_MS) / 1000
                and sb.registered_brokers() == set(sb.broker_ids) and fully_replicated(bootstrap))

    wait_for(settled, 180, 0.5, "ZooKeeper sessions settled, every broker registered, every partition fully replicated")
    return round(time.monotonic() - since, 1)


def test_zookeeper_restarted_during_execute_via_zookeeper(dsandbox, dbootstrap, tmp_path, kops_home, record):
    """d1. ZooKeeper is restarted (down ~4 s) while `execute --via zookeeper --wait` runs: kops'
    ZooKeeper client rides over it (kazoo retries), the execution completes (exit 0)."""
    sb = dsandbox

    def restart_zookeeper(moving) -> str:
        # counted just before the stop, as for a killed controller: a ZooKeeper-mode controller
        # writes a move's completion to ZooKeeper, so none completes while it is down (counted once
        # it is back instead, a slow restart on a loaded host can let every copy finish meanwhile,
        # and the moves complete as soon as it answers: a race, not a proof)
        left = moving()
        assert left > 0, "the moves had finished before ZooKeeper was stopped"
        sb.faults.restart_zookeeper(down_s=4)
        return f"ZooKeeper down ~4 s with {left} moves in flight ({moving()} once it was back)"

    # 24 MB a partition (~24 s of moving): ZooKeeper's stop, 4 s down and start outlast 6 MB
    execute_through(sb, tmp_path, record, restart_zookeeper, mb=24,
                    extra=("--via", "zookeeper", "--zookeeper", sb.zookeeper_connect),
                    scenario="d. ZooKeeper restarted during `reassign execute --via zookeeper`")


def test_zookeeper_restarted_during_leader_rebalance(dsandbox, dbootstrap, tmp_path, kops_home, record):
    """d2. Leadership is skewed (a broker restarted: it leads nothing, back in every ISR); ZooKeeper
    is restarted and `kops leader rebalance --zookeeper` starts once it is down (checked: it no
    longer answers ruok) and before it is back. kops never hangs; documented outcomes of that
    run, each checked against its JSON document: 0 (it rode over the restart), 1 (cluster
    unreachable) or 3 (a broker not reached, named); the next cron run restores every preferred
    leader (exit 0), and nothing is left behind (assert_clean)."""
    sb, bs = dsandbox, dbootstrap
    work = workload_topics(bs, partitions=12)
    victim = 2
    try:
        with Workload(bs, work) as w:
            w.wait_acknowledged(200)
            sb.stop(broker=victim)
            sb.start(broker=victim)
            wait_recovered(bs, time.monotonic())  # back in every ISR: only ZooKeeper's restart is in the way
            t_fault = time.monotonic()
            restart = _restart_zookeeper_soon(sb, 0.0, 4)
            host, _, port = sb.zookeeper_connect.rpartition(":")
            wait_for(lambda: not zk_ruok(host, int(port), timeout_s=0.2), 30, 0.05, "ZooKeeper down")
            t0 = time.monotonic()
            assert restart.back is None, "ZooKeeper was back before kops started"
            r = kops("leader", "rebalance", "--bootstrap-server", bs, "--zookeeper", sb.zookeeper_connect,
                     "--imbalance-threshold", "0", "--output", "json", timeout=REBALANCE_BOUND_S + 60)
            took = time.monotonic() - t0
            restart.join(60)
            assert restart.back is not None, "ZooKeeper did not come back"
            assert restart.back > t0, "the restart did not overlap kops' run"
            first, first_said = r.returncode, f"first run: exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
            _assert_documented_outcome(first, r.stdout, r.stderr)
            codes = f"rebalance {first}"
            resent = len(json.loads(r.stdout).get("elections", {}).get("resent", []))
            # the cron job's next run, once the cluster has recovered from the restart: brokers whose
            # ZooKeeper sessions expired (seen ~10 s after the restart, after a first run that had
            # exited 0; and in run M after every partition had looked fully replicated again) lose
            # their leadership to the controller and rejoin the ISRs without it
            _wait_settled_after_zookeeper(sb, bs, restart.back, t_fault)
            r = kops("leader", "rebalance", "--bootstrap-server", bs, "--zookeeper", sb.zookeeper_connect,
                     "--imbalance-threshold", "0", "--output", "json", timeout=REBALANCE_BOUND_S + 60)
            codes += f", next run {r.returncode}"
            recover_s = wait_recovered(bs, t_fault)
            w.wait_acknowledged(100)
            res = w.finish()
        assert r.returncode == 0, _rebalance_failures(r.stdout) + r.stderr[-2000:]
        record(scenario="d. ZooKeeper restarted during `leader rebalance`", workload=res,
               kops_exit=codes, recover_s=recover_s, kops_s=round(took, 1),
               detail="ZooKeeper down ~4 s, kops started while it was down"
                      + (f"; its election request sent again ({resent}): the first got no answer" if resent else ""))
        assert_clean(bs, record)
        assert took < REBALANCE_BOUND_S, f"leader rebalance waited past its bounds; {first_said}"
        from tests.cluster.kafka_helpers import admin

        def preferred():
            md = admin(bs).list_topics(timeout=10)
            return all(pm.leader == pm.replicas[0] for t in work for pm in md.topics[t].partitions.values())

        wait_for(preferred, 30, 0.5, "every workload partition led by its preferred replica")
        assert res.lost == 0, res.lost_examples
    finally:
        sb.start(broker=victim)
        _cleanup(bs, work)


def _assert_documented_outcome(code: int, stdout: str, stderr: str) -> None:
    """A `leader rebalance --output json` run that met ZooKeeper down ends in one of its
    documented ways, and its one JSON document says which and why: 0 done (elected, already
    balanced, or stepped aside with its reason), 1 the cluster unreachable (an error document),
    3 not done (the brokers not reached named, or an error document: the run lock held)."""
    doc = json.loads(stdout)  # exactly one document, whatever the outcome
    context = _rebalance_failures(stdout) + stderr[-2000:]
    said = doc["error"]["exit_code"] if "error" in doc else doc["exit_code"]
    assert said == code, context
    if code == 0:
        assert doc["status"] in ("elected", "balanced", "stepped_aside"), context
        assert doc["status"] != "stepped_aside" or doc.get("reason"), context
    elif code == 1:
        assert "error" in doc and doc["error"]["message"], context
    elif code == 3:
        assert "error" in doc or doc["unreachable_brokers"], context
    else:
        raise AssertionError(f"exit {code} is not a documented outcome: {context}")


def _rebalance_failures(stdout: str) -> str:
    """What a `leader rebalance --output json` run says went wrong (for an assertion message)."""
    try:
        doc = json.loads(stdout)
    except ValueError:
        return stdout[-2000:]
    failed = [o for o in (doc.get("elections") or {}).get("outcomes", []) if o.get("status") != "elected"]
    return json.dumps({k: doc.get(k) for k in ("status", "exit_code", "summary", "reason", "unreachable_brokers",
                                               "blocked")} | {"not elected": failed[:10]})[:3000]


CUT_TIMEOUT = 45  # j: the cut-off run's --timeout


def _host_cut_off(bootstrap: str) -> bool:
    """The host reaches no broker: a metadata request from here gets no answer."""
    try:
        admin(bootstrap).list_topics(timeout=3)
    except Exception:
        return True
    return False


def test_kops_host_cut_off_mid_execute_then_resume(dsandbox, dbootstrap, tmp_path, kops_home, record):
    """j. The host that runs `execute --wait --timeout 45` loses the whole cluster while moves are
    in flight (every node drops this host; the nodes still reach each other, so the moves go on
    under their throttles). kops ends at its --timeout, not after each read's own timeouts and
    retries (minutes per poll before: a cut-off run must not hang), exit 3, saying the cluster
    stopped answering and naming the throttles it could not lift. Healed, `resume` -- run as from
    another host, with a KOPS_HOME of its own that holds no journal -- finds the execution in the
    cluster's journal and drives it to the end: the plan's target, every throttle lifted, nothing lost. The cut is checked: the host
    reaches no broker."""
    sb, bs = dsandbox, dbootstrap
    work = workload_topics(bs)
    topic, _before, target, plan = data_topic(bs, sb, tmp_path, mb=12)
    run = None
    try:
        with Workload(bs, work) as w:
            w.wait_acknowledged(200)
            args = _execute_args(bs, plan)
            args[args.index("--timeout") + 1] = str(CUT_TIMEOUT)
            run = kops_bg(*args, out=tmp_path / "execute.json")
            wait_in_flight(bs, topic)
            left = moves_in_flight(bs, topic)
            t_fault = time.monotonic()
            try:
                sb.faults.cut_host()
                assert _host_cut_off(bs), "the host still reaches the cluster after the cut"
                rc, out, err = run.finish(CUT_TIMEOUT + 120)
                ended_s = round(time.monotonic() - t_fault, 1)
                assert _host_cut_off(bs), "the cut ended before kops did"
            finally:
                sb.faults.heal()
            wait_for(lambda: not _host_cut_off(bs), 60, 0.5, "the host to reach the cluster again")
            # resumed as from another host: a KOPS_HOME of its own, empty (no local journal; the
            # execution is found in the cluster's)
            other_host = tmp_path / "another-host"
            other_host.mkdir()
            r = kops("reassign", "resume", "--poll-interval", "1", "--timeout", str(EXEC_TIMEOUT),
                     "--bootstrap-server", bs, "--output", "json", timeout=EXEC_TIMEOUT + 60,
                     env={"KOPS_HOME": str(other_host)})
            recover_s = wait_recovered(bs, t_fault)
            w.wait_acknowledged(100)
            res = w.finish()
        record(scenario="j. the host running `reassign execute --wait` cut off from the cluster mid-move; "
                        "healed, `resume` from another host (a KOPS_HOME of its own)",
               workload=res, kops_exit=f"execute {rc}, resume {r.returncode}", recover_s=recover_s,
               kops_s=round(run.elapsed, 1),
               detail=f"cut with {left} moves in flight; kops (--timeout {CUT_TIMEOUT}) ended {ended_s} s after "
                      f"the cut, {run.elapsed:.0f} s after its start")
        assert left > 0, "the cut landed after the moves had finished"
        assert rc == 3, out[-2000:] + err[-2000:]
        doc = json.loads(out)  # not done, and why: the cluster went silent, its throttles are still set
        assert doc["state"] == "running" and doc["throttles_left"], out[-2000:]
        assert any(n.startswith("no answer from the cluster for the last") for n in doc["notes"]), doc["notes"]
        assert run.elapsed < CUT_TIMEOUT + 30, f"a cut-off run went {run.elapsed:.0f} s past start (--timeout {CUT_TIMEOUT})"
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
        assert json.loads(r.stdout)["state"] == "complete", r.stdout[-2000:]
        assert replicas(bs, topic) == target
        assert_clean(bs, record)
        assert res.lost == 0, res.lost_examples
    finally:
        if run is not None:
            run.stop()
        sb.faults.heal()
        _cleanup(bs, [topic, *work])
