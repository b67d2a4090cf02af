"""Goals beyond phase 2's balance (issue 21 item 3): --goals selects and orders them; a later goal
never makes an earlier one worse; the network-in limit is hard; topic spread is evened."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kops.errors import BadInput
from kops.model import Broker, Capacity, Partition, Topic, Topology
from kops.placement.balancer import Goal, plan
from kops.placement.goals import DEFAULT_GOALS, GOALS, select_goals
from kops.placement.racks import RackTree, rack_violation
from kops.placement.goals import BAND

MB = 1024 * 1024


def _topo(n_brokers=9, n_racks=3, topics=6, parts=12, *, seed=1, sizes=True, rates=True, caps=None, skew=None,
          empty=()):
    rng = random.Random(seed)
    brokers = tuple(Broker(b, f"r{b % n_racks}", capacity=caps(b) if caps else None) for b in range(n_brokers))
    by_rack = {r: [b for b in range(n_brokers) if b % n_racks == r and b not in empty] for r in range(n_racks)}
    out = []
    for t in range(topics):
        ps = []
        for i in range(parts):
            racks = rng.sample(range(n_racks), min(3, n_racks))
            # skew: each topic piles onto the first broker of every rack
            reps = tuple(by_rack[r][0] if skew and rng.random() < skew else rng.choice(by_rack[r]) for r in racks)
            ps.append(Partition(f"t{t}", i, reps, size_bytes=rng.randint(1, 100) * MB if sizes else None,
                                bytes_in_per_s=float(rng.randint(1, 1000) * 1000) if rates else None))
        out.append(Topic(f"t{t}", tuple(ps)))
    return Topology(brokers=brokers, topics=tuple(out))


def _safe(topo, target) -> bool:
    tree = RackTree.build({b.id: b.rack for b in topo.brokers})
    return all(rack_violation(r, tree) is None for r in target.values())


def test_select_goals():
    assert select_goals(None) == DEFAULT_GOALS
    assert select_goals("all") == GOALS
    # hard goals always, first; soft ones in the order given
    assert select_goals("replicas,topic-spread") == ("rack", "disk-capacity", "nw-in-capacity", "nw-out-capacity",
                                                     "replicas", "topic-spread")
    for bad, why in (("bogus", "unknown goal bogus"), ("replicas,replicas", "replicas given twice"), (",", "no goal")):
        with pytest.raises(BadInput, match=why):
            select_goals(bad)


def test_topic_spread_evens_every_topic_and_keeps_the_replica_balance():
    topo = _topo(sizes=False, rates=False, skew=0.8)
    res = plan(topo, Goal("rebalance"), goals="replicas,topic-spread,leaders")
    g = res.report["goals"]
    assert g["topic-spread"]["before"] > 0
    assert g["topic-spread"]["after"] == 0 and g["topic-spread"]["status"] == "met", g["topic-spread"]
    assert g["topic-spread"]["off_band_after"] == 0 < g["topic-spread"]["off_band_before"], g["topic-spread"]
    assert g["replicas"]["after"] <= 1 and g["leaders"]["after"] <= 1, g
    assert _safe(topo, res.target)
    # without the goal the same plan leaves topics uneven
    assert plan(topo, Goal("rebalance"), goals="replicas,leaders").report["goals"]["topic-spread"]["after"] > 0


def test_network_in_is_balanced_within_the_disk_band():
    cap = Capacity(disk_bytes=10_000 * MB, nw_in_bytes_per_s=100 * MB)
    topo = _topo(caps=lambda b: cap, seed=3)
    disk_only = plan(topo, Goal("rebalance"), goals="disk-usage,leaders,first-followers")
    both = plan(topo, Goal("rebalance"), goals="disk-usage,nw-in-usage,leaders")
    nw_before = both.report["goals"]["nw-in-usage"]["after"]
    assert nw_before < disk_only.report["goals"]["nw-in-usage"]["after"] / 2, (nw_before, disk_only.report["goals"])
    assert both.report["goals_optimised"]["moves_per_goal"]["nw-in-usage"] > 0
    # every broker's disk use stays within the band around the mean that disk-usage keeps
    after = both.topology_after(topo)
    use = {b: 0 for b in range(9)}
    for p in after.partitions():
        for b in p.replicas:
            use[b] += p.size_bytes
    mean = sum(use.values()) / len(use)
    assert all(abs(v - mean) <= BAND * mean + 100 * MB for v in use.values()), (use, mean)
    assert _safe(topo, both.target)


def test_the_network_in_limit_is_hard():
    # broker 8 can take 1 MB/s in: a count balance would give it ~8 partitions of up to 1 MB/s each
    def caps(b):
        return Capacity(nw_in_bytes_per_s=1_000_000 if b == 8 else 10**10)

    topo = _topo(sizes=False, caps=caps, seed=5, empty=(8,))
    res = plan(topo, Goal("rebalance"), goals="replicas,leaders")
    nw8 = sum(p.bytes_in_per_s for p in res.topology_after(topo).partitions() if 8 in p.replicas)
    assert nw8 <= 0.8 * 1_000_000
    assert res.report["goals"]["nw-in-capacity"]["status"] == "met", res.report["goals"]["nw-in-capacity"]


def test_balance_by_network_in_with_capacity_shares():
    # every fourth broker has twice the network: it ends with about twice the bytes-in
    def caps(b):
        return Capacity(nw_in_bytes_per_s=(2 if b % 4 == 0 else 1) * 10**9)

    topo = _topo(n_brokers=8, n_racks=2, topics=4, parts=40, sizes=False, caps=caps, seed=7)
    res = plan(topo, Goal("rebalance"), goals="nw-in-usage,leaders")
    assert res.report["goals_optimised"]["phase2"] == "nw-in-usage"
    assert res.report["goals_optimised"]["capacity_shares"] is True
    assert res.report["balance_by"] == "bytes-in"
    nw = res.report["goals"]["nw-in-usage"]
    assert nw["after"] < nw["before"] and nw["after"] <= 5.0, nw


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), order=st.permutations(["disk-usage", "nw-in-usage", "topic-spread", "replicas"]))
def test_any_goal_order_keeps_the_hard_goals(seed, order):
    def caps(b):
        return Capacity(disk_bytes=(3 if b % 3 == 0 else 2) * 1000 * MB, nw_in_bytes_per_s=(2 if b % 2 else 1) * 10**7)

    topo = _topo(seed=seed, caps=caps, skew=0.5)
    res = plan(topo, Goal("rebalance"), goals=",".join(order) + ",leaders")
    g = res.report["goals"]
    assert g["rack"]["after"] == 0
    assert all(len(r) == 3 and len(set(r)) == 3 for r in res.target.values())
    # a hard limit a broker was within before stays kept (peak of the move counted)
    for hard in ("disk-capacity", "nw-in-capacity"):
        if g[hard]["before"] <= g[hard]["threshold"]:
            assert g[hard]["status"] == "met", (hard, g[hard])


def test_leaders_bytes_in_is_evened_by_reordering_only():
    topo = _topo(sizes=False, seed=11, topics=8, parts=20)
    base = plan(topo, Goal("rebalance"), goals="replicas,leaders,first-followers")
    res = plan(topo, Goal("rebalance"), goals="replicas,leader-bytes-in,leaders,first-followers")
    lbi, lbi0 = res.report["goals"]["leader-bytes-in"], base.report["goals"]["leader-bytes-in"]
    assert lbi["after"] < lbi0["after"] / 2, (lbi, lbi0)
    assert res.report["goals_optimised"]["moves_per_goal"]["leader-bytes-in"] > 0
    # the same replica sets as without the goal (no data moves for it), leader balance kept
    assert {tp: set(r) for tp, r in res.target.items()} == {tp: set(r) for tp, r in base.target.items()}
    assert res.report["replicas_moved"] == base.report["replicas_moved"]
    assert res.report["goals"]["leaders"]["after"] <= 1 and res.report["goals"]["first-followers"]["after"] <= 1


def test_goals_on_the_command_line(tmp_path):
    import json
    import subprocess
    import sys

    snap = tmp_path / "s.json"
    topo = _topo(sizes=False, rates=False, skew=0.8)
    snap.write_text(json.dumps(topo.to_dict()))
    run = [sys.executable, "-m", "kops", "plan", "rebalance", "--topology", str(snap), "--output", "json"]
    r = subprocess.run(run + ["--goals", "replicas,topic-spread,leaders"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)["report"]
    assert rep["goals"]["topic-spread"]["status"] == "met" and rep["goals_optimised"]["order"][-3:] == [
        "replicas", "topic-spread", "leaders"]
    r = subprocess.run(run + ["--goals", "replicas,bogus"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "unknown goal bogus" in r.stdout, (r.stdout, r.stderr)


def test_topic_leaders_even_through_a_chain_where_racks_have_two_brokers():
    """Racks of two brokers, every partition in all three: broker 5 leads two partitions of the
    topic and its rack-mate 6 none, and 6 is in no partition 5 leads. No single or paired swap
    evens it; a chain does: 5 hands p0 to its follower 1, and 1 hands p2 to its follower 6."""
    lists = {0: (5, 1, 3), 1: (5, 2, 4), 2: (1, 4, 6), 3: (2, 3, 6), 4: (3, 2, 6), 5: (4, 1, 5)}
    brokers = tuple(Broker(b, f"r{(b - 1) // 2}") for b in range(1, 7))
    topo = Topology(brokers=brokers, topics=(Topic("t", tuple(Partition("t", p, r) for p, r in lists.items())),))
    for goals in ("topic-spread", "replicas,topic-spread,leaders"):  # (the second: the leader phase does it)
        res = plan(topo, Goal("rebalance"), goals=goals)
        after = {p: res.target.get(("t", p), r) for p, r in lists.items()}
        assert all(sorted(after[p]) == sorted(r) for p, r in lists.items()), "reordering only"
        leads = [sum(r[0] == b for r in after.values()) for b in range(1, 7)]
        assert leads == [1] * 6, (goals, after)
        assert res.report["goals"]["topic-spread"]["after"] == 0, res.report["goals"]["topic-spread"]
    assert plan(topo, Goal("rebalance"), goals="topic-spread").report["goals_optimised"]["moves_per_goal"] == {
        "topic-spread": 0, "topic-spread leaders": 2}


@settings(max_examples=300, deadline=None)
@given(load=st.integers(0, 10_000), cap=st.integers(1, 50), lo=st.integers(0, 200), width=st.integers(0, 50),
       delta=st.integers(-10_000, 10_000))
def test_room_is_the_interval_of_changes_that_keep_a_broker_no_further_from_the_band(load, cap, lo, width, delta):
    """The topic pass checks the earlier goals by interval (``Load.room``): a change of the
    broker's load is inside it exactly when ``dist`` says it leaves the broker no further from the
    band (away from the interval's ends, where float rounding may fall either way)."""
    from types import SimpleNamespace

    from kops.placement.goals.base import EPS
    from kops.placement.goals.loads import ReplicasGoal

    st = SimpleNamespace(allowed=[7], reps=[[7]], parts=SimpleNamespace(rf=[1]), band_share=0.1)
    ld = ReplicasGoal(st, [float(load)], {7: float(cap)})
    ld.lo, ld.hi = float(lo), float(lo + width)
    lo_d, hi_d = ld.room(7)
    keeps = ld.dist(7, delta) <= ld.dist(7) + EPS
    if min(abs(delta - lo_d), abs(delta - hi_d)) > 1e-6:
        assert (lo_d <= delta <= hi_d) == keeps
    assert lo_d <= 0.0 <= hi_d  # no change always keeps


@settings(max_examples=500, deadline=None)
@given(a=st.lists(st.sampled_from([0.1, 0.5, 1.0, 2.0, 3.0, 5.0, 7.5, 10.0, 30.0]) | st.floats(0, 40), max_size=12),
       b=st.lists(st.sampled_from([0.1, 0.5, 1.0, 2.0, 5.0]) | st.floats(0, 40), max_size=6),
       even=st.sampled_from([0.25, 0.5, 1.0, 2.5, 4.0, 0.1 + 0.2]) | st.floats(0.01, 30), limit=st.sampled_from([1, 5, 64]))
def test_the_load_swaps_candidates_come_in_the_order_of_a_full_sort(a, b, even, limit):
    """A load goal's swap candidates (``nearest``, lazily) are the first of those a stable sort of
    every pair by its distance to ``even`` gives, ties included."""
    from operator import itemgetter

    from kops.placement.goals.loads import nearest

    a, b = sorted(a, reverse=True), sorted(b)
    full = sorted([(abs(x - y - even), i, j) for i, x in enumerate(a) for j, y in enumerate(b) if 0 < x - y <= 2 * even],
                  key=itemgetter(0))
    assert list(nearest(a, b, even, limit)) == [(i, j) for _k, i, j in full[:limit]]


@settings(max_examples=400, deadline=None)
@given(ls=st.integers(0, 10**6), ld=st.integers(0, 10**6), cs=st.sampled_from([1.0, 3.0, 1e3]),
       cd=st.sampled_from([1.0, 3.0, 1e3]), lo=st.integers(0, 10**4), width=st.integers(0, 10**4),
       xs=st.lists(st.integers(1, 2 * 10**6), min_size=1, max_size=20))
def test_a_pair_no_swap_can_gain_on_is_one_where_none_does(ls, ld, cs, cd, lo, width, xs):
    """``Load.may_gain`` says no only where no load moved from src to dst gains (``gain_by``)."""
    from types import SimpleNamespace

    from kops.placement.goals.base import EPS
    from kops.placement.goals.loads import ReplicasGoal

    st_ = SimpleNamespace(allowed=[1, 2], reps=[[1], [2]], parts=SimpleNamespace(rf=[1, 1]), band_share=0.1)
    g = ReplicasGoal(st_, [float(ls), float(ld)], {1: cs, 2: cd})
    g.lo, g.hi = lo / 1000, (lo + width) / 1000
    if not g.may_gain(1, 2, max(xs)):
        assert all(g.gain_by(1, 2, float(x)) <= EPS for x in xs)


@settings(max_examples=800, deadline=None)
@given(us=st.integers(0, 2000), ud=st.integers(0, 2000), cs=st.sampled_from([1.0, 3.0, 1e3, 2.0**30, 3e10]),
       cd=st.sampled_from([1.0, 3.0, 1e3, 2.0**30, 3e10]), lo=st.integers(0, 1000), width=st.integers(0, 1000),
       x=st.tuples(st.integers(1, 2000), st.integers(0, 12)),
       xs=st.lists(st.tuples(st.integers(1, 2000), st.integers(0, 12)), min_size=1, max_size=20))
def test_a_swap_past_the_gain_is_one_no_larger_swap_gains_on(us, ud, cs, cd, lo, width, x, xs):
    """``Load.past_gain`` says yes only where no load from ``x`` to ``upto`` moved from src to dst
    gains (``gain_by``): uses, band and loads moved drawn in units of each broker's capacity
    (a thousandth and less: 10**-k), where capacities are 1 or bytes, so that a gain may rise so
    slowly that a small load moved gains less than EPS and a larger one more."""
    from types import SimpleNamespace

    from kops.placement.goals.base import EPS
    from kops.placement.goals.loads import ReplicasGoal

    def load(m: int, k: int) -> float:
        return m / 1000 * 10.0**-k * min(cs, cd)

    st_ = SimpleNamespace(allowed=[1, 2], reps=[[1], [2]], parts=SimpleNamespace(rf=[1, 1]), band_share=0.1)
    g = ReplicasGoal(st_, [us / 1000 * cs, ud / 1000 * cd], {1: cs, 2: cd})
    g.lo, g.hi = lo / 1000, (lo + width) / 1000
    at, larger = load(*x), [load(*v) for v in xs]
    upto = max(at, *larger)
    if g.past_gain(1, 2, at, upto):
        edges = [e for e in g._edges(1, 2, upto)[0] if at <= e <= upto]
        assert all(g.gain_by(1, 2, y) <= EPS for y in [at, upto, *edges, *(v for v in larger if v >= at)])


def test_past_the_gain_example():
    """Src 10 above the band's top, dst 10 below it: a load under 20 moved gains, 25 and more do not."""
    from types import SimpleNamespace

    from kops.placement.goals.loads import ReplicasGoal

    st_ = SimpleNamespace(allowed=[1, 2], reps=[[1], [2]], parts=SimpleNamespace(rf=[1, 1]), band_share=0.1)
    g = ReplicasGoal(st_, [210.0, 190.0], {1: 1.0, 2: 1.0})
    g.lo, g.hi = 100.0, 200.0
    assert g.gain_by(1, 2, 15.0) == 5.0 and not g.past_gain(1, 2, 15.0, 100.0)
    assert g.past_gain(1, 2, 25.0, 100.0) and not g.past_gain(1, 2, 0.5, 100.0)


@settings(max_examples=300, deadline=None)
@given(lo=st.integers(0, 4), width=st.integers(0, 2), a=st.integers(1, 8), b=st.integers(0, 8),
       c=st.integers(0, 8), d=st.integers(1, 8))
def test_topic_spread_move_arithmetic_matches_the_distance_from_the_band(lo, width, a, b, c, d):
    """``TopicSpreadGoal.gain1/keeps1/gain2`` (integer shortcuts) against ``dist``, the definition."""
    from types import SimpleNamespace

    from kops.placement.goals.topic_spread import TopicSpreadGoal

    st = SimpleNamespace(parts=SimpleNamespace(tps=[("t", 0), ("u", 0)], rf=[1, 1]), reps=[[1], [2]], allowed=[1, 2],
                         allowed_set={1, 2}, index=SimpleNamespace(on={1: {}, 2: {}}))
    ts = TopicSpreadGoal(st)
    t, u = ts.topic  # (topics are numbered: t 0, u 1)
    ts.band = [(lo, lo + width), (lo, lo + width + 1)]
    ts.count[t].update({1: a - ts.count[t][1], 2: b - ts.count[t][2]})
    ts.count[u].update({1: c - ts.count[u][1], 2: d - ts.count[u][2]})
    dist = ts.dist
    gain_t = dist((t, 1)) + dist((t, 2)) - dist((t, 1), -1) - dist((t, 2), 1)
    assert ts.gain1(0, 1, 2) == gain_t
    assert ts.keeps1(0, 1, 2) == (dist((t, 1), -1) <= dist((t, 1)) and dist((t, 2), 1) <= dist((t, 2)))
    gain_u = dist((u, 2)) + dist((u, 1)) - dist((u, 2), -1) - dist((u, 1), 1)
    assert ts.gain2(0, 1, 1, 2) == gain_t + gain_u  # t's replica 1 -> 2, u's 2 -> 1


def test_the_rooms_kept_per_broker_equal_fresh_ones_after_every_move(monkeypatch):
    """The optimizer keeps each broker's rooms on the earlier goals until a move changes its load:
    after every move made by the passes, every kept room equals one computed afresh."""
    from kops.placement.goals.loads import Load
    from kops.placement.optimizer import Optimizer

    compared = []
    orig = Optimizer.try_moves

    def try_moves(self, moves, goal, checked=False, hard=False):
        made = orig(self, moves, goal, checked, hard)
        if made:
            for b, kept in self._room_of.items():
                assert kept == [(g.w, *g.room(b)) for g in self.guards if isinstance(g, Load)], (b, moves)
                compared.append(b)
        return made

    monkeypatch.setattr(Optimizer, "try_moves", try_moves)
    topo = _topo(n_brokers=12, n_racks=3, topics=8, parts=16, skew=0.7)
    plan(topo, Goal("rebalance"), goals="disk-usage,nw-in-usage,topic-spread,replicas")
    # (the passes moved, and the kept rooms were compared: 97 comparisons; topic spread asks for the
    # rooms of fewer brokers since it skips destinations a move there cannot gain on)
    assert len(compared) > 50


def test_a_move_tried_as_already_hard_checked_is_rack_safe_and_within_the_limits(monkeypatch):
    """Topic spread's tries and the load goals' swaps skip the rack and disk checks of the
    replicas they move (their pairing, ``PlacementState.may_go``, made them): at every such try,
    every move is rack-safe (by the uncached definition) and within the disk and network limits,
    on a cluster whose disks fill up during the plan."""
    from kops.placement.goals.loads import Load
    from kops.placement.goals.topic_spread import TopicSpreadGoal
    from kops.placement.optimizer import Optimizer

    seen = []
    orig = Optimizer.try_moves

    def try_moves(self, moves, goal, checked=False, hard=False):
        if hard:
            st = self.st
            for p, src, dst in moves:
                new = [dst if b == src else b for b in st.reps[p]]
                assert rack_violation(new, tree) is None, (p, new)
                assert st.limits.fits(dst, p), (p, dst)
            seen.append(type(goal))
        return orig(self, moves, goal, checked, hard)

    monkeypatch.setattr(Optimizer, "try_moves", try_moves)
    topo = _topo(n_brokers=12, n_racks=3, topics=8, parts=16, skew=0.7,
                 caps=lambda b: Capacity(disk_bytes=2200 * MB, nw_in_bytes_per_s=1e9))
    tree = RackTree.build({b.id: b.rack for b in topo.brokers})
    plan(topo, Goal("rebalance"), goals="disk-usage,topic-spread,replicas")
    # (network-in use last: its pass swaps replicas under replica counts, disk use and topic spread)
    plan(topo, Goal("rebalance"), goals="disk-usage,topic-spread,nw-in-usage")
    assert TopicSpreadGoal in seen and any(issubclass(g, Load) for g in seen)  # (both kinds were tried)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.integers(0, 9), st.integers(0, 5), min_size=2), st.integers(0, 3))
def test_a_topic_leader_not_over_could_hand_no_leadership_on(counts, lo):
    """Topic leaders: the pass skips a partition whose leader is not ``over``: at or below its
    topic's floor, or with fewer than two of its leaders; in the latter case every step would need
    ``worth`` for some broker, which is never so: the second condition skips no step."""
    from collections import Counter

    from kops.placement.goals.leadership import Counts

    obj = Counts("topic", Counter({("t", b): c for b, c in counts.items()}), None, topic=["t"],
                  bands={"t": (lo, lo + 1)})
    for a, c in counts.items():
        if c > lo and not obj.over(0, a):
            assert not any(obj.worth(0, a, b) for b in [*counts, 99]), (a, counts)
        assert obj.over(0, a) == (c > lo and c >= 2)


def _two_brokers(cells, lo, width):
    """Topic spread over brokers 1 and 2 where topic i has ``cells[i]`` = (x_i, y_i) replicas on
    them (one partition per replica), every topic's band ``(lo, lo + width)``: the goal and the lists."""
    from types import SimpleNamespace

    from kops.placement.goals.topic_spread import TopicSpreadGoal

    tps, reps = [], []
    for i, (x, y) in enumerate(cells):
        for k in range(max(x, y)):
            tps.append((f"t{i:02d}", k))
            reps.append([b for b, n in ((1, x), (2, y)) if k < n])
    st_ = SimpleNamespace(parts=SimpleNamespace(tps=tps, rf=[len(r) for r in reps]), reps=reps, allowed=[1, 2],
                          allowed_set={1, 2}, index=SimpleNamespace(on={1: {}, 2: {}}))
    ts = TopicSpreadGoal(st_)
    ts.band = [(lo, lo + width)] * len(ts.band)
    ts._sets(st_.allowed)  # (the sets again, for the band set by hand)
    return ts, reps


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=12), st.integers(0, 2),
       st.integers(0, 1))
