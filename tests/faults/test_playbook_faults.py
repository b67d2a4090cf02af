"""The broker playbooks end to end on the containerised cluster, under the workload (issue 16,
item 4g): a broker lost for good and replaced by a new broker id in its rack (`replace-broker`),
the cluster grown by two brokers (`add-brokers`), a broker emptied (`decommission-broker`).

The cluster changes shape as an operator's does: `kops sandbox remove` / `kops sandbox add`
take a broker out for good and bring new broker ids in (containers of the same image, configs
written like the others'). Every scenario asserts: no acknowledged message lost, the playbook's
exit code (0) and final state, the cluster where the playbook says it leaves it, nothing of
kops' left behind (throttles, reassignments, unfinished journal, lock). Each then gives the
session's cluster back as it found it: brokers 0-5 in racks a,a,b,b,c,c, all alive, holding
replicas, no other broker.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import Counter

import pytest
from tests.faults.helpers import (
    admin,
    assert_clean,
    assignment,
    create_topic,
    delete_topic,
    fully_replicated,
    kops,
    unique,
    wait_recovered,
    workload_topics,
)
from tests.faults.workload import Workload

pytestmark = pytest.mark.faults

THROTTLE = "10MB"  # MiB/s: the moves take a few seconds, under the workload
PLAYBOOK_TIMEOUT = 600
BASE_RACKS = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}


# -- helpers ---------------------------------------------------------------------------------------
def _sandbox(sb, *args: str):
    """`kops sandbox ARGS --workdir W --output json`, as an operator runs it."""
    return kops("sandbox", *args, "--workdir", str(sb.workdir), "--output", "json", timeout=300)


def _current(sb) -> str:
    """The sandbox's bootstrap servers now (its state file says which brokers it has)."""
    sb.status()
    return sb.bootstrap_servers


def _playbook(name: str, bootstrap: str, *params: str) -> tuple[int, dict, str, float]:
    """`kops playbook run NAME --param ... --yes --output json`: (exit code, report, stderr, seconds)."""
    args = ["playbook", "run", name, "--yes", "--bootstrap-server", bootstrap, "--output", "json"]
    for p in params:
        args += ["--param", p]
    t0 = time.monotonic()
    r = kops(*args, timeout=PLAYBOOK_TIMEOUT + 60)
    secs = round(time.monotonic() - t0, 1)
    try:
        rep = json.loads(r.stdout)
    except ValueError:
        rep = {}
    return r.returncode, rep, r.stderr, secs


def _leaders(bootstrap: str) -> Counter[int]:
    md = admin(bootstrap).list_topics(timeout=10)
    return Counter(pm.leader for tm in md.topics.values() for pm in tm.partitions.values())


def _replica_counts(bootstrap: str) -> Counter[int]:
    return Counter(b for reps in assignment(bootstrap).values() for b in reps)


def _rack_unsafe(bootstrap: str, racks: dict[int, str]) -> list[str]:
    """Partitions of RF 3 not spread over three racks."""
    return [f"{t}-{p} {reps}" for (t, p), reps in assignment(bootstrap).items()
            if len(reps) == 3 and len({racks.get(b) for b in reps}) != 3]


def _data_topic(bootstrap: str, partitions: int = 6) -> str:
    """A topic with some data to move (RF 3 over the racks, min.insync.replicas=2)."""
    t = unique("pbdata")
    create_topic(bootstrap, t, partitions=partitions, rf=3, min_isr=2, mb_per_partition=2)
    return t


def _assert_base_shape(sb) -> None:
    sb.status()
    assert sb.broker_ids == list(BASE_RACKS) and sb.racks == BASE_RACKS
    assert sb.alive_brokers() == list(BASE_RACKS)


def _cleanup(bootstrap: str, topics: list[str]) -> None:
    kops("reassign", "cancel", "--bootstrap-server", bootstrap)
    for t in topics:
        delete_topic(bootstrap, t)


# -- g1. a broker lost for good: replace-broker --------------------------------------------------------
def _replace_back(sb, dead: int, new: int, rack: str, port: int) -> None:
    """Give the session's cluster back: broker ``dead`` again (empty, same rack and port when
    that port is free), the replicas of ``new`` moved back onto it by the same playbook (on a
    healthy cluster this time), ``new`` removed."""
    sb.status()
    if dead not in sb.broker_ids:
        from kops.sandbox import procs

        sb.add(dead, rack, port=None if procs.port_in_use(sb.config.host, port) else port)
    if new in sb.broker_ids:
        bs = _current(sb)
        if _replica_counts(bs)[new]:
            rc, rep, err, _ = _playbook("replace-broker", bs, f"old={new}", f"new={dead}", f"throttle={THROTTLE}")
            assert rc == 0, err[-3000:]
        sb.remove(new, purge=True)
    _assert_base_shape(sb)


