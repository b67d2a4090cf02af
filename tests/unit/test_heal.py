"""Self-healing's pure core: what ``heal step`` observes in a topology, how its memory keeps
first-seen times, what it decides (grace, outage, no ISR, --fix), what the planner is given for a
dead broker (its own rack first, rack-safe), the memory's records and the metrics."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
from hypothesis import given, settings as hsettings, strategies as st
from typer.testing import CliRunner

from kops.errors import EXIT_NOT_DONE, EXIT_OK, BadInput
from kops.model import Broker, Partition, Topic, Topology
from kops.ops.heal import anomalies, decide, memory
from kops.ops.heal.anomalies import (
    BROKER_FAILURE, CLEARED, FIXED, FIXING, IN_GRACE, NEW_BROKER, NO_ISR, RACK_UNSAFE, REFUSED, TOO_MUCH_DOWN,
    Anomaly, iso, observe, racks_seen, remember,
)
from kops.ops.heal.decide import Settings, planning_topology
from kops.ops.heal.step import HealResult, check, gauges
from kops.ops.replica_rebalance import StepBounds, plan_step
from kops.placement.racks import RackTree, rack_violation

RACKS = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
GRACE = 1800.0


def _assignment(n: int = 12) -> dict[int, tuple[int, ...]]:
    """RF 3, one replica per rack, spread evenly over the six brokers (replicas and preferred
    leaders within their balance band)."""
    a, b, c = (0, 1), (2, 3), (4, 5)
    return {p: (a[p % 2], b[(p // 2) % 2], c[(p // 4 + p) % 2])[p % 3:] + (a[p % 2], b[(p // 2) % 2], c[(p // 4 + p) % 2])[:p % 3]
            for p in range(n)}


def topo(dead=(), *, new=(), no_isr=(), assign=None, racks=RACKS) -> Topology:
    """As kops reads a cluster: a dead broker is not registered (no rack, not alive)."""
    brokers = [Broker(b, None, alive=False) if b in dead else Broker(b, r) for b, r in racks.items()]
    brokers += [Broker(b, "a") for b in new]
    parts = []
    for p, reps in (assign or _assignment()).items():
        isr = () if p in no_isr else tuple(b for b in reps if b not in dead)
        parts.append(Partition("t", p, reps, isr, isr[0] if isr else None, size_bytes=1000))
    return Topology(tuple(brokers), (Topic("t", tuple(parts), configs={"min.insync.replicas": "2"}),))


def seen(t: Topology, max_dead: int = 1, racks=RACKS):
    return observe(t, racks_seen(t, racks), max_dead_brokers=max_dead)


# ---------------------------------------------------------------------------------------------
# observe
# ---------------------------------------------------------------------------------------------


def test_a_healthy_cluster_has_no_anomaly():
    assert seen(topo()) == []


def test_a_dead_broker_holding_replicas_is_a_broker_failure_with_the_rack_it_had():
    (o,) = seen(topo(dead=(3,)))
    assert (o.key, o.kind, o.brokers, o.count) == ("broker_failure/3", BROKER_FAILURE, (3,), 6)
    assert "rack b" in o.detail


def test_a_dead_broker_heal_never_saw_registered_has_an_unknown_rack():
    t = topo(dead=(3,))
    (o,) = observe(t, racks_seen(t, {}), max_dead_brokers=1)
    assert "rack unknown" in o.detail


def test_more_dead_brokers_than_allowed_is_too_much_down():
    keys = [o.key for o in seen(topo(dead=(1, 3)))]
    assert keys == ["broker_failure/1", "broker_failure/3", "too_much_down"]
    assert [o.key for o in seen(topo(dead=(1, 3)), max_dead=2)] == ["broker_failure/1", "broker_failure/3"]


def test_a_whole_rack_down_is_too_much_down_whatever_the_count():
    found = {o.key: o for o in seen(topo(dead=(4, 5)), max_dead=5)}
    assert "every broker of rack c is down" in found["too_much_down"].detail


def test_partitions_without_isr_and_new_brokers_and_rack_unsafe_lists():
    found = {o.key: o for o in seen(topo(no_isr=(1, 2)))}
    assert found[NO_ISR].count == 2 and found[NO_ISR].partitions == ("t-1", "t-2")
    found = {o.key: o for o in seen(topo(new=(6,)))}
    assert list(found) == ["new_broker/6"]
    assign = _assignment()
    assign[0] = (0, 1, 2)  # two replicas in rack a
    found = {o.key: o for o in seen(topo(assign=assign))}
    assert found[RACK_UNSAFE].partitions == ("t-0",)
    # rack safety is not judged while a broker is down
    assert RACK_UNSAFE not in {o.key for o in seen(topo(dead=(5,), assign=assign))}


def test_excluded_topics_are_not_watched():
    import re

    t = topo(dead=(3,))
    assert observe(t, racks_seen(t, RACKS), max_dead_brokers=1, exclude=re.compile("t")) == []
    assert len(observe(t, racks_seen(t, RACKS), max_dead_brokers=1, exclude=re.compile("t.+"))) == 1
    # an outage is judged on every topic: excluded ones cannot hide a second broker down
    found = observe(topo(dead=(1, 3)), RACKS, max_dead_brokers=1, exclude=re.compile("t"))
    assert [o.key for o in found] == ["too_much_down"]


def _stacked(n: int = 12) -> dict[int, tuple[int, ...]]:
    """Rack-safe, but brokers 0, 2 and 4 hold three times what 1, 3 and 5 hold."""
    return {p: ((0, 2, 4), (2, 4, 0), (4, 0, 2), (1, 3, 5))[p % 4] if p % 4 < 3 else (1, 3, 5) for p in range(n)}


def test_replicas_or_leaders_off_their_band_are_unbalanced_and_a_cordoned_broker_below_it_is_not():
    found = {o.key: o for o in seen(topo(assign=_stacked()))}
    assert list(found) == ["unbalanced"]
    o = found["unbalanced"]
    assert o.brokers == (0, 1, 2, 3, 4, 5), o  # 0, 2, 4 above the band, 1, 3, 5 below it
    assert o.detail.startswith("replicas per broker 3-9, band 5.0-7.0") and "broker 0 holds 9" in o.detail, o.detail
    assert not seen(topo(assign=_assignment()))  # (within the band: nothing)
    # only while every broker is up and none is new (those come first)
    assert "unbalanced" not in {o.key for o in seen(topo(dead=(3,), assign=_stacked()))}
    assert "unbalanced" not in {o.key for o in seen(topo(new=(6,)))}
    # brokers 1, 3, 5 cordoned: nothing may fill them; 0, 2, 4 are still above the band
    t = topo(assign=_stacked())
    t = dataclasses.replace(t, brokers=tuple(dataclasses.replace(b, cordoned=b.id % 2 == 1) for b in t.brokers))
    assert seen(t)[0].brokers == (0, 2, 4)


def test_what_rack_safety_forces_is_not_unbalanced():
    # broker 5 lost for good and healed: broker 4, rack c's last broker, holds the rack's share alone
    racks = {b: r for b, r in RACKS.items() if b != 5}
    healed = {p: tuple(4 if b == 5 else b for b in r) for p, r in _assignment().items()}
    t = topo(assign=healed, racks=racks)
    counts = {b: sum(b in r for r in healed.values()) for b in racks}
    assert counts[4] == 12 and max(v for b, v in counts.items() if b != 4) <= 6  # (outside the cluster's band)
    assert not seen(t, racks=racks)
    # within a rack, the same imbalance is one
    skewed = {p: tuple(0 if b == 1 else b for b in r) if p < 4 else r for p, r in healed.items()}
    found = seen(topo(assign=skewed, racks=racks), racks=racks)
    assert [o.key for o in found] == ["unbalanced"] and found[0].brokers == (1,), found  # (0 is within the cluster band)


def test_unbalanced_is_fixed_by_a_bounded_rebalance_step_when_named_in_fix(monkeypatch):
    cur = current(topo(assign=_stacked()), 0.0)
    d = decide.decide(cur, settings=Settings(broker_grace_s=0), now=1)
    assert d.fix is None and "not in --fix" in d.anomalies[0].why and d.exit_code == EXIT_OK
    d = decide.decide(cur, settings=Settings(broker_grace_s=0, fix=frozenset({"unbalanced"})), now=1)
    assert d.fix.goal.kind == "rebalance" and d.fix.rebalance and d.fix.goals is None
    run = _Run(monkeypatch, topo(assign=_stacked()))
    res = run(0.0, broker_grace_s=0, fix=frozenset({"unbalanced"}))
    assert res.status == "moved" and run.executed, res.summary()
    moved = run.executed[0][0].assignment()
    after = {**_stacked(), **{p: r for (_t, p), r in moved.items()}}
    counts = {b: sum(b in r for r in after.values()) for b in RACKS}
    copies = sum(len(set(r) - set(_stacked()[p])) for p, r in after.items())
    assert 0 < copies <= 10 and max(counts.values()) - min(counts.values()) < 12, (copies, counts)  # bounded: --max-moves 10


# ---------------------------------------------------------------------------------------------
# the memory: first seen, ended, a new episode
# ---------------------------------------------------------------------------------------------


def test_an_empty_cordoned_broker_is_not_a_new_broker_to_fill():
    import dataclasses

    t = topo(new=(6, 7))
    t = dataclasses.replace(t, brokers=tuple(dataclasses.replace(b, cordoned=b.id == 6) for b in t.brokers))
    assert [o.key for o in seen(t)] == ["new_broker/7"]


def test_first_seen_is_kept_run_after_run_and_a_new_episode_starts_afresh():
    t = topo(dead=(3,))
    r1 = remember(seen(t), {}, now=1000.0)
    mem = {a.key: a for a in r1.current}
    r2 = remember(seen(t), mem, now=1600.0)
    assert r2.current[0].first_seen == 1000.0
    # back (before any fix): cleared; dead again later: first seen anew
    r3 = remember(seen(topo()), {a.key: a for a in r2.current}, now=1700.0)
    assert [(a.key, a.state, a.ended_at) for a in r3.ended] == [("broker_failure/3", CLEARED, 1700.0)]
    r4 = remember(seen(t), {a.key: a for a in r3.ended}, now=5000.0)
    assert r4.current[0].first_seen == 5000.0


def test_an_anomaly_heal_was_fixing_that_is_gone_is_fixed():
    a = Anomaly("broker_failure/3", BROKER_FAILURE, "broker 3", "", first_seen=1.0, state=FIXING)
    r = remember([], {a.key: a}, now=99.0)
    assert r.ended[0].state == FIXED and r.ended[0].ended_at == 99.0


def test_memory_records_round_trip_and_only_changes_are_written():
    a = Anomaly("broker_failure/3", BROKER_FAILURE, "broker 3", "d", first_seen=10.0, state=IN_GRACE, brokers=(3,),
                count=6)
    recs = memory.records([a], {3: "b"}, {"at": "x"}, now=20.0)
    mem = memory.parse(recs)
    assert mem.anomalies["broker_failure/3"] == a and mem.racks == {3: "b"} and mem.last_run == {"at": "x"}
    assert memory.changes(mem, memory.records([a], {3: "b"}, {"at": "x"}, now=30.0)) == {}
    a.state = FIXING
    assert list(memory.changes(mem, memory.records([a], {3: "b"}, {"at": "x"}, now=30.0))) == [
        "heal/anomaly/broker_failure/3"]
    # an ended anomaly is kept for the history, then deleted
    a.state, a.ended_at = FIXED, 40.0
    assert memory.records([a], {}, None, now=40.0 + memory.HISTORY_S + 1)["heal/anomaly/broker_failure/3"] is None
    assert memory.changes(memory.Memory(), {"heal/anomaly/x": None}) == {}


def test_a_run_like_the_last_one_writes_nothing_until_the_heartbeat_is_due():
    """Most cron runs on a quiet cluster write nothing (an acknowledged write cost 1.2 s of a 3 s
    run); the last run is written when its outcome changes, with other records, or hourly."""
    def run(at, status="nothing_to_do", summary="heal step: nothing to do; 0.4 s", code=0):
        return {"at": iso(at), "status": status, "exit_code": code, "summary": summary}

    mem = memory.parse(memory.records([], {3: "b"}, run(1000.0), now=1000.0))
    same = memory.records([], {3: "b"}, run(1300.0, summary="heal step: nothing to do; 1.9 s"), now=1300.0)
    assert memory.changes(mem, same) == {}
    due = memory.records([], {3: "b"}, run(1000.0 + memory.LAST_RUN_EVERY_S), now=0.0)
    assert list(memory.changes(mem, due)) == [memory.LAST_RUN_KEY]
    other = memory.records([], {3: "b"}, run(1300.0, "watching", "heal step: watching: broker 3; 0.4 s"), now=0.0)
    assert list(memory.changes(mem, other)) == [memory.LAST_RUN_KEY]
    failed = memory.records([], {3: "b"}, run(1300.0, code=1), now=0.0)
    assert list(memory.changes(mem, failed)) == [memory.LAST_RUN_KEY]
    # a record that changes anyway takes the last run with it
    moved = memory.records([], {3: "c"}, run(1300.0), now=0.0)
    assert list(memory.changes(mem, moved)) == [memory.ROSTER_KEY, memory.LAST_RUN_KEY]
    # nothing recorded yet: the first run is written
    assert list(memory.changes(memory.Memory(), memory.records([], {}, run(5.0), now=5.0))) == [
        memory.ROSTER_KEY, memory.LAST_RUN_KEY]


def test_unreadable_records_are_named_and_ignored():
    mem = memory.parse({"heal/anomaly/x": b"{not json", "execution/1": b"zz", "pause/cron": None})
    assert mem.unreadable == ["heal/anomaly/x"] and not mem.anomalies


# ---------------------------------------------------------------------------------------------
# decide
# ---------------------------------------------------------------------------------------------


def current(t: Topology, first_seen: float, max_dead: int = 1):
    return remember(seen(t, max_dead), {}, now=first_seen).current


def test_in_grace_nothing_is_done_past_grace_the_dead_broker_is_decommissioned():
    cur = current(topo(dead=(3,)), 0.0)
    d = decide.decide(cur, settings=Settings(broker_grace_s=GRACE), now=GRACE - 1)
    assert d.fix is None and d.anomalies[0].state == IN_GRACE and d.exit_code == EXIT_OK
    d = decide.decide(cur, settings=Settings(broker_grace_s=GRACE), now=GRACE)
    assert d.fix is not None and d.fix.goal.kind == "decommission" and d.fix.goal.brokers == (3,)
    assert d.anomalies[0].state == FIXING and not d.fix.rebalance


def test_too_much_down_moves_nothing_and_exits_3():
    cur = current(topo(dead=(1, 3)), 0.0)
    d = decide.decide(cur, settings=Settings(broker_grace_s=0), now=10_000)
    assert d.fix is None and d.exit_code == EXIT_NOT_DONE
    assert {a.state for a in d.anomalies} == {REFUSED}
    assert "not a job for automation" in d.reason


def test_paused_or_busy_moves_nothing_and_says_why():
    cur = current(topo(dead=(3,)), 0.0)
    d = decide.decide(cur, settings=Settings(broker_grace_s=0), now=1, blocked="kops' cron jobs are paused by playbook")
    assert d.fix is None and d.exit_code == EXIT_OK and "paused by playbook" in d.anomalies[0].why


def test_no_isr_is_reported_with_the_runbook_never_fixed():
    cur = current(topo(no_isr=(0,)), 0.0)
    d = decide.decide(cur, settings=Settings(broker_grace_s=0, fix=frozenset(anomalies.FIXABLE)), now=1)
    assert d.fix is None and d.exit_code == EXIT_NOT_DONE
    assert "unclean" in d.anomalies[0].why and "docs/self-healing.md" in d.anomalies[0].why


def test_kinds_not_in_fix_are_reported_only_and_new_brokers_wait_for_dead_ones():
    cur = current(topo(new=(6,)), 0.0)
    d = decide.decide(cur, settings=Settings(broker_grace_s=0), now=1)
    assert d.fix is None and "not in --fix" in d.anomalies[0].why and d.exit_code == EXIT_OK
    d = decide.decide(cur, settings=Settings(broker_grace_s=0, fix=frozenset({NEW_BROKER})), now=1)
    assert d.fix.goal.kind == "add-brokers" and d.fix.goal.brokers == (6,) and d.fix.rebalance
    cur = current(topo(dead=(3,), new=(6,)), 0.0)
    d = decide.decide(cur, settings=Settings(broker_grace_s=0, fix=frozenset(anomalies.FIXABLE)), now=1)
    assert d.fix.kind == BROKER_FAILURE
    assert {a.key: a.state for a in d.anomalies} == {"broker_failure/3": FIXING, "new_broker/6": REFUSED}


def test_outside_the_window_new_brokers_wait_and_a_dead_broker_is_still_mended():
    closed = "outside the maintenance window (Mon-Fri 01:00-06:00 UTC): the next opens ..."
    cur = current(topo(new=(6,)), 0.0)
    d = decide.decide(cur, settings=Settings(broker_grace_s=0, fix=frozenset({NEW_BROKER})), now=1, closed=closed)
    assert d.fix is None and d.exit_code == EXIT_OK
    assert d.anomalies[0].state == REFUSED and d.anomalies[0].why == f"waits: {closed}" and d.reason == closed
    cur = current(topo(dead=(3,)), 0.0)
    d = decide.decide(cur, settings=Settings(broker_grace_s=0), now=1, closed=closed)
    assert d.fix is not None and d.fix.kind == BROKER_FAILURE and d.reason is None


# ---------------------------------------------------------------------------------------------
# planning a dead broker's replicas: the decommission planner, own rack first, rack-safe
# ---------------------------------------------------------------------------------------------


def _plan(t: Topology, dead: tuple[int, ...], in_grace: tuple[int, ...] = (), max_moves: int | None = None):
    cur = remember(seen(t, max_dead=len(dead) + len(in_grace)), {}, now=0.0).current
    for a in cur:  # those in grace were first seen later
        if a.brokers and a.brokers[0] in in_grace:
            a.first_seen = 100.0
    d = decide.decide(cur, settings=Settings(broker_grace_s=50, max_dead_brokers=5), now=120.0)
    scope = planning_topology(t, RACKS, d.fix)
    res, _est, fits = plan_step(scope.topology, StepBounds(max_moves=max_moves), None, d.fix.goals, goal=d.fix.goal,
                                rebalance=d.fix.rebalance)
    return d, scope, res, fits


def test_a_dead_brokers_replicas_go_to_its_own_rack_first_rack_safe():
    t = topo(dead=(3,))
    d, scope, res, fits = _plan(t, (3,))
    assert fits and scope.held_back == ()
    lost = {p.tp for p in t.partitions() if 3 in p.replicas}
    assert set(res.changes) == lost  # no other partition touched, not even reordered
    tree = RackTree.build({b: r for b, r in RACKS.items() if b != 3})
    for tp, new in res.changes.items():
        assert 3 not in new and rack_violation(new, tree) is None
        if tp in lost:  # the replacement is broker 2, rack b: the dead broker's own rack
            assert set(new) - set(t.partition(*tp).replicas) == {2}


def test_a_bounded_fix_moves_at_most_max_moves_and_partitions_on_a_broker_in_grace_wait():
    t = topo(dead=(3,))
    _d, _s, res, _ = _plan(t, (3,), max_moves=2)
    assert res.report["replicas_moved"] <= 2 and not res.complete
    t = topo(dead=(1, 3))
    d, scope, res, _ = _plan(t, (3,), in_grace=(1,))
    assert d.fix.goal.brokers == (3,)
    waiting = {f"t-{p.partition}" for p in t.partitions() if 1 in p.replicas}
    assert {h.split(":")[0] for h in scope.held_back} == waiting
    for tp, new in res.changes.items():
        assert 1 not in new and 3 not in new and f"{tp[0]}-{tp[1]}" not in waiting


# ---------------------------------------------------------------------------------------------
# properties
# ---------------------------------------------------------------------------------------------


@hsettings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.floats(1, 3000), st.booleans()), min_size=1, max_size=25), st.floats(0, 4000))
def test_a_broker_back_before_its_grace_is_never_acted_upon(timeline, grace):
    """Runs at increasing times, the broker down or up at each: a fix is decided only once it
    has been down, run after run, for at least the grace."""
    mem: dict[str, Anomaly] = {}
    now = 0.0
    down_since = None
    for step_s, down in timeline:
        now += step_s
        t = topo(dead=(3,) if down else ())
        r = remember(seen(t), mem, now)
        d = decide.decide(r.current, settings=Settings(broker_grace_s=grace), now=now)
        down_since = (down_since if down_since is not None else now) if down else None
        if d.fix is not None:
            assert down and now - down_since >= grace, (timeline, grace)
        else:
            assert not down or now - down_since < grace
        mem = {a.key: a for a in [*d.anomalies, *r.ended, *r.history]}


@hsettings(max_examples=100, deadline=None)
@given(st.sets(st.sampled_from(sorted(RACKS)), min_size=2), st.integers(0, 5), st.floats(0, 1e6))
def test_too_much_down_never_moves_anything(dead, max_dead, age):
    t = topo(dead=tuple(dead))
    cur = remember(observe(t, racks_seen(t, RACKS), max_dead_brokers=max_dead), {}, now=0.0).current
    d = decide.decide(cur, settings=Settings(broker_grace_s=0, max_dead_brokers=max_dead,
                                             fix=frozenset(anomalies.FIXABLE)), now=age)
    rack_down = any(all(b in dead for b in RACKS if RACKS[b] == r) for r in set(RACKS.values()))
    if len(dead) > max_dead or rack_down:
        assert d.fix is None and d.exit_code == EXIT_NOT_DONE
        assert any(a.kind == TOO_MUCH_DOWN for a in d.anomalies)


# ---------------------------------------------------------------------------------------------
# input, results, metrics
# ---------------------------------------------------------------------------------------------


def test_bad_settings_are_bad_input():
    with pytest.raises(BadInput) as e:
        check(Settings(broker_grace_s=-1, max_dead_brokers=-1, fix=frozenset({"no_in_sync_replica"})),
              StepBounds(max_moves=0, max_duration_s=60), None)
    assert "4 problems" in e.value.message or "5 problems" in e.value.message


@pytest.mark.parametrize("args, needle", [
    (["--fix", "bogus"], "--fix"), (["--exclude-topics", "("], "--exclude-topics"),
    (["--max-moves", "0"], "--max-moves"), (["--broker-grace", "nan"], "--broker-grace"),
    (["--max-dead-brokers", "-1"], "--max-dead-brokers"), (["--throttle", "-5"], "--throttle"),
    (["--notify-command", " "], "--notify-command"),
])
def test_the_cli_refuses_bad_input_before_connecting(args, needle):
    from kops.cli.main import app

    r = CliRunner().invoke(app, ["--bootstrap-server", "127.0.0.1:1", "--output", "json", "heal", "step", *args])
    assert r.exit_code == 2, r.output
    assert needle in r.output


def test_result_line_json_and_metrics():
    a = Anomaly("broker_failure/3", BROKER_FAILURE, "broker 3", "d", first_seen=0.0, state=IN_GRACE, why="w")
    res = HealResult("watching", EXIT_OK, Settings(), StepBounds(), None, anomalies=[a], now=60.0)
    assert res.summary().startswith("heal step: watching; broker 3: broker_failure (in_grace)")
    doc = json.loads(json.dumps(res.to_dict()))
    assert doc["anomalies"][0]["first_seen"] == "1970-01-01T00:00:00+00:00" and doc["anomalies"][0]["age_s"] == 60.0
    from kops.ops.metrics import text

    out = text(gauges(res, now=1.0))
    assert 'kops_heal_step_anomalies{kind="broker_failure",state="in_grace"} 1.0' in out
    assert 'kops_heal_step_oldest_anomaly_seconds{kind="broker_failure"} 60.0' in out


def test_own_rack_first_needs_the_rack_the_dead_broker_had():
    """The decommission planner replaces a removed broker's replica in its own rack when a
    broker there is as lightly loaded as the best elsewhere (docs/planner.md); a dead broker is
    gone from the metadata, so only heal's memory of its rack lets it do so. Four racks, every
    live broker holding one replica: broker 7's replica of t-0 (0, 4, 7) could go to 2, 3 (rack
    b) or 6 (rack d, its own)."""
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c", 6: "d", 7: "d"}
    assign = {0: (0, 4, 7), 1: (1, 5, 6), 2: (2,), 3: (3,)}
    t = topo(dead=(7,), assign=assign, racks=racks)
    cur = remember(observe(t, racks_seen(t, racks), max_dead_brokers=1), {}, now=0.0).current
    d = decide.decide(cur, settings=Settings(broker_grace_s=0), now=1.0)

    def replacement(known_racks):
        scope = planning_topology(t, known_racks, d.fix)
        res, _est, _fits = plan_step(scope.topology, StepBounds(max_moves=None), None, d.fix.goals, goal=d.fix.goal,
                                     rebalance=False)
        return set(res.changes[("t", 0)]) - {0, 4}

    assert replacement(racks) == {6}
    assert replacement({b: r for b, r in racks.items() if b != 7}) == {2}  # its rack forgotten: the lowest id


def test_summary_lines_of_each_outcome():
    a = Anomaly("too_much_down", TOO_MUCH_DOWN, "cluster", "d", first_seen=0.0, state=REFUSED, why="w")
    res = HealResult("refused", EXIT_NOT_DONE, Settings(), StepBounds(), None, anomalies=[a], reason="outage")
    assert res.summary().startswith("heal step: nothing moved: outage; cluster: too_much_down (refused)")
    res = HealResult("moved", EXIT_OK, Settings(), StepBounds(), None,
                     reason="this run finished an earlier heal step's execution first (done)")
    assert res.summary().startswith("heal step: this run finished an earlier heal step's execution first")
    res = HealResult("moved", EXIT_OK, Settings(), StepBounds(), None, replicas_moved=3, bytes_moved=3 * 1048576,
                     fix={"what": "re-create the replicas of dead brokers [5] on live brokers"}, moves_left=4)
    assert res.summary().startswith("heal step: moved 3 replicas, 3.0 MiB to re-create the replicas of dead brokers "
                                    "[5] on live brokers; 4 replica moves left")


# ---------------------------------------------------------------------------------------------
# the run's orchestration, its cluster access replaced (tests/cluster/test_heal_cluster.py: the real one)
# ---------------------------------------------------------------------------------------------


class _Run:
    """``heal.step.step`` with the cluster replaced: ``topology`` read, a memory of records,
    optionally failing writes, and a fake engine that records what it was given."""

    def __init__(self, monkeypatch, topology: Topology, *, fail_writes: bool = False):
        from kops.errors import ClusterError
        from kops.ops import cron, maintenance, reassign
        from kops.cluster import topology as topology_reader
        from kops.ops import cordon

        self.records: dict[str, bytes] = {}
        self.saved_before_execute: dict[str, bytes] | None = None
        self.executed = []
        self.topology = topology
        self.mode = "zookeeper"

        def put(conn, writes, mem=None):
            if fail_writes:
                raise ClusterError("journal: write to topic __kops_journal failed: NOT_ENOUGH_REPLICAS")
            for k, v in writes.items():
                if v is None:
                    self.records.pop(k, None)
                else:
                    self.records[k] = v
                if mem is not None:
                    mem.raw[k] = v
            return len(writes)

        def execute(conn, plan, opts, *, dry_run, reporter=None):
            self.saved_before_execute = dict(self.records)
            self.executed.append((plan, opts.origin))
            return cron.Ran(cron.MOVED, EXIT_OK, None, {"execution_id": "x-1"})

        monkeypatch.setattr(reassign, "cluster_identity", lambda conn: None)
        monkeypatch.setattr(reassign, "read", lambda conn, **kw: self.topology)
        monkeypatch.setattr(topology_reader, "read_topology", lambda conn, opts=None: self.topology)
        monkeypatch.setattr(memory, "load", lambda conn: memory.parse(self.records))
        monkeypatch.setattr(cordon, "read", lambda conn: cordon.parse(self.records))
        monkeypatch.setattr(memory, "save", put)
        monkeypatch.setattr(maintenance, "current", lambda conn: None)
        monkeypatch.setattr(cron, "busy", lambda conn, opts, **kw: None)
        monkeypatch.setattr(cron, "execute", execute)

    def __call__(self, now: float, notify_command: str | None = None, **settings):
        from kops.ops.heal import step

        return step.step(_Conn(self.mode), settings=Settings(**settings), bounds=StepBounds(max_moves=10),
                         throttle=None, now=now, notify_command=notify_command)


class _Conn:
    """The one thing heal asks the connection itself: the cluster's mode (the quorum is read
    only on KRaft)."""

    def __init__(self, mode: str):
        self.mode = mode

    def cluster_mode(self) -> str:
        return self.mode


def test_a_run_remembers_then_fixes_past_the_grace_recording_the_fix_before_the_engine_runs(monkeypatch):
    run = _Run(monkeypatch, topo(dead=(3,)))
    run.topology = topo()
    assert run(0.0).status == "nothing_to_do"  # racks remembered while every broker is up
    run.topology = topo(dead=(3,))
    res = run(100.0, broker_grace_s=GRACE)
    assert res.status == "watching" and res.anomalies[0].state == IN_GRACE and not run.executed
    res = run(100.0 + GRACE, broker_grace_s=GRACE)
    assert res.status == "moved" and res.exit_code == EXIT_OK and len(run.executed) == 1
    assert run.executed[0][1] == "heal-step"
    before = memory.parse(run.saved_before_execute).anomalies["broker_failure/3"]
    assert before.state == FIXING and before.first_seen == 100.0 and before.fixes[-1]["status"] == "started"
    after = memory.parse(run.records).anomalies["broker_failure/3"]
    assert after.fixes[-1]["status"] == "moved" and after.fixes[-1]["execution_id"] == "x-1"
    run.topology = topo()  # its replicas are elsewhere now (as far as heal can tell: gone)
    res = run(200.0 + GRACE, broker_grace_s=GRACE)
    assert res.status == "nothing_to_do" and [(a.key, a.state) for a in res.ended] == [("broker_failure/3", FIXED)]


def _cordon_record(b: int) -> dict[str, bytes]:
    return {f"cordon/{b}": json.dumps({"broker": b, "since": "2026-11-28T00:00:00+00:00"}).encode()}


def test_a_fix_gives_a_cordoned_broker_nothing_and_says_when_only_it_could_take_the_replicas(monkeypatch):
    racks = {**RACKS, 6: "b"}  # rack b: 2, 3 and 6

    def fixed(cordoned: tuple[int, ...]) -> set[int]:
        run = _Run(monkeypatch, topo(racks=racks))
        run(0.0)
        for b in cordoned:
            run.records.update(_cordon_record(b))
        run.topology = topo(dead=(3,), racks=racks)
        res = run(100.0, broker_grace_s=0)
        assert res.status == "moved" and run.executed, res.summary()
        before = {(p.topic, p.partition): set(p.replicas) for p in run.topology.partitions()}
        return {b for tp, r in run.executed[0][0].assignment().items() for b in set(r) - before[tp]}

    assert 6 in fixed(())  # (the premise: without a cordon, the empty broker 6 of rack b takes them)
    assert fixed((6,)) == {2}

    run = _Run(monkeypatch, topo())
    run(0.0)
    run.records.update(_cordon_record(2))  # rack b's only live broker: a rack-safe fix needs it
    run.topology = topo(dead=(3,))
    res = run(100.0, broker_grace_s=0)
    assert not run.executed and res.exit_code == EXIT_NOT_DONE
    assert "cordoned" in json.dumps(res.to_dict()), res.to_dict()


def test_an_outage_is_reported_even_when_the_memory_cannot_be_written(monkeypatch):
    run = _Run(monkeypatch, topo(dead=(1, 3)), fail_writes=True)
    res = run(0.0, broker_grace_s=0)
    assert res.status == "refused" and res.exit_code == EXIT_NOT_DONE and not run.executed
    assert "memory was not saved" in res.summary() and "NOT_ENOUGH_REPLICAS" in res.notes[0]


def test_the_notify_hook_gets_each_new_changed_or_ended_anomaly_and_never_blocks(monkeypatch, tmp_path):
    out = tmp_path / "events"
    hook = f"cat >> {out}; echo >> {out}"
    run = _Run(monkeypatch, topo())
    run(0.0, notify_command=hook)
    run.topology = topo(dead=(3,))
    run(100.0, notify_command=hook, broker_grace_s=GRACE)  # new, in grace
    run(200.0, notify_command=hook, broker_grace_s=GRACE)  # unchanged: nothing
    run(100.0 + GRACE, notify_command=hook, broker_grace_s=GRACE)  # fixing
    run.topology = topo()
    run(200.0 + GRACE, notify_command=hook, broker_grace_s=GRACE)  # fixed
    got = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    assert [(e["key"], e["event"], e["previous_state"], e["state"]) for e in got] == [
        ("broker_failure/3", "new", None, IN_GRACE), ("broker_failure/3", "changed", IN_GRACE, FIXING),
        ("broker_failure/3", "ended", FIXING, FIXED)]
    # a failing hook: said, and the fix happens all the same
    run = _Run(monkeypatch, topo(dead=(3,)))
    res = run(0.0, notify_command="echo no such pager >&2; exit 4", broker_grace_s=0)
    assert res.status == "moved" and res.exit_code == EXIT_OK and run.executed
    assert res.notes == ["--notify-command for broker_failure/3 (new): exit 4: no such pager"]


def test_a_hook_that_hangs_is_killed():
    from kops.ops.heal import notify

    assert notify.notify("sleep 5 & sleep 6", [{"key": "k", "event": "new"}], timeout_s=0.3) == [
        "--notify-command for k (new): no end within 0.3 s (killed)"]


def test_the_cli_names_every_kind_heal_can_fix():
    from kops.cli.heal import FIX_KINDS

    assert set(FIX_KINDS) == set(anomalies.FIXABLE)  # (kept apart so that --help stays light)


# ---------------------------------------------------------------------------------------------
# disks over the threshold (--disk-threshold)
# ---------------------------------------------------------------------------------------------


def _disks(t: Topology, small: int = 0, disk: int = 7000) -> Topology:
    """Every broker with a disk of 100,000 bytes but ``small``, with ``disk`` (each holds 6
    replicas of 1,000 bytes: 6 % of a big disk, 85.7 % of the small one)."""
    from kops.model import Capacity

    return t.with_capacities({b.id: Capacity(disk_bytes=disk if b.id == small else 100_000) for b in t.brokers})


def test_a_broker_over_the_disk_threshold_is_seen_only_when_disks_are_watched():
    t = _disks(topo())
    assert seen(t) == []  # no threshold: disks are not looked at
    found = observe(t, racks_seen(t, RACKS), max_dead_brokers=1, disk_threshold=0.8)
    assert [o.key for o in found] == ["disk_over_threshold/0"]
    assert found[0].brokers == (0,) and "uses 85.7% of its disk, above the threshold 80%" in found[0].detail
    assert observe(t, racks_seen(t, RACKS), max_dead_brokers=1, disk_threshold=0.9) == []
    # excluded topics still fill the disk
    assert [o.key for o in observe(t, racks_seen(t, RACKS), max_dead_brokers=1, disk_threshold=0.8,
                                   exclude=re.compile("t"))] == ["disk_over_threshold/0"]


def test_disk_use_names_the_brokers_it_cannot_judge():
    from kops.model import Capacity

    t = topo().with_capacities({0: Capacity(disk_bytes=7000)})
    use = anomalies.disk_use(t)
    assert set(use.use) == {0} and use.unknown == (1, 2, 3, 4, 5)
    assert "brokers 1, 2, 3, 4, 5: capacity unknown" in use.note() and "--capacity-file" in use.note()
    unsized = dataclasses.replace(t, topics=tuple(dataclasses.replace(x, partitions=tuple(
        dataclasses.replace(p, size_bytes=None) for p in x.partitions)) for x in t.topics))
    assert anomalies.disk_use(unsized).unsized and "sizes were not read" in anomalies.disk_use(unsized).note()
    assert observe(unsized, racks_seen(t, RACKS), max_dead_brokers=1, disk_threshold=0.5) == []  # never guessed
    assert anomalies.disk_use(_disks(topo())).note() is None


def test_a_disk_over_the_threshold_is_fixed_after_a_dead_broker_and_at_any_hour():
    cur = current(_disks(topo()), 0.0)
    assert cur == []  # (current() watches no disk)
    t = _disks(topo(dead=(3,)))
    obs = observe(t, racks_seen(t, RACKS), max_dead_brokers=1, disk_threshold=0.8)
    mem = anomalies.remember(obs, {}, 0.0).current
    everything = Settings(broker_grace_s=0, fix=frozenset(anomalies.FIXABLE), disk_threshold=0.8)
    d = decide.decide(mem, settings=everything, now=1)
    assert d.fix.kind == "broker_failure"  # a dead broker first
    disk = next(a for a in d.anomalies if a.kind == "disk_over_threshold")
    assert disk.state == "refused" and disk.why.startswith("waits: one fix per run")
    obs = observe(_disks(topo()), RACKS, max_dead_brokers=1, disk_threshold=0.8)
    d = decide.decide(anomalies.remember(obs, {}, 0.0).current, settings=everything, now=1,
                      closed="outside --window 01:00-05:00")
    assert d.fix is not None and d.fix.kind == "disk_over_threshold"  # urgent: the window does not hold it
    assert d.fix.goals == ("disk-usage",) and d.fix.rebalance and "brokers 0, over the disk threshold" in d.fix.describe()
    assert Settings(disk_threshold=0.8).to_dict()["disk_threshold_pct"] == 80.0


def test_heal_moves_data_off_a_broker_over_the_disk_threshold_and_onto_none_past_it(monkeypatch):
    run = _Run(monkeypatch, _disks(topo(), disk=7000))
    res = run(0.0, broker_grace_s=0, fix=frozenset({"disk_over_threshold"}), disk_threshold=0.8)
    assert res.status == "moved" and run.executed, res.summary()
    moved = run.executed[0][0].assignment()
    after = {**_assignment(), **{p: r for (_t, p), r in moved.items()}}
    held0 = sum(0 in r for r in after.values())
    assert held0 <= 5, (held0, moved)  # 5,000 of 7,000 bytes: under 80 %
    assert not any(0 in r and 0 not in _assignment()[p] for p, r in after.items())  # nothing new on it
    assert all(rack_violation(r, RackTree.build(RACKS)) is None for r in after.values())
    # not watched, not fixed: the same cluster without --disk-threshold sees nothing
    run = _Run(monkeypatch, _disks(topo(), disk=7000))
    assert run(0.0, broker_grace_s=0, fix=frozenset({"disk_over_threshold"})).status == "nothing_to_do"


# ---------------------------------------------------------------------------------------------
# two cron runs at once: the one that takes the cluster lock second steps aside
# ---------------------------------------------------------------------------------------------


def test_a_step_whose_engine_finds_the_lock_taken_steps_aside_having_changed_nothing(monkeypatch):
    from kops.ops import cron, reassign
    from kops.ops.lock import LockHeld

    started = []

    def start(conn, prepared, opts, reporter=None):
        started.append(prepared)
        raise LockHeld({"execution_id": "x-other", "owner": {"user": "root", "host": "cron-host-2", "pid": 7}})

    monkeypatch.setattr(reassign, "prepare", lambda conn, plan, opts: "prepared")
    monkeypatch.setattr(reassign, "start", start)
    ran = cron.execute(object(), "plan", "opts", dry_run=False)
    assert started == ["prepared"]
    assert (ran.status, ran.exit_code, ran.execution) == (cron.STEPPED_ASIDE, EXIT_OK, None)
    assert ran.reason.startswith("another kops took the cluster lock first: execution x-other")
    assert "root@cron-host-2 (pid 7)" in ran.reason


def test_heal_steps_aside_when_another_step_took_the_lock_first_and_keeps_no_fix_of_its_own(monkeypatch):
    from kops.ops import cron

    run = _Run(monkeypatch, topo(dead=(3,)))
    monkeypatch.setattr(cron, "execute", lambda conn, plan, opts, *, dry_run, reporter=None: cron.Ran(
        cron.STEPPED_ASIDE, EXIT_OK, "another kops took the cluster lock first (x-other)", None))
    res = run(GRACE + 1, broker_grace_s=0)
    assert (res.status, res.exit_code) == ("stepped_aside", EXIT_OK), res.summary()
    assert "stepped aside: another kops took the cluster lock first" in res.summary()
    (a,) = [a for a in res.anomalies if a.kind == BROKER_FAILURE]
    assert a.state == REFUSED and a.why == "waits: another kops took the cluster lock first (x-other)"
    assert a.fixes == []  # the entry written before the engine ran is gone: this run started nothing
    assert json.loads(run.records[memory.PREFIX + a.key])["fixes"] == []


# ---------------------------------------------------------------------------------------------
# a failed log dir (JBOD)
# ---------------------------------------------------------------------------------------------


def _failed_dir(t: Topology, broker: int, lost: set[int]) -> Topology:
    """``broker`` reports its second log dir offline; the replicas it held (partitions ``lost``)
    are Metadata's offline replicas and out of the ISR."""
    from kops.model import LogDir

    brokers = tuple(dataclasses.replace(b, log_dirs=(LogDir("/d0"), LogDir("/d1", offline=True)))
                    if b.id == broker else b for b in t.brokers)
    parts = tuple(dataclasses.replace(p, offline_replicas=(broker,), isr=tuple(r for r in p.isr if r != broker),
                                      leader=next(r for r in p.isr if r != broker))
                  if p.partition in lost else p for p in t.topics[0].partitions)
    return dataclasses.replace(t, brokers=brokers, topics=(dataclasses.replace(t.topics[0], partitions=parts),))