def test_the_topics_a_pair_moves_are_those_a_filter_over_the_counts_finds(cells, lo, width):
    """Topic spread pairs brokers by the topics each may give and take, kept as sets per broker
    (over, spare, under, full): the topics going a -> b are exactly those whose cell on a is
    above the band (and b below its top) or above the floor (and b below it), by the counts."""
    ts, _reps = _two_brokers(cells, lo, width)
    band = (lo, lo + width)
    names = {name: i for i, name in enumerate(ts.names)}
    goes = (ts.over[1] - ts.full[2]) | (ts.spare[1] & ts.under[2])
    want = {names[f"t{i:02d}"] for i, (x, y) in enumerate(cells) if max(x, y)
            and ((x > band[1] and y < band[1]) or (x > band[0] and y < band[0]))}
    assert goes == want


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=8), st.integers(0, 2),
       st.integers(0, 1), st.lists(st.booleans(), max_size=12), st.data())
def test_whether_a_swap_of_a_pair_may_keep_topic_spread_is_what_each_replica_tells(cells, lo, width, moves, data):
    """``TopicSpreadGoal.swappable`` (by its per-broker sets) against its definition: a pair's
    candidates may swap when a topic is on both sides, else when a replica of each side may go
    (``keeps1``) -- after moves between the brokers too (the sets kept current by ``moved``)."""
    ts, reps = _two_brokers(cells, lo, width)
    for one_way in moves:  # (a replica held on one broker only goes to the other)
        src, dst = (1, 2) if one_way else (2, 1)
        p = next((p for p, r in enumerate(reps) if r == [src]), None)
        if p is not None:
            ts.moved(p, [src], [dst])
            reps[p] = [dst]
    on1 = [p for p, r in enumerate(reps) if 1 in r and 2 not in r]
    on2 = [p for p, r in enumerate(reps) if 2 in r and 1 not in r]
    ps = data.draw(st.lists(st.sampled_from(on1), unique=True), "ps") if on1 else []
    qs = data.draw(st.lists(st.sampled_from(on2), unique=True), "qs") if on2 else []
    want = bool({ts.topic[p] for p in ps} & {ts.topic[q] for q in qs}) or \
        (any(ts.keeps1(p, 1, 2) for p in ps) and any(ts.keeps1(q, 2, 1) for q in qs))
    assert ts.swappable(ps, qs, 1, 2) == want