def test_replace_a_broker_lost_for_good(dsandbox, dbootstrap, tmp_path, kops_home, record):
    """g. A broker is SIGKILLed and lost for good (`kops sandbox remove --purge`); a new broker
    id joins in its rack (`kops sandbox add`); `kops playbook run replace-broker` moves every
    replica of the dead broker onto the new one at the same positions, though the cluster is
    under-replicated when it starts (the gate tolerates what only the dead broker causes)."""
    sb, bs = dsandbox, dbootstrap
    dead, new = 3, 6
    rack, port = sb.rack_of(dead), sb.broker_port(dead)
    work = workload_topics(bs)
    data = _data_topic(bs)
    done = False
    try:
        with Workload(bs, work) as w:
            w.wait_acknowledged(200)
            before = assignment(bs)
            on_dead = {tp for tp, reps in before.items() if dead in reps}
            t_fault = time.monotonic()
            sb.stop(broker=dead, kill=True)
            r = _sandbox(sb, "remove", "--broker", str(dead), "--purge")
            assert r.returncode == 0, r.stderr
            assert json.loads(r.stdout)["was_running"] is False  # already dead
            r = _sandbox(sb, "add", "--broker", str(new), "--rack", rack)
            assert r.returncode == 0, r.stderr
            added = json.loads(r.stdout)
            bs2 = added["bootstrap_servers"]
            assert added["rack"] == rack and f"127.0.0.1:{port}," not in f"{bs2},"
            rc, rep, err, kops_s = _playbook("replace-broker", bs2, f"old={dead}", f"new={new}",
                                             f"throttle={THROTTLE}")
            recover_s = wait_recovered(bs2, t_fault)
            w.wait_acknowledged(100)
            res = w.finish()
        record(scenario="g. broker lost for good, new broker id in its rack: `playbook run replace-broker`",
               workload=res, kops_exit=rc, recover_s=recover_s, kops_s=kops_s,
               detail=f"broker {dead} (rack {rack}) killed and removed, broker {new} added; "
                      f"{len(on_dead)} partitions moved")
        assert rc == 0, err[-3000:]
        assert rep["status"] == "done" and rep["partitions_moved"] == len(on_dead), rep
        gate = next(s for s in rep["steps"] if s["id"] == "gate")
        assert f"broker(s) [{dead}] being down" in gate["summary"], gate
        after = assignment(bs2)
        assert [tp for tp, reps in after.items() if dead in reps] == []
        assert {tp: after[tp] for tp in on_dead} == {
            tp: [new if b == dead else b for b in before[tp]] for tp in on_dead}  # same positions
        assert all(after[tp] == reps for tp, reps in before.items() if tp not in on_dead)  # nothing else moved
        assert fully_replicated(bs2)
        assert _rack_unsafe(bs2, {**BASE_RACKS, new: rack}) == []
        assert _leaders(bs2)[new] > 0  # preferred leadership moved with the replicas
        sb.status()
        assert_clean(bs2, record)
        assert res.lost == 0, res.lost_examples
        _replace_back(sb, dead, new, rack, port)
        done = True
    finally:
        if not done:
            with contextlib.suppress(Exception):
                _replace_back(sb, dead, new, rack, port)
        _cleanup(_current(sb), [data, *work])


# -- g2. grow by two brokers: add-brokers ---------------------------------------------------------------
def _shrink_back(sb, added: list[int], tmp_path) -> None:
    """Move every replica off the added brokers (kops' own decommission plan, forced moves only)
    and remove them."""
    sb.status()
    present = [b for b in added if b in sb.broker_ids]
    if not present:
        return
    bs = _current(sb)
    if any(_replica_counts(bs)[b] for b in present):
        p = kops("plan", "decommission", "--brokers", ",".join(map(str, present)), "--no-balance",
                 "--bootstrap-server", bs, "--output", "json")
        assert p.returncode == 0, p.stderr
        plan = tmp_path / "shrink.json"
        plan.write_text(json.dumps(json.loads(p.stdout)["plan"]))
        e = kops("reassign", "execute", "--reassignment-json-file", str(plan), "--throttle", "10485760", "--wait",
                 "--yes", "--bootstrap-server", bs, timeout=PLAYBOOK_TIMEOUT)
        assert e.returncode == 0, e.stderr[-3000:]
    for b in present:
        sb.remove(b, purge=True)
    _assert_base_shape(sb)


