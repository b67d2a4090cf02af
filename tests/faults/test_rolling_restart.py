"""Rolling restarts (issue 20) on the containerised cluster, under the workload: the shipped
`rolling-restart` playbook restarts every broker one at a time with the sandbox's own hook
(`kops sandbox restart --broker {broker}`, a graceful stop and a start of the broker's container).

Asserted throughout: an idempotent acks=all producer and a consumer run on RF 3 /
min.insync.replicas=2 topics; a sampler reads the cluster's metadata every few hundred
milliseconds and no partition of those topics is ever offline or under min ISR. At the end every
acknowledged message is read back, every replica list is what it was and every partition is led by
its preferred replica. A run killed mid-loop and resumed restarts only the brokers it had not
finished; a failing hook stops the run with exit 3, the broker's leadership still away.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from tests.faults.helpers import (
    admin,
    assert_clean,
    delete_topic,
    kops,
    kops_bg,
    wait_for,
    wait_fully_replicated,
    workload_topics,
)
from tests.faults.workload import Workload
from tests.sampling import Sampler

pytestmark = pytest.mark.faults

RUN_TIMEOUT = 900


def _assignment_and_leaders(bootstrap: str) -> tuple[dict, dict]:
    md = admin(bootstrap).list_topics(timeout=10)
    reps = {(t, p): list(pm.replicas) for t, tm in md.topics.items() for p, pm in tm.partitions.items()}
    leaders = {(t, p): pm.leader for t, tm in md.topics.items() for p, pm in tm.partitions.items()}
    return reps, leaders


def _registered_at(sb) -> dict[int, int]:
    """Broker id -> when it registered in ZooKeeper (its ephemeral node's creation time, ms): a
    broker that restarted registers anew."""
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=sb.zookeeper_connect, timeout=10)
    zk.start(timeout=15)
    try:
        return {b: zk.get(f"/brokers/ids/{b}")[1].ctime for b in sb.broker_ids}
    finally:
        zk.stop()
        zk.close()


def _not_preferred(bootstrap: str) -> list[str]:
    reps, leaders = _assignment_and_leaders(bootstrap)
    return [f"{t}-{p} led by {leaders[(t, p)]}, prefers {r[0]}" for (t, p), r in reps.items() if leaders[(t, p)] != r[0]]


def _from_preferred_leaders(bootstrap: str) -> None:
    """Start from a fully replicated cluster led by its preferred replicas, whatever the scenarios
    before left (a controller killed leaves leaders elsewhere: the sandbox's controller does not
    rebalance), so that "preferred leaders restored" is this scenario's own doing."""
    wait_fully_replicated(bootstrap, 120, "a fully replicated cluster to start from")
    kops("leader", "elect", "--election-type", "preferred", "--all-topic-partitions", "--bootstrap-server", bootstrap)
    wait_for(lambda: not _not_preferred(bootstrap), 60, 0.5, "preferred leaders everywhere to start from")


def _hook(sb, log: Path, *, fail: bool = False) -> str:
    """The sandbox hook, logging each broker it restarts (``fail``: log, then exit 7)."""
    if fail:
        return f"echo {{broker}} >> {shlex.quote(str(log))}; echo 'systemctl: unit kafka failed' >&2; exit 7"
    restart = shlex.join([sys.executable, "-m", "kops", "sandbox", "restart", "--broker", "BROKER",
                          "--workdir", str(sb.workdir)]).replace("BROKER", "{broker}")
    return f"echo {{broker}} >> {shlex.quote(str(log))} && {restart}"


def _run_args(bootstrap: str, *params: str) -> list[str]:
    args = ["playbook", "run", "rolling-restart", "--bootstrap-server", bootstrap, "--output", "json", "--yes"]
    for p in params:
        args += ["--param", p]
    return args


def _restarted(log: Path) -> list[int]:
    return [int(x) for x in log.read_text().split()] if log.exists() else []


def _state(kops_home: Path, run_id: str | None = None) -> dict:
    runs = sorted((kops_home / "playbook-runs").glob("rolling-restart-*.json"))
    if run_id:
        runs = [r for r in runs if r.stem == run_id]
    assert runs, "no state file of a rolling-restart run"
    return json.loads(runs[-1].read_text())


def _give_back(sb, bootstrap: str) -> None:
    """Every broker running and every leadership where it was (after a failed scenario)."""
    sb.status()
    for b in sb.broker_ids:
        if b not in sb.alive_brokers():
            sb.start(broker=b)
    for b in sb.broker_ids:
        kops("leader", "restore", "--broker", str(b), "--bootstrap-server", bootstrap)


def _lift_cron_pause(bootstrap: str) -> None:
    """A run that did not finish leaves kops' cron jobs paused (for 12 h): the next scenarios
    need them."""
    kops("rebalance", "unpause", "--bootstrap-server", bootstrap)


def test_rolling_restart_of_the_whole_cluster(dsandbox, dbootstrap, tmp_path, kops_home, record):
    """Every broker restarted once, rack by rack, the controller last; not a partition offline or
    under min ISR at any sample; every acknowledged message read; replica lists and preferred
    leaders as before; kops' cron jobs stepped aside meanwhile."""
    sb, bs = dsandbox, dbootstrap
    work = workload_topics(bs)
    log = tmp_path / "restarted.log"
    done = False
    try:
        _from_preferred_leaders(bs)
        before, _ = _assignment_and_leaders(bs)
        controller = admin(bs).list_topics(timeout=10).controller_id
        registered = _registered_at(sb)
        addresses = {b: sb.containers.ip(b) for b in sb.broker_ids}
        assert None not in addresses.values() and len(set(addresses.values())) == len(addresses), addresses
        with Workload(bs, work) as w, Sampler(bs, work) as sampler:
            w.wait_acknowledged(200)
            t0 = time.monotonic()
            run = kops_bg(*_run_args(bs, f"restart_command={_hook(sb, log)}"), out=tmp_path / "run.json")
            # while the run lasts, kops' leader cron job steps aside
            wait_for(lambda: len(_restarted(log)) >= 1, 300, 0.5, "the first broker's restart")
            cron = kops("leader", "rebalance", "--bootstrap-server", bs, "--output", "json")
            rc, out, err = run.finish(RUN_TIMEOUT)
            run_s = round(time.monotonic() - t0, 1)
            w.wait_acknowledged(100)
            res = w.finish()
        rep = json.loads(out) if out.strip() else {}
        order = _restarted(log)
        record(scenario="rolling restart of every broker (sandbox hook): `playbook run rolling-restart`",
               workload=res, kops_exit=rc, kops_s=run_s,
               detail=f"order {order}; {sampler.samples} metadata samples (at most {sampler.max_gap_s:.1f} s apart), "
                      f"{len(sampler.bad)} offline/under-min-ISR")
        assert rc == 0, err[-4000:]
        assert rep["status"] == "done", rep
        # each broker once, rack by rack (racks in one block each), the controller last
        assert sorted(order) == sorted(sb.broker_ids), order
        again = _registered_at(sb)
        assert all(again[b] > registered[b] for b in sb.broker_ids), (registered, again)  # each restarted
        # every broker came back at its own address (a reused address once sent a follower to the wrong broker)
        assert {b: sb.containers.ip(b) for b in sb.broker_ids} == addresses
        assert all(a.endswith(f".{50 + b}") for b, a in addresses.items()), addresses
        assert [again[b] for b in order] == sorted(again.values()), (order, again)  # one after the other
        racks = [sb.rack_of(b) for b in order]
        assert racks == sorted(racks, key=lambda r: racks.index(r)), racks
        assert order[-1] == controller, (order, controller)
        assert sampler.samples > 50 and sampler.max_gap_s < 15, (sampler.samples, sampler.max_gap_s)
        assert sampler.bad == [], sampler.bad[:10]
        assert res.lost == 0, res.lost_examples
        assert cron.returncode == 0 and "rolling-restart" in (cron.stdout + cron.stderr), cron.stdout + cron.stderr
        after, _ = _assignment_and_leaders(bs)
        assert {k: v for k, v in after.items() if k in before} == before
        wait_for(lambda: not _not_preferred(bs), 60, 0.5, "preferred leaders restored everywhere")
        st = _state(kops_home)
        hooks = [s for s in st["steps"] if s["type"] == "restart"]
        assert len(hooks) == len(sb.broker_ids) and all(s["result"]["exit_code"] == 0 for s in hooks)
        assert st["loops"]["each"] == order
        assert_clean(bs, record)
        done = True
    finally:
        if not done:
            with contextlib.suppress(Exception):
                _give_back(sb, bs)
            _lift_cron_pause(bs)
        for t in work:
            delete_topic(bs, t)


def test_rolling_restart_killed_mid_loop_resumes_with_the_rest(dsandbox, dbootstrap, tmp_path, kops_home, record):
    """kops is SIGKILLed once the first broker of rack b is done; `--resume RUN_ID` re-checks the
    broker it was on and finishes the loop: the finished broker is not restarted again."""
    sb, bs = dsandbox, dbootstrap
    work = workload_topics(bs, n=1)
    log = tmp_path / "restarted.log"
    rack_b = sb.brokers_in_rack("b")
    done = False
    try:
        _from_preferred_leaders(bs)
        with Workload(bs, work) as w, Sampler(bs, work) as sampler:
            w.wait_acknowledged(100)
            run = kops_bg(*_run_args(bs, f"restart_command={_hook(sb, log)}", "rack=b"), out=tmp_path / "run1.json")
            st: dict = {}

            def first_done() -> bool:
                nonlocal st
                with contextlib.suppress(AssertionError, ValueError, OSError):
                    st = _state(kops_home)
                    first = st["loops"]["each"][0]
                    return any(s["id"] == f"each.{first}.healthy" and s["status"] == "done" for s in st["steps"])
                return False

            wait_for(first_done, 300, 0.05, "the first broker of rack b done")
            os.kill(run.proc.pid, signal.SIGKILL)
            run.proc.wait(30)
            killed = _state(kops_home)
            in_restart = any(s["type"] == "restart" and s["status"] == "running" for s in killed["steps"])
            first, second = killed["loops"]["each"]
            r = kops("playbook", "run", "rolling-restart", "--resume", killed["run_id"], "--yes",
                     "--bootstrap-server", bs, "--output", "json", timeout=RUN_TIMEOUT)
            w.wait_acknowledged(100)
            res = w.finish()
        record(scenario="rolling restart killed mid-loop (SIGKILL), then --resume",
               workload=res, kops_exit=r.returncode,
               detail=f"rack b {rack_b}; restarted {_restarted(log)}; {sampler.samples} metadata samples (at most "
                      f"{sampler.max_gap_s:.1f} s apart), {len(sampler.bad)} offline/under-min-ISR")
        assert r.returncode == 0, r.stderr[-4000:]
        assert sorted(killed["loops"]["each"]) == sorted(rack_b)
        counts = Counter(_restarted(log))
        assert counts[first] == 1, counts  # finished before the kill: never again
        # the broker in progress: once, or twice when the kill came while its hook ran
        assert counts[second] in ((1, 2) if in_restart else (1,)), (counts, in_restart)
        assert set(counts) == set(rack_b)
        final = _state(kops_home, killed["run_id"])
        assert final["status"] == "done"
        first_steps = {s["id"]: s for s in killed["steps"] if s["id"].startswith(f"each.{first}.")}
        assert all(s["started_at"] == first_steps[s["id"]]["started_at"]
                   for s in final["steps"] if s["id"] in first_steps), "a finished broker's steps ran again"
        if any(s["id"].startswith(f"each.{second}.") and s["status"] != "pending" for s in killed["steps"]):
            assert "resuming at broker" in r.stderr and f"broker {second}" in r.stderr, r.stderr[-2000:]
        assert sampler.samples > 20 and sampler.max_gap_s < 15, (sampler.samples, sampler.max_gap_s)
        assert sampler.bad == [], sampler.bad[:10]
        assert res.lost == 0, res.lost_examples
        wait_for(lambda: not _not_preferred(bs), 60, 0.5, "preferred leaders restored")
        assert_clean(bs, record)
        done = True
    finally:
        if not done:
            with contextlib.suppress(Exception):
                _give_back(sb, bs)
            _lift_cron_pause(bs)
        for t in work:
            delete_topic(bs, t)


def test_rolling_restart_stops_when_the_hook_fails(dsandbox, dbootstrap, tmp_path, kops_home, record):
    """The hook exits 7: the run stops with exit 3 at that broker's restart, the exit code and the
    hook's output in the state file, the broker's leadership still away (it was demoted)."""
    sb, bs = dsandbox, dbootstrap
    work = workload_topics(bs, n=1)
    log = tmp_path / "restarted.log"
    target = sb.brokers_in_rack("c")[0]
    try:
        wait_fully_replicated(bs, 120, "a fully replicated cluster to start from")
        r = kops(*_run_args(bs, f"restart_command={_hook(sb, log, fail=True)}", f"brokers={target}"),
                 timeout=RUN_TIMEOUT)
        record(scenario="rolling restart whose hook fails", kops_exit=r.returncode,
               detail=f"broker {target}: hook exit 7")
        assert r.returncode == 3, (r.returncode, r.stderr[-3000:])
        rep = json.loads(r.stdout)
        assert rep["status"] == "failed", rep
        st = _state(kops_home, rep["run_id"])
        failed = next(s for s in st["steps"] if s["status"] == "failed")
        assert failed["id"] == f"each.{target}.restart", failed
        assert "exit code: 7" in failed["details"] and any("unit kafka failed" in d for d in failed["details"])
        assert _restarted(log) == [target]
        _, leaders = _assignment_and_leaders(bs)
        assert target not in leaders.values(), "the broker whose restart failed leads partitions again"
        assert f"--resume {rep['run_id']}" in r.stderr
    finally:
        _lift_cron_pause(bs)
        kops("leader", "restore", "--broker", str(target), "--bootstrap-server", bs)
        wait_for(lambda: not _not_preferred(bs), 60, 0.5, "preferred leaders restored")
        for t in work:
            delete_topic(bs, t)