def test_every_move_of_topic_spread_takes_no_topic_cell_further_off(monkeypatch):
    """Topic spread's moves and swaps keep every topic's cell on both brokers no further from its
    band (the topics off it can only fall in number): checked at every move it makes."""
    from kops.placement.goals.topic_spread import TopicSpreadGoal
    from kops.placement.optimizer import Optimizer
    from tests.unit.plan_corpus import cases

    made = []
    orig = Optimizer.try_moves

    def try_moves(self, moves, goal, checked=False, hard=False):
        if not isinstance(goal, TopicSpreadGoal):
            return orig(self, moves, goal, checked, hard)
        cells = {(goal.topic[p], b) for p, src, dst in moves for b in (src, dst)}
        dist = {k: goal.dist(k) for k in cells}
        ok = orig(self, moves, goal, checked, hard)
        if ok:
            assert all(goal.dist(k) <= v for k, v in dist.items()), (moves, dist)
            made.append(len(moves))
        return ok

    monkeypatch.setattr(Optimizer, "try_moves", try_moves)
    for case in ("mixed-12-stacked", "rates-12", "dead-broker"):
        plan(*cases()[case])
    assert 1 in made and 2 in made  # (moves and swaps were made)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(1, 9)), min_size=1, max_size=30),
       st.integers(0, 20), st.integers(1, 3))
