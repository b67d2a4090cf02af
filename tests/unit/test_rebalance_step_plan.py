"""The bounded plan of one cron step (pure): within its bounds, rack-safe, no goal worse, and
repeated steps reach the one-shot plan's balance."""

from __future__ import annotations

from kops.ops.replica_rebalance import StepBounds, bytes_deviation_pct, goals_of, plan_step, worse_goals
from kops.placement.balancer import plan_rebalance
from kops.placement.racks import RackTree, rack_violation
from tests.unit.test_balancer import topo_of

RACKS = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
MIB = 1024 * 1024


def _skewed(sizes: bool = True):
    parts = [(0, 2, 4) if i % 2 else (2, 4, 0) for i in range(24)]
    return topo_of(RACKS, {"t": parts}, sizes={"t": [(i % 4 + 1) * 10 * MIB for i in range(24)]} if sizes else None)


def _rack_safe(assignment) -> bool:
    tree = RackTree.build(RACKS)
    return all(rack_violation(r, tree) is None for r in assignment.values())


def test_steps_stay_in_bounds_and_converge_to_the_one_shot_balance():
    topo = _skewed()
    one_shot = plan_rebalance(topo, compare_kafka=False)
    bounds = StepBounds(max_moves=5, max_bytes=None, max_duration_s=60)
    steps = 0
    while True:
        res, est, fits = plan_step(topo, bounds, throttle=2 * MIB)
        assert fits
        if not res.changes:
            break
        steps += 1
        assert res.report["replicas_moved"] <= 5
        assert est is not None and est <= 60
        assert worse_goals(goals_of(res.report)) == []
        assert _rack_safe(res.target)
        topo = res.topology_after(topo)
        assert steps < 40
    # converged: the full planner has nothing left to do, and every goal of its default set is
    # as near its band as the one-shot plan brings it (replica counts, disk use, leaders, first
    # followers, topic spread; a different path can end a leader or a replica of a topic apart)
    full = plan_rebalance(topo, compare_kafka=False)
    assert not full.changes
    final, target = full.report["goals"], one_shot.report["goals"]
    for goal in ("replicas", "disk-usage", "topic-spread"):
        assert final[goal]["off_band_before"] <= target[goal]["off_band_after"] + 2, goal
    assert final["leaders"]["before"] <= target["leaders"]["after"] + 1
    assert steps >= one_shot.report["replicas_moved"] // 5


def test_a_step_over_its_duration_is_cut_until_it_fits():
    topo = _skewed()
    # 40 MiB partitions at 1 MiB/s: a 100 s bound takes at most two of them per broker
    res, est, fits = plan_step(topo, StepBounds(max_moves=50, max_duration_s=100), throttle=1 * MIB)
    assert fits and 0 < res.report["replicas_moved"] and est <= 100


def test_no_move_fits_a_bound_smaller_than_the_smallest_partition():
    res, est, fits = plan_step(_skewed(), StepBounds(max_moves=50, max_duration_s=1), throttle=1 * MIB)
    assert not fits and res.report["replicas_moved"] == 0


def test_by_replica_count_the_steps_reach_the_one_shot_balance_exactly():
    topo = _skewed(sizes=False)
    one_shot = plan_rebalance(topo, compare_kafka=False).report["balance"]
    for _ in range(40):
        res, _est, _fits = plan_step(topo, StepBounds(max_moves=4), throttle=None)
        if not res.changes:
            break
        assert res.report["replicas_moved"] <= 4 and _rack_safe(res.target)
        topo = res.topology_after(topo)
    final = plan_rebalance(topo, compare_kafka=False).report["balance"]
    assert final["replica_spread_before"] == one_shot["replica_spread_after"]
    assert final["leader_spread_before"] <= one_shot["leader_spread_after"] + 1


def test_a_goal_made_worse_is_refused_unless_a_higher_goal_forced_it():
    better = {"replicas": {"before": 5, "after": 1, "verdict": "better"}}
    forced = {"before": 1, "after": 2, "off_band_before": 0, "off_band_after": 3, "verdict": "worse",
              "forced_by": ["replicas"], "why": "..."}
    assert worse_goals({**better, "topic-spread": dict(forced)}) == []
    g = {**better, "topic-spread": {**forced, "forced_by": []}}
    assert worse_goals(g) == ["topic-spread 1 -> 2 (0 -> 3 off its band)"]