def test_a_failed_log_dir_is_seen_with_the_replicas_it_held():
    from kops.ops.heal.anomalies import LOG_DIR_FAILURE

    base = topo()
    lost = {p for p, reps in _assignment().items() if 2 in reps}
    lost = set(sorted(lost)[:3])
    (o,) = seen(_failed_dir(base, 2, lost))
    assert (o.key, o.kind, o.brokers, o.count) == ("log_dir_failure/2", LOG_DIR_FAILURE, (2,), 3)
    assert o.partitions == tuple(sorted(f"t-{p}" for p in lost))
    assert "reports log dir /d1 offline: 3 replicas on it are offline" in o.detail
    (o,) = seen(_failed_dir(base, 2, set()))  # a dir that held nothing: still a failed disk
    assert o.count == 0 and "no replica of a watched topic was there" in o.detail


def test_a_failed_dir_is_mended_by_default_at_any_hour_unless_it_held_nothing():
    lost = set(sorted(p for p, reps in _assignment().items() if 2 in reps)[:3])
    cur = current(_failed_dir(topo(), 2, lost), first_seen=0.0)
    d = decide.decide(cur, settings=Settings(), now=GRACE - 1)
    assert d.fix is None and d.anomalies[0].state == IN_GRACE
    d = decide.decide(cur, settings=Settings(), now=GRACE + 1, closed="outside the window")
    assert d.fix is not None and d.fix.kind == "log_dir_failure" and d.anomalies[0].state == FIXING
    assert d.fix.describe() == "re-create the replicas of the failed log dirs of brokers [2] on other brokers"
    empty = current(_failed_dir(topo(), 2, set()), first_seen=0.0)
    d = decide.decide(empty, settings=Settings(), now=GRACE + 1)
    assert d.fix is None and d.anomalies[0].state == REFUSED
    assert d.anomalies[0].why.startswith("nothing to re-create: no replica is on the failed dir")


