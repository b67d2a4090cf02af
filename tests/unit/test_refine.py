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

    st = SimpleNamespace(allowed=[7], reps=[[7]], rf=[1], band_share=0.1)
    ld = ReplicasGoal(st, [float(load)], {7: float(cap)})
    ld.lo, ld.hi = float(lo), float(lo + width)
    lo_d, hi_d = ld.room(7)
    keeps = ld.dist(7, delta) <= ld.dist(7) + EPS
    if min(abs(delta - lo_d), abs(delta - hi_d)) > 1e-6:
        assert (lo_d <= delta <= hi_d) == keeps
    assert lo_d <= 0.0 <= hi_d  # no change always keeps


@settings(max_examples=300, deadline=None)
@given(lo=st.integers(0, 4), width=st.integers(0, 2), a=st.integers(1, 8), b=st.integers(0, 8),
       c=st.integers(0, 8), d=st.integers(1, 8))
def test_topic_spread_move_arithmetic_matches_the_distance_from_the_band(lo, width, a, b, c, d):
    """``TopicSpreadGoal.gain1/keeps1/gain2`` (integer shortcuts) against ``dist``, the definition."""
    from types import SimpleNamespace

    from kops.placement.goals.topic_spread import TopicSpreadGoal

    st = SimpleNamespace(tps=[("t", 0), ("u", 0)], reps=[[1], [2]], rf=[1, 1], allowed=[1, 2], allowed_set={1, 2})
    ts = TopicSpreadGoal(st)
    ts.band = {"t": (lo, lo + width), "u": (lo, lo + width + 1)}
    ts.count["t"].update({1: a - ts.count["t"][1], 2: b - ts.count["t"][2]})
    ts.count["u"].update({1: c - ts.count["u"][1], 2: d - ts.count["u"][2]})
    dist = ts.dist
    gain_t = dist(("t", 1)) + dist(("t", 2)) - dist(("t", 1), -1) - dist(("t", 2), 1)
    assert ts.gain1(0, 1, 2) == gain_t
    assert ts.keeps1(0, 1, 2) == (dist(("t", 1), -1) <= dist(("t", 1)) and dist(("t", 2), 1) <= dist(("t", 2)))
    gain_u = dist(("u", 2)) + dist(("u", 1)) - dist(("u", 2), -1) - dist(("u", 1), 1)
    assert ts.gain2(0, 1, 1, 2) == gain_t + gain_u  # t's replica 1 -> 2, u's 2 -> 1


def test_the_rooms_kept_per_broker_equal_fresh_ones_after_every_move(monkeypatch):
    """The optimizer keeps each broker's rooms on the earlier goals until a move changes its load:
    after every move made by the passes, every kept room equals one computed afresh."""
    from kops.placement.goals.loads import Load
    from kops.placement.optimizer import Optimizer

    checked = []
    orig = Optimizer.try_moves

    def try_moves(self, moves, goal, checked_guards=False, hard=False):
        made = orig(self, moves, goal, checked_guards, hard)
        if made:
            for b, kept in self._room_of.items():
                assert kept == [(g.w, *g.room(b)) for g in self.guards if isinstance(g, Load)], (b, moves)
                checked.append(b)
        return made

    monkeypatch.setattr(Optimizer, "try_moves", try_moves)
    topo = _topo(n_brokers=12, n_racks=3, topics=8, parts=16, skew=0.7)
    plan(topo, Goal("rebalance"), goals="disk-usage,nw-in-usage,topic-spread,replicas")
    # (the passes moved, and the kept rooms were compared: 97 comparisons; topic spread asks for the
    # rooms of fewer brokers since it skips destinations a move there cannot gain on)
    assert len(checked) > 50


def test_a_disk_said_to_take_none_of_a_topic_refuses_each_of_its_partitions(monkeypatch):
    """Topic spread leaves out of its walk the brokers ``Limits.takes_none`` names: on a cluster
    whose disks fill up during the plan, each one it names is refused by ``Limits.fits`` for every
    partition of the topic, at the moment it is asked."""
    from kops.placement.state import Limits

    named = []
    orig = Limits.takes_none

    def takes_none(self, parts):
        test = orig(self, parts)
        if test is None:
            return None

        def checked(b):
            full = test(b)
            if full:
                assert not any(self.fits(b, p) for p in parts), (b, parts)
                named.append(b)
            return full
        return checked

    monkeypatch.setattr(Limits, "takes_none", takes_none)
    # disks of 2.2 GB with ~1.6 GB on each (80 % threshold: 1.76 GB): a few moves fill them
    topo = _topo(n_brokers=12, n_racks=3, topics=8, parts=16, skew=0.7,
                 caps=lambda b: Capacity(disk_bytes=2200 * MB, nw_in_bytes_per_s=1e9))
    plan(topo, Goal("rebalance"), goals="disk-usage,topic-spread,replicas")
    assert named  # (some broker was named, and checked)