def test_leaders_bytes_in_steps_at_the_partitions_a_full_sort_would_step_at(parts, hi, shift):
    """Leaders' bytes-in: a round sorts only the partitions led by a broker over the band at its
    start, and the rest only if one of them is led by one over it once those are done. The
    partitions that step (led by one over the band when reached) are the ones a round over the
    whole order sorted at its start steps at, while each step hands leadership on as the pass does."""
    from collections import Counter

    from kops.placement.goals.leadership import Counts

    def run(lazy: bool) -> list[int]:
        reps = [[a, b if b != a else (a + 1) % 6] for a, b, _w in parts]
        weight = [w for _a, _b, w in parts]
        obj = Counts("lbi", Counter(), (0, hi), weight=weight)
        for r, w in zip(reps, weight):
            obj.count[r[0]] += w
        scope = list(range(len(reps)))
        order = obj.candidates(scope, reps, None) if lazy else \
            sorted(scope, key=lambda p: (-obj.count[reps[p][0]], -weight[p], p))
        stepped = []
        for p in order:
            a = reps[p][0]
            if not obj.over(p, a):
                continue
            stepped.append(p)
            b = reps[p][1] if (p + shift) % 2 else (a + shift) % 6  # (onto a follower, or elsewhere)
            obj.count[a] -= weight[p]
            obj.count[b] += weight[p]
            reps[p] = [b, a]
        return stepped

    assert run(True) == run(False)


