"""Multi-level rack-aware assignment: hard rack safety, ±1 at every level, leader optimality."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kops.errors import BadInput
from kops.placement.multilevel import MultiLevelTree, assign_replicas_multilevel, level_counts
from kops.placement.racks import RackTree, rack_violation


def spreads(assignment, racks):
    """Per level (top .. broker): (replica max - min, leader max - min) over all domains."""
    out = []
    for d in level_counts(assignment, racks):
        r = [v[0] for v in d.values()]
        ld = [v[1] for v in d.values()]
        out.append((max(r) - min(r), max(ld) - min(ld)))
    return out


def sibling_leader_spreads(assignment, racks):
    """Max over domains of (max - min) of the leader counts of its children."""
    tree = MultiLevelTree(racks)
    lead = Counter()
    for reps in assignment.values():
        for x in tree.path[tree.node_of[reps[0]]]:
            lead[x] += 1
    return max((max(lead[c] for c in ks) - min(lead[c] for c in ks)) for ks in tree.kids if len(ks) > 1)


def uniform(shape: tuple[int, ...], per_rack: int) -> list[tuple[int, str]]:
    brokers = []
    for path in itertools.product(*(range(k) for k in shape)):
        rack = "/" + "/".join(f"l{lvl}x{i}" for lvl, i in enumerate(path))
        for _ in range(per_rack):
            brokers.append((len(brokers), rack))
    return brokers


def check_hard(assignment, brokers, n_partitions, rf, first=0):
    racks = dict(brokers)
    tree = RackTree.build(racks)
    assert sorted(assignment) == list(range(first, first + n_partitions))
    for p, reps in assignment.items():
        assert len(reps) == rf and len(set(reps)) == rf, (p, reps)
        assert rack_violation(reps, tree) is None, (p, reps, rack_violation(reps, tree))


# -- the guarantee on uniform trees -------------------------------------------------------------
@settings(max_examples=250, deadline=None)
@given(
    st.lists(st.integers(1, 4), min_size=1, max_size=3),
    st.integers(1, 3),
    st.integers(1, 80),
    st.integers(1, 5),
    st.integers(0, 50),
)
def test_uniform_tree_is_plus_minus_one_at_every_level(shape, per_rack, n_partitions, rf, start):
    brokers = uniform(tuple(shape), per_rack)
    rf = min(rf, len(brokers))
    got = assign_replicas_multilevel(brokers, n_partitions, rf, start)
    check_hard(got, brokers, n_partitions, rf)
    for level, (rep, lead) in enumerate(spreads(got, dict(brokers)), 1):
        assert rep <= 1 and lead <= 1, (level, spreads(got, dict(brokers)))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3), st.integers(1, 4), st.integers(1, 3), st.integers(1, 4))
def test_each_partition_spreads_over_top_domains_first(n_dc, racks_per_dc, per_rack, rf):
    brokers = uniform((n_dc, racks_per_dc), per_rack)
    rf = min(rf, len(brokers))
    got = assign_replicas_multilevel(brokers, 24, rf, 0)
    for reps in got.values():
        dcs = Counter(dict(brokers)[b].split("/")[1] for b in reps)
        assert len(dcs) == min(rf, n_dc)
        assert max(dcs.values()) - min(dcs.values()) <= 1
        racks_used = {dict(brokers)[b] for b in reps}
        assert len(racks_used) == min(rf, n_dc * racks_per_dc)


# -- non-uniform trees: rack safety always, leaders optimal for the replica sets ---------------------
@st.composite
def ragged(draw):
    depth = draw(st.integers(1, 3))
    brokers = []
    n_top = draw(st.integers(1, 3))
    for top in range(n_top):
        def grow(prefix, lvl):
            if lvl == depth:
                for _ in range(draw(st.integers(1, 3))):
                    brokers.append((len(brokers), prefix))
                return
            for k in range(draw(st.integers(1, 3))):
                grow(f"{prefix}/n{lvl}{k}", lvl + 1)
        grow(f"/d{top}", 1)
    return brokers


@settings(max_examples=200, deadline=None)
@given(ragged(), st.integers(1, 50), st.integers(1, 5), st.integers(-1, 20), st.integers(-1, 30))
def test_ragged_trees_are_always_rack_safe(brokers, n_partitions, rf, start, first):
    rf = min(rf, len(brokers))
    import random

    got = assign_replicas_multilevel(brokers, n_partitions, rf, start, first, rng=random.Random(1))
    check_hard(got, brokers, n_partitions, rf, max(0, first))


def _nested_ok(assignment, racks, tree):
    """Leader counts within the nested ±1 targets (module doc) at every level."""
    from kops.placement.multilevel import _nested_targets

    lo, hi = _nested_targets(tree, len(assignment))
    lead = Counter()
    for reps in assignment.values():
        for x in tree.path[tree.node_of[reps[0]]]:
            lead[x] += 1
    return all(lo[x] <= lead[x] <= hi[x] for x in range(1, len(tree.kids)))


@settings(max_examples=120, deadline=None)
@given(ragged(), st.integers(1, 7), st.integers(2, 3))
def test_leaders_meet_the_nested_targets_whenever_any_choice_does(brokers, n_partitions, rf):
    """Brute force: if some choice of leaders within the chosen replica sets meets the targets,
    kops' choice meets them too."""
    rf = min(rf, len(brokers))
    racks = dict(brokers)
    tree = MultiLevelTree(racks)
    got = assign_replicas_multilevel(brokers, n_partitions, rf, 0)
    if _nested_ok(got, racks, tree):
        return
    sets = [got[p] for p in sorted(got)]
    for choice in itertools.product(*[range(len(s)) for s in sets]):
        alt = {p: [s[c]] + [b for b in s if b != s[c]] for p, (s, c) in enumerate(zip(sets, choice))}
        assert not _nested_ok(alt, racks, tree), "a better leader choice exists"