def test_add_brokers_after_growing_by_two(dsandbox, dbootstrap, tmp_path, kops_home, record):
    """g. The cluster grows by two new broker ids, in racks a and c (`kops sandbox add`), under
    the workload; `kops playbook run add-brokers` gives them their share of replicas and
    leadership: every partition stays fully replicated and spread over the three racks."""
    sb, bs = dsandbox, dbootstrap
    new = {6: "a", 7: "c"}
    work = workload_topics(bs)
    data = _data_topic(bs)
    done = False
    try:
        with Workload(bs, work) as w:
            w.wait_acknowledged(200)
            t0 = time.monotonic()
            for b, rack in new.items():
                r = _sandbox(sb, "add", "--broker", str(b), "--rack", rack)
                assert r.returncode == 0, r.stderr
            bs2 = json.loads(r.stdout)["bootstrap_servers"]
            rc, rep, err, kops_s = _playbook("add-brokers", bs2, "brokers=6,7", f"throttle={THROTTLE}")
            recover_s = wait_recovered(bs2, t0)
            w.wait_acknowledged(100)
            res = w.finish()
        counts = _replica_counts(bs2)
        record(scenario="g. cluster grown by two brokers: `playbook run add-brokers`",
               workload=res, kops_exit=rc, recover_s=recover_s, kops_s=kops_s,
               detail=f"brokers 6 (rack a) and 7 (rack c) added; they hold {counts[6]} and {counts[7]} "
                      f"replicas after {rep.get('partitions_moved', '?')} partitions moved")
        assert rc == 0, err[-3000:]
        assert rep["status"] == "done" and rep["partitions_moved"] > 0, rep
        racks = {**BASE_RACKS, **new}
        assert counts[6] > 0 and counts[7] > 0, counts
        # the new brokers carry as many replicas as the others of their rack, within 1
        for b, rack in new.items():
            mates = [counts[x] for x, r in racks.items() if r == rack and x != b]
            assert counts[b] >= min(mates) - 1, (b, counts)
        assert _leaders(bs2)[6] > 0 and _leaders(bs2)[7] > 0
        assert fully_replicated(bs2)
        assert _rack_unsafe(bs2, racks) == []
        sb.status()
        assert_clean(bs2, record)
        assert res.lost == 0, res.lost_examples
        _shrink_back(sb, list(new), tmp_path)
        done = True
    finally:
        if not done:
            with contextlib.suppress(Exception):
                _shrink_back(sb, list(new), tmp_path)
        _cleanup(_current(sb), [data, *work])


# -- g3. decommission-broker ---------------------------------------------------------------------------
def test_decommission_broker(dsandbox, dbootstrap, tmp_path, kops_home, record):
    """g. `kops playbook run decommission-broker` empties one broker under the workload: no
    replica and no leadership left on it, every partition fully replicated and still spread over
    the three racks (its replicas go to the other broker of its rack). Then `add-brokers` for
    that broker gives it its share back."""
    sb, bs = dsandbox, dbootstrap
    victim = 5
    work = workload_topics(bs)
    data = _data_topic(bs)
    try:
        with Workload(bs, work) as w:
            w.wait_acknowledged(200)
            held = _replica_counts(bs)[victim]
            t0 = time.monotonic()
            rc, rep, err, kops_s = _playbook("decommission-broker", bs, f"broker={victim}", f"throttle={THROTTLE}")
            recover_s = wait_recovered(bs, t0)
            w.wait_acknowledged(100)
            res = w.finish()
        record(scenario="g. `playbook run decommission-broker`", workload=res, kops_exit=rc,
               recover_s=recover_s, kops_s=kops_s,
               detail=f"broker {victim} (rack {BASE_RACKS[victim]}) emptied of its {held} replicas")
        assert rc == 0, err[-3000:]
        assert rep["status"] == "done", rep
        assert held > 0
        assert _replica_counts(bs)[victim] == 0
        assert _leaders(bs)[victim] == 0
        assert fully_replicated(bs)
        assert _rack_unsafe(bs, BASE_RACKS) == []
        assert_clean(bs, record)
        assert res.lost == 0, res.lost_examples
        # its share back (the broker is like a new one now)
        rc, rep, err, _ = _playbook("add-brokers", bs, f"brokers={victim}", f"throttle={THROTTLE}")
        assert rc == 0, err[-3000:]
        assert _replica_counts(bs)[victim] > 0
    finally:
        _cleanup(bs, [data, *work])
    _assert_base_shape(sb)