def test_the_goal_passes_leave_the_planners_heaps_alone(monkeypatch):
    """Phase 2's broker heaps are not read after it: the goal passes' moves (hundreds of
    thousands on a large cluster) do not push onto them, and a phase reading them must rebuild
    them first (``_ascending`` refuses heaps let go)."""
    from kops.placement.optimizer import Optimizer

    sizes = []
    orig = Optimizer._replica_goals

    def _replica_goals(self):
        heaps = self.st.loads.heaps
        sizes.append((len(heaps.minheap), len(heaps.maxheap)))
        orig(self)
        assert sum(self.moves.values()) > 0, self.moves
        sizes.append((len(heaps.minheap), len(heaps.maxheap)))
        with pytest.raises(AssertionError, match="rebuild them first"):
            heaps.ascending(lambda b: 1)

    monkeypatch.setattr(Optimizer, "_replica_goals", _replica_goals)
    topo = _topo(n_brokers=12, n_racks=3, topics=8, parts=16, skew=0.7)
    plan(topo, Goal("rebalance"), goals="disk-usage,nw-in-usage,topic-spread,replicas")
    assert len(sizes) == 2 and sizes[0] == sizes[1], sizes


@pytest.mark.parametrize("case", ["mixed-12-stacked", "rf-1-to-4-unequal-racks", "dead-broker", "50-racks"])
def test_the_goals_following_a_plan_equal_goals_built_afresh(case, monkeypatch):
    """Every goal tracking a plan follows its moves (state watchers): at the end of the replica
    goals, each one's loads, counts, per-broker topic sets and off-band total equal those of the
    same goal built afresh on the state."""
    from kops.placement.goals import by_name
    from kops.placement.optimizer import Optimizer
    from tests.unit.plan_corpus import cases

    checked = []
    orig = Optimizer._replica_goals

    def _replica_goals(self):
        orig(self)
        st = self.st
        for name, goal in self.tracked.items():
            fresh = by_name(name).track(st)
            if name == "topic-spread":
                assert [dict(+c) for c in goal.count] == [dict(+c) for c in fresh.count]
                for which in ("over", "spare", "under", "full"):
                    assert getattr(goal, which) == getattr(fresh, which), which
                assert goal.total() == fresh.total()
            else:
                assert all(abs(goal.load[b] - fresh.load[b]) <= 1e-6 * max(1.0, fresh.load[b]) for b in st.allowed)
            checked.append(name)

    monkeypatch.setattr(Optimizer, "_replica_goals", _replica_goals)
    topo, goal = cases()[case]
    plan(topo, goal)
    assert "topic-spread" in checked and "replicas" in checked