def test_leaders_never_worse_than_replica_sets_allow_on_a_lopsided_tree():
    # dc1 has 1 broker, dc2 has 4: with RF 2 every partition has one replica in each DC, so the
    # DC-level leader split can be exactly even; per broker it cannot (dc1's broker leads half).
    brokers = [(0, "/dc1/r1"), (1, "/dc2/r1"), (2, "/dc2/r1"), (3, "/dc2/r2"), (4, "/dc2/r2")]
    got = assign_replicas_multilevel(brokers, 8, 2, 0)
    check_hard(got, brokers, 8, 2)
    lc = level_counts(got, dict(brokers))
    assert lc[0] == {"/dc1": (8, 4), "/dc2": (8, 4)}
    assert sibling_leader_spreads(got, dict(brokers)) <= 1


# -- Cloudera's algorithm is not enough for leaders ---------------------------------------------
def cloudera_assign(brokers, n_partitions, rf, start=0):
    """Cloudera's tree-iterator algorithm with per-broker leader re-ordering (research notes §1.2)."""
    bs = sorted(brokers)
    paths = {b: tuple(r[1:].split("/")) for b, r in bs}
    depth = len(next(iter(paths.values())))

    def build(prefix, lvl):
        members = [b for b, _ in bs if paths[b][:lvl] == prefix]
        if lvl == depth:
            return {"leaf": members, "i": 0}
        kids = []
        for b in members:
            if paths[b][: lvl + 1] not in kids:
                kids.append(paths[b][: lvl + 1])
        return {"kids": [build(p, lvl + 1) for p in kids], "i": 0}

    def nxt(node):
        seq = node.get("leaf") or node["kids"]
        item = seq[node["i"]]
        node["i"] = (node["i"] + 1) % len(seq)
        return item if "leaf" in node else nxt(item)

    root = build((), 0)
    for _ in range(start):
        nxt(root)
    lead = Counter()
    out = {}
    for p in range(n_partitions):
        chosen = []
        while len(chosen) < rf:
            b = nxt(root)
            if b not in chosen:
                chosen.append(b)
        chosen.sort(key=lambda b: lead[b])
        lead[chosen[0]] += 1
        out[p] = chosen
    return out