def test_bytes_deviation_and_pursued_goals():
    topo = _skewed()
    # 24 partitions x 3 replicas on brokers 0, 2, 4 only: they hold twice the mean, 1, 3, 5 nothing
    assert bytes_deviation_pct(topo) == 100.0
    assert bytes_deviation_pct(_skewed(sizes=False)) is None
    # the default goal set, in its order, without the goals whose data is missing (rates)
    res = plan_step(topo, StepBounds(max_moves=50), throttle=None)[0]
    assert list(goals_of(res.report)) == ["replicas", "disk-usage", "leaders", "first-followers", "topic-spread"]
    res = plan_step(_skewed(sizes=False), StepBounds(max_moves=50), throttle=None)[0]
    assert list(goals_of(res.report)) == ["replicas", "leaders", "first-followers", "topic-spread"]


def test_a_step_with_goals_reports_them_in_their_order():
    goals = ("replicas", "topic-spread", "leaders")
    res, est, fits = plan_step(_skewed(), StepBounds(max_moves=5), throttle=2 * MIB, goals=goals)
    assert fits and 0 < res.report["replicas_moved"] <= 5
    g = goals_of(res.report, goals)
    assert list(g) == list(goals) and g["replicas"]["after"] < g["replicas"]["before"]
    assert worse_goals(g) == []


# ---------------------------------------------------------------------------------------------
# the run: stepping aside, finishing its own earlier step, executing (kops.ops.cron), the
# cluster replaced (tests/cluster/test_rebalance_step.py: the real one)
# ---------------------------------------------------------------------------------------------


def _healthy(topo):
    """Every partition led by its first replica, its ISR complete."""
    from dataclasses import replace

    return replace(topo, topics=tuple(replace(t, partitions=tuple(replace(p, isr=p.replicas, leader=p.replicas[0])
                                                                  for p in t.partitions)) for t in topo.topics))


def _patched(monkeypatch, *, paused=None, busy=None):
    from kops.ops import cordon, cron, maintenance, reassign

    calls = []
    monkeypatch.setattr(reassign, "cluster_identity", lambda conn: None)
    monkeypatch.setattr(cordon, "read", lambda conn: {})  # (no broker cordoned)
    monkeypatch.setattr(reassign, "read", lambda conn, **kw: _healthy(_skewed()))
    monkeypatch.setattr(maintenance, "current", lambda conn: paused)
    monkeypatch.setattr(cron, "busy", lambda conn, opts, **kw: (calls.append(("busy", opts.origin)), busy)[1])

    def execute(conn, plan, opts, *, dry_run, reporter=None):
        calls.append(("execute", opts.origin, opts.wait, opts.timeout_s, len(plan.entries)))
        return cron.Ran(cron.MOVED, 0, None, {"execution_id": "e-1"})

    monkeypatch.setattr(cron, "execute", execute)
    return calls


def test_a_step_steps_aside_when_paused_or_busy_and_executes_through_cron(monkeypatch):
    from kops.ops import cron, replica_rebalance
    from kops.ops.maintenance import Pause

    pause = Pause("rack b patching", "operator", "me@host (pid 1)", "2026-01-01T00:00:00+00:00", "2999-01-01T00:00:00+00:00")
    calls = _patched(monkeypatch, paused=pause)
    res = replica_rebalance.step(object(), bounds=StepBounds(max_moves=5), throttle=10 * MIB)
    assert res.status == "stepped_aside" and "rack b patching" in res.reason and calls == []

    calls = _patched(monkeypatch, busy=cron.Busy(reason="a kops execution is in progress: x"))
    res = replica_rebalance.step(object(), bounds=StepBounds(max_moves=5), throttle=10 * MIB)
    assert res.status == "stepped_aside" and res.reason == "a kops execution is in progress: x"
    assert calls == [("busy", "rebalance-step")]

    class Resumed:
        exit_code, message = 3, "execution e-0 not done (timed out)"

        def to_dict(self):
            return {"execution_id": "e-0"}

    _patched(monkeypatch, busy=cron.Busy(resumed=Resumed()))
    res = replica_rebalance.step(object(), bounds=StepBounds(max_moves=5), throttle=10 * MIB)
    assert (res.status, res.exit_code, res.reason) == ("not_done", 3, "execution e-0 not done (timed out)")

    calls = _patched(monkeypatch)
    res = replica_rebalance.step(object(), bounds=StepBounds(max_moves=5, max_duration_s=60), throttle=10 * MIB)
    assert res.status == "moved" and res.exit_code == 0 and res.execution == {"execution_id": "e-1"}
    (_busy, (what, origin, wait, timeout, entries)) = calls
    assert (what, origin, wait, timeout) == ("execute", "rebalance-step", True, 60 * 1.5 + 30) and entries
    assert 0 < res.replicas_moved <= 5  # leader reorders are free