def test_a_chain_backs_first_followers_verdict_from_its_indexes_is_the_guards():
    """Topic leaders' chain back, a -> x -> c -> y -> a: the first-followers guard's verdict on each
    step, known from the four indexes (``_FirstFollowersBack``), equals ``Counts.keeps`` of the
    step built -- every step of every hand-back walked in real plans (racks of two brokers: many
    chain backs), both verdicts and each of the 16 cases of the indexes at 1 or not among them."""
    from collections import Counter

    from kops.placement.goals import leadership

    seen: Counter = Counter()
    orig = leadership.Leadership._chain_back

    def _chain_back(self, obj, a, c, chain, try_swaps, tries, ff=None):
        assert ff is not None and ff.slot == 1
        reps, led_by, allowed = self.st.reps, self.led_by, self.st.allowed_set
        (p, i), (q, j) = chain
        x = reps[p][i]
        for q1 in sorted(led_by.lead.get(c, ())):
            if q1 in (p, q):
                continue
            for k in range(1, len(reps[q1])):
                y = reps[q1][k]
                if y == a or y not in allowed:
                    continue
                for q2 in sorted(led_by.get((y, a), ())):
                    if q2 in (p, q, q1):
                        continue
                    m = reps[q2].index(a)
                    step = (*chain, (q1, k), (q2, m))
                    assert [reps[s][0] for s, _ in step] == [a, x, c, y]
                    assert [reps[s][n] for s, n in step] == [x, c, y, a]
                    want = ff.keeps(step, reps)
                    assert leadership._FirstFollowersBack(ff, a, x, c, i, j).fit(y, k, m) == want, (step, a, x, c, y)
                    seen[want] += 1
                    seen[(i == 1, j == 1, k == 1, m == 1)] += 1
                    seen["x is y"] += x == y
        return orig(self, obj, a, c, chain, try_swaps, tries, ff)

    import unittest.mock

    with unittest.mock.patch.object(leadership.Leadership, "_chain_back", _chain_back):
        for seed in (1, 2, 3):
            plan(_topo(n_brokers=12, n_racks=6, topics=8, parts=12, seed=seed), Goal("rebalance"))
    assert seen[True] > 50 and seen[False] > 50 and seen["x is y"] > 10, seen
    assert sum(1 for k in seen if isinstance(k, tuple)) == 16, seen