def test_a_move_tried_as_already_hard_checked_is_rack_safe_and_within_the_limits(monkeypatch):
    """Topic spread's tries skip the rack and disk checks of the replica it moves (its walk made
    them): at every such try, that move is rack-safe (by the uncached definition) and within the
    disk and network limits, on a cluster whose disks fill up during the plan."""
    from kops.placement.optimizer import Optimizer

    seen = []
    orig = Optimizer.try_moves

    def try_moves(self, moves, goal, checked=False, hard=False):
        if hard:
            st = self.st
            p, src, dst = moves[0]
            new = [dst if b == src else b for b in st.reps[p]]
            assert rack_violation(new, tree) is None, (p, new)
            assert st.limits.fits(dst, p), (p, dst)
            seen.append(len(moves))
        return orig(self, moves, goal, checked, hard)

    monkeypatch.setattr(Optimizer, "try_moves", try_moves)
    topo = _topo(n_brokers=12, n_racks=3, topics=8, parts=16, skew=0.7,
                 caps=lambda b: Capacity(disk_bytes=2200 * MB, nw_in_bytes_per_s=1e9))
    tree = RackTree.build({b.id: b.rack for b in topo.brokers})
    plan(topo, Goal("rebalance"), goals="disk-usage,topic-spread,replicas")
    assert 1 in seen and 2 in seen  # (moves and swaps were tried)


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


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=40), st.randoms(use_true_random=False),
       st.lists(st.integers(-1, 5), min_size=1, max_size=30))
def test_the_destinations_by_count_walk_the_list_as_a_filter_over_it_would(counts, rnd, mosts):
    """Topic spread walks its destination list's brokers holding at most ``most`` replicas of the
    topic, and not full, through count groups kept as replicas move: the same brokers in the same
    order as filtering the whole list by the current counts and fullness, after any sequence of
    moves (a move changes the counts and the fullness of its two brokers only)."""
    from collections import Counter

    from kops.placement.destinations import ByCount

    brokers = list(range(100, 100 + len(counts)))
    rnd.shuffle(brokers)
    cnt = Counter({b: c for b, c in zip(brokers, counts) if c})
    others = [7, 8, 9]  # brokers beyond the head: moves to and from them change no group
    cnt.update({7: 3, 8: 1})
    full = {b for b in brokers if rnd.random() < 0.3}
    head = ByCount(list(brokers), cnt, full.__contains__)
    everyone = brokers + others
    for most in mosts:
        assert list(head.upto(most)) == [b for b in brokers if cnt.get(b, 0) <= most and b not in full]
        src = rnd.choice([b for b in everyone if cnt.get(b, 0) > 0] or [None])
        if src is None:
            continue
        dst = rnd.choice([b for b in everyone if b != src])
        cnt[src] -= 1
        cnt[dst] += 1
        for b in (src, dst):
            if rnd.random() < 0.5:
                full ^= {b}
        head.moved(src, dst)
    assert list(head.upto(10)) == [b for b in brokers if b not in full]


def test_a_replica_topic_spread_cannot_move_directly_had_no_destination_with_room(monkeypatch):
    """Topic spread's direct move looks at every destination of its walk whose rooms on the earlier
    goals take the replica (not only at the first few that pass the hard checks: on a large
    cluster those are often brokers at the top of the network-in band): whenever a replica that
    may leave its source did not move directly, no broker of its walk (as it was before the try)
    was a direct destination -- not holding it, rack-safe, within the limits, gaining, with room."""
    from kops.placement.goals.base import EPS, within
    from kops.placement.goals.topic_spread import TopicSpreadGoal

    looked = []
    orig = TopicSpreadGoal._even_one

    def _even_one(ts, mover, p, src, head):
        st = mover.st
        t = ts.topic[p]
        walk = list(head.upto(ts.count[t][src] - 2))
        leaves = within(mover.rooms(src), p, -1.0)
        made = orig(ts, mover, p, src, head)
        if leaves and made is None:
            r = st.reps[p]
            for d in walk:
                new = [d if b == src else b for b in r]
                ok = d not in r and st.safety.safe_distinct(new) and (not st.limits.limited or st.limits.fits(d, p)) \
                    and ts.gain1(p, src, d) > EPS and within(mover.rooms(d), p)
                assert not ok, (p, src, d, walk.index(d))
            looked.append(len(walk))
        return made

    monkeypatch.setattr(TopicSpreadGoal, "_even_one", _even_one)
    # 120 brokers, 60 topics of one replica per broker or so: ~44 brokers without one per topic,
    # more than the 32 takers the walk once stopped at; network-in rates spread over three orders of
    # magnitude with ~200 replicas per broker, so the network-in band is narrow and the brokers the
    # nw-in-usage pass brought down to its top have no room for a busy replica
    rng = random.Random(5)
    n, racks = 120, 6
    topics = []
    for t in range(60):
        ps = []
        for i in range(40):
            reps = tuple(rng.choice(range(r, n, racks)) for r in rng.sample(range(racks), 3))
            ps.append(Partition(f"t{t}", i, reps, size_bytes=int(2 ** rng.uniform(20, 30)),
                                bytes_in_per_s=2 ** rng.uniform(6, 20)))
        topics.append(Topic(f"t{t}", tuple(ps)))
    brokers = tuple(Broker(b, f"r{b % racks}", capacity=Capacity(disk_bytes=(2 if b % 4 == 0 else 1) * 400 * 2**30,
                                                              nw_in_bytes_per_s=(2 if b % 4 == 0 else 1) * 40 * MB))
                    for b in range(n))
    plan(Topology(brokers=brokers, topics=tuple(topics)), Goal("rebalance"),
         goals="disk-usage,nw-in-usage,topic-spread")
    assert max(looked) > 32, looked  # (walks longer than the old cap were checked)


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
        order = obj.candidates(scope, reps) if lazy else \
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
        heaps = self.st.heaps
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
