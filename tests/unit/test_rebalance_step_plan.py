"""The bounded plan of one cron step (pure): within its bounds, rack-safe, no goal worse, and
repeated steps reach the one-shot plan's balance."""

from __future__ import annotations

from kops.ops.replica_rebalance import (
    StepBounds, balance_improved, bytes_deviation_pct, goals_of, plan_step, worse_goals,
)
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
    # converged: the full planner has nothing left to do, and what it balances (bytes here, then
    # replica counts) is as balanced as the one-shot plan makes it; preferred leaders are as
    # balanced as the layout the steps reached allows (a different layout of equal bytes can
    # admit a slightly different leader balance: within 2 of the one-shot's)
    full = plan_rebalance(topo, compare_kafka=False)
    assert not full.changes
    final, target = full.report["balance"], one_shot.report["balance"]
    for goal in ("bytes_spread", "replica_spread"):
        assert final[f"{goal}_before"] <= target[f"{goal}_after"], goal
    assert final["leader_spread_before"] <= target["leader_spread_after"] + 2
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


def test_worse_goals_are_named_and_leaders_yield_to_the_balance_only_by_one():
    better = {"bytes_distance": {"before": 900, "after": 500}, "bytes_spread": {"before": 300, "after": 200}}
    assert worse_goals({**better, "leader_spread": {"before": 1, "after": 2}}) == []
    assert worse_goals({**better, "leader_spread": {"before": 1, "after": 3}}) == ["leader_spread 1 -> 3"]
    same = {"bytes_distance": {"before": 900, "after": 900}, "bytes_spread": {"before": 300, "after": 300}}
    assert worse_goals({**same, "leader_spread": {"before": 1, "after": 2}}) == ["leader_spread 1 -> 2"]
    assert worse_goals({"bytes_distance": {"before": 1, "after": 2}}) == ["bytes_distance 1 -> 2"]


def test_a_move_inside_a_rack_is_progress_that_the_sum_of_distances_misses():
    """Brokers 0 and 1 share a rack and are both above the mean: evening them leaves the sum of
    distances from the mean as it was, but brings the loads nearer it, and the leader spread may
    then yield by one as it does to any balance progress."""
    def rep(before, after):
        return {"balance_by": "bytes", "brokers": [
            {"id": b, "allowed": True, "bytes_before": x, "bytes_after": y} for b, (x, y) in enumerate(zip(before, after))]}

    r = rep([90, 70, 20, 20], [80, 80, 20, 20])  # mean 50: distances 40+20+30+30 = 30+30+30+30
    assert goals_of(r)["bytes_distance"] == {"before": 120, "after": 120}
    assert balance_improved(r)
    assert not balance_improved(rep([90, 70, 20, 20], [70, 90, 20, 20]))  # a swap of places: no progress
    assert not balance_improved(rep([80, 80, 20, 20], [90, 70, 20, 20]))
    # exact on large loads: 1 KiB moved between two 10 TB brokers of one rack
    tb = 10 ** 13
    assert balance_improved(rep([tb + 4096, tb, 0, 0], [tb + 3072, tb + 1024, 0, 0]))
    goals = {**goals_of(r), "leader_spread": {"before": 1, "after": 2}}
    assert worse_goals(goals) == ["leader_spread 1 -> 2"]
    assert worse_goals(goals, nearer=True) == []
    assert worse_goals({**goals, "leader_spread": {"before": 1, "after": 3}}, nearer=True) == ["leader_spread 1 -> 3"]


def test_bytes_deviation_and_pursued_goals():
    topo = _skewed()
    # 24 partitions x 3 replicas on brokers 0, 2, 4 only: they hold twice the mean, 1, 3, 5 nothing
    assert bytes_deviation_pct(topo) == 100.0
    assert bytes_deviation_pct(_skewed(sizes=False)) is None
    res = plan_step(topo, StepBounds(max_moves=50), throttle=None)[0]
    assert list(goals_of(res.report)) == ["bytes_distance", "bytes_spread", "leader_spread"]
    res = plan_step(_skewed(sizes=False), StepBounds(max_moves=50), throttle=None)[0]
    assert list(goals_of(res.report)) == ["replicas_distance", "replica_spread", "leader_spread"]


def test_a_step_with_goals_reports_them_in_their_order():
    goals = ("replicas", "topic-spread", "leaders")
    res, est, fits = plan_step(_skewed(), StepBounds(max_moves=5), throttle=2 * MIB, goals=goals)
    assert fits and 0 < res.report["replicas_moved"] <= 5
    g = goals_of(res.report, goals)
    assert list(g) == list(goals) and g["replicas"]["after"] < g["replicas"]["before"]
    assert worse_goals(g, ordered=True) == []


def test_with_goals_a_goal_may_yield_only_to_an_earlier_one_that_improved():
    g = {"disk-usage": {"before": 5.0, "after": 3.0}, "replicas": {"before": 1, "after": 2}}
    assert worse_goals(g, ordered=True) == [] and g["replicas"]["yielded"]
    g = {"disk-usage": {"before": 5.0, "after": 5.0}, "replicas": {"before": 1, "after": 2}}
    assert worse_goals(g, ordered=True) == ["replicas 1 -> 2"]