def test_the_chain_backs_known_verdicts_leave_the_plans_as_trying_every_step():
    """With the first-followers verdict known before a chain back's step is built, a refused step
    still counts as a try (a hand-back refused whole is charged at once): the plans are those of
    trying every step through the guards, with budgets small enough to run out mid-walk too."""
    import unittest.mock

    from kops.placement.goals import leadership

    differ = set()
    for budget in (3, 8, 20, leadership.CHAIN_TRIES):
        with unittest.mock.patch.object(leadership, "CHAIN_TRIES", budget):
            for seed in (1, 2, 3, 4):
                topo = _topo(n_brokers=12, n_racks=6, topics=8, parts=12, seed=seed)
                known = plan(topo, Goal("rebalance"))
                with unittest.mock.patch.object(leadership._FirstFollowersBack, "fit", lambda *a: True):
                    each = plan(topo, Goal("rebalance"))
                assert known.target == each.target and known.report == each.report, (budget, seed)
                differ.add(repr(sorted(known.target.items())))
    assert len(differ) > 4  # (the budget changes some plans: it is spent where it matters)


@pytest.mark.parametrize("left", [-1, 0, 1, 2, 5])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 6, 9])
def test_spending_n_tries_at_once_is_taking_n_one_by_one(left, n):
    from kops.placement.goals.leadership import Tries

    one = Tries(left)
    ok = all(one.take() for _ in range(n))  # (stops at the first refused, as the walk does)
    at_once = Tries(left)
    assert at_once.spend(n) == ok and at_once.left == one.left, (left, n)