def test_a_failed_dirs_replicas_go_to_the_rack_mate_and_nothing_else_moves():
    """Racks a (0, 1), b (2, 3), c (4, 5): broker 2's lost replicas can only go to broker 3 (its
    rack mate; every other rack holds one already), in their place; the broker's other replicas
    and every other partition stay as they are, and nothing lands on broker 2."""
    lost = set(sorted(p for p, reps in _assignment().items() if 2 in reps)[:3])
    t = _failed_dir(topo(), 2, lost)
    d = decide.decide(current(t, first_seen=0.0), settings=Settings(broker_grace_s=0), now=1.0)
    scope = planning_topology(t, racks_seen(t, RACKS), d.fix)
    res, _est, _fits = plan_step(scope.topology, StepBounds(max_moves=None), None, d.fix.goals, goal=d.fix.goal,
                                 rebalance=False)
    assign = _assignment()
    assert set(res.changes) == {("t", p) for p in lost}
    for p in lost:
        assert list(res.changes[("t", p)]) == [3 if b == 2 else b for b in assign[p]]


def test_a_failed_dir_on_a_broker_alone_in_its_rack_cannot_be_mended_by_moving(monkeypatch):
    """Three brokers in three racks, RF 3: the broker whose dir failed is the only rack-safe
    place for its replicas; heal says so and names what to do instead (nothing moved, exit 3)."""
    racks = {0: "a", 1: "b", 2: "c"}
    assign = {p: ((0, 1, 2)[p % 3:] + (0, 1, 2)[:p % 3]) for p in range(6)}
    t = _failed_dir(topo(assign=assign, racks=racks), 1, {0, 1})
    run = _Run(monkeypatch, t)
    res = run(0.0, broker_grace_s=0)
    assert res.exit_code == EXIT_NOT_DONE and not run.executed
    (a,) = [a for a in res.anomalies if a.key == "log_dir_failure/1"]
    assert "needs a new replica, and no other broker can take it rack-safely. Replace the disk, or take the failed dir out of" in a.why
    assert "cordon" not in a.why  # the planner's advice to uncordon is not this case's