def test_cloudera_leader_reordering_can_put_every_leader_in_one_dc():
    brokers = [(0, "/dc0/r0"), (1, "/dc0/r1"), (2, "/dc1/r0"), (3, "/dc1/r1")]
    theirs = cloudera_assign(brokers, 2, 2)
    assert theirs == {0: [0, 2], 1: [1, 3]}  # both leaders in dc0
    assert spreads(theirs, dict(brokers))[0] == (0, 2)
    ours = assign_replicas_multilevel(brokers, 2, 2, 0)
    assert spreads(ours, dict(brokers))[0] == (0, 0)
    # 2 DCs x 3 racks, RF 2, 3 partitions: Cloudera 3 leaders vs 0, kops 2 vs 1
    six = [(i, f"/dc{i // 3}/r{i % 3}") for i in range(6)]
    assert spreads(cloudera_assign(six, 3, 2), dict(six))[0][1] == 3
    assert spreads(assign_replicas_multilevel(six, 3, 2, 0), dict(six))[0][1] == 1


@pytest.mark.parametrize("shape", [(2,), (3,), (2, 2), (2, 3), (3, 2), (2, 2, 2)])
@pytest.mark.parametrize("per_rack", [1, 2, 3])
def test_first_round_replica_sets_are_cloudera_s_on_uniform_trees(shape, per_rack):
    # the tree round-robin is Cloudera's: same replica *sets* for the first n partitions (after
    # that kops' round shift differs on purpose, and leaders are chosen differently)
    brokers = uniform(shape, per_rack)
    n = len(brokers)
    for rf in range(1, min(4, n) + 1):
        theirs = cloudera_assign(brokers, n, rf)
        ours = assign_replicas_multilevel(brokers, n, rf, 0)
        assert all(set(theirs[p]) == set(ours[p]) for p in range(n)), rf


# -- determinism, start index, pairing diversity --------------------------------------------------
def test_deterministic_and_start_index_rotates():
    brokers = uniform((2, 3), 2)
    a = assign_replicas_multilevel(brokers, 30, 3, 4)
    assert a == assign_replicas_multilevel(list(reversed(brokers)), 30, 3, 4)
    assert a != assign_replicas_multilevel(brokers, 30, 3, 5)
    first_leaders = {assign_replicas_multilevel(brokers, 1, 3, s)[0][0] for s in range(12)}
    assert len(first_leaders) > 1


def test_followers_are_not_always_the_same_pairs():
    # 2 DCs x 2 racks x 1 broker, RF 2: without a shift broker 0 would always pair with broker 2
    brokers = [(0, "/dc1/r1"), (1, "/dc1/r2"), (2, "/dc2/r1"), (3, "/dc2/r2")]
    got = assign_replicas_multilevel(brokers, 16, 2, 0)
    pairs = Counter(frozenset(r) for r in got.values())
    assert len(pairs) == 4
    assert max(pairs.values()) - min(pairs.values()) <= 1


def test_first_follower_in_another_top_domain():
    brokers = uniform((3, 2), 1)
    got = assign_replicas_multilevel(brokers, 12, 3, 0)
    rack = dict(brokers)
    for reps in got.values():
        assert rack[reps[0]].split("/")[1] != rack[reps[1]].split("/")[1]


def test_partition_ids_start_at_start_partition():
    got = assign_replicas_multilevel(uniform((2,), 2), 3, 2, 0, 7)
    assert sorted(got) == [7, 8, 9]


# -- validation -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("brokers", "rf", "parts", "needle"),
    [
        ([(0, "/dc1/r1"), (1, "/dc1")], 1, 1, "same depth"),
        ([(0, "/dc1/r1"), (1, "plain")], 1, 1, "must all be paths"),
        ([(0, "/dc1/r1"), (1, None)], 1, 1, "Not all brokers have rack information"),
        ([(0, "/dc1//r1"), (1, "/dc1/r2")], 1, 1, "malformed"),
        ([(0, "/a/b"), (1, "/a/c")], 3, 1, "Replication factor: 3 larger than available brokers: 2."),
        ([(0, "/a/b"), (1, "/a/c")], 0, 1, "Replication factor must be larger than 0."),
        ([(0, "/a/b"), (1, "/a/c")], 1, 0, "Number of partitions must be larger than 0."),
        ([(0, "/a/b"), (0, "/a/c")], 1, 1, "listed twice"),
    ],
)
def test_bad_input(brokers, rf, parts, needle):
    with pytest.raises(BadInput) as info:
        assign_replicas_multilevel(brokers, parts, rf, 0)
    assert needle in info.value.message + " ".join(info.value.details)