def test_a_kraft_quorum_one_lost_controller_from_stalling_holds_every_fix_back(monkeypatch):
    """A dead broker past its grace is fixed only while the metadata quorum can lose a voter:
    with a voter behind (2 of 3 in sync) or the quorum unreadable, heal remembers and reports
    but moves nothing; once the voter is back in sync, the fix runs."""
    from kops.cluster import topology as topology_reader
    from kops.errors import ClusterError
    from kops.ops import cron
    from tests.unit.test_quorum_health import _quorum

    run = _Run(monkeypatch, topo())
    run.mode = "kraft"
    quorum = {"q": _quorum()}

    def read_quorum(conn):
        if quorum["q"] is None:
            raise ClusterError("describe the KRaft metadata quorum: timed out")
        return quorum["q"]

    monkeypatch.setattr(topology_reader, "read_quorum", read_quorum)
    assert run(0.0).status == "nothing_to_do"
    run.topology = topo(dead=(3,))
    assert run(10_000.0, broker_grace_s=60).status == "watching"  # first seen: in its grace
    quorum["q"] = _quorum(behind={1000: 40.0})
    res = run(10_100.0, broker_grace_s=60)
    assert not run.executed and res.status == cron.STEPPED_ASIDE
    assert "KRaft metadata quorum is unwell: voter 1000 (last caught up 40 s ago" in json.dumps(res.to_dict())
    (a,) = [a for a in res.anomalies if a.kind == "broker_failure"]
    assert a.first_seen == 10_000.0  # remembered all the same

    quorum["q"] = None
    res = run(10_200.0, broker_grace_s=60)
    assert not run.executed and res.status == cron.STEPPED_ASIDE
    assert "could not be described (describe the KRaft metadata quorum: timed out)" in json.dumps(res.to_dict())

    quorum["q"] = _quorum()
    res = run(10_300.0, broker_grace_s=60)
    assert len(run.executed) == 1 and res.status == "moved"
