"""The replica counts rack safety allows (kops.placement.feasible), against brute force over
every rack-safe replica list of small clusters (rack_violation, the one definition)."""

from __future__ import annotations

from collections import Counter
from itertools import combinations, product

from hypothesis import given, settings
from hypothesis import strategies as st

from kops.placement.feasible import count_band, leaf_bounds
from kops.placement.racks import RackTree, rack_violation


def _safe_lists(tree: RackTree, brokers: list[int], rf: int) -> list[tuple[int, ...]]:
    return [c for c in combinations(brokers, rf) if rack_violation(c, tree) is None]


@st.composite
def clusters(draw):
    """2-8 brokers in flat racks (a..d) or two-level racks (/dc1..2/r1..3), and an RF."""
    n = draw(st.integers(2, 8))
    if draw(st.booleans()):
        racks = {b: draw(st.sampled_from("abcd")) for b in range(n)}
    else:
        racks = {b: f"/dc{draw(st.integers(1, 2))}/r{draw(st.integers(1, 3))}" for b in range(n)}
    return racks, draw(st.integers(1, min(4, n)))


@settings(max_examples=150, deadline=None)
@given(clusters())
def test_leaf_bounds_are_the_least_and_most_any_rack_safe_list_puts_in_each_rack(case):
    racks, rf = case
    tree = RackTree.build(racks)
    leaf = tree.level_of[tree.depth - 1]
    seen: dict[tuple[str, ...], list[int]] = {}
    for r in _safe_lists(tree, sorted(racks), rf):
        used = Counter(leaf[b] for b in r)
        for rack in set(leaf.values()):
            seen.setdefault(rack, []).append(used.get(rack, 0))
    got = leaf_bounds(tree, rf)
    assert {rack: (min(v), max(v)) for rack, v in seen.items()} == {rack: got[rack] for rack in seen}


@settings(max_examples=60, deadline=None)
@given(clusters(), st.integers(1, 2))
def test_no_rack_safe_placement_has_a_smaller_spread_than_the_bound(case, partitions):
    racks, rf = case
    tree = RackTree.build(racks)
    brokers = sorted(racks)
    lists = _safe_lists(tree, brokers, rf)
    spreads = [max(counts) - min(counts) for pick in product(lists, repeat=partitions)
               for counts in [[sum(b in r for r in pick) for b in brokers]]]
    assert count_band(tree, brokers, {rf: partitions}).bound <= min(spreads)


def test_a_rack_of_one_broker_among_racks_of_two_holds_every_partition_and_is_named():
    tree = RackTree.build({0: "a", 1: "a", 2: "b", 3: "b", 4: "c"})
    band = count_band(tree, [0, 1, 2, 3, 4], {3: 40})
    assert band.share == {0: 20, 1: 20, 2: 20, 3: 20, 4: 40}
    assert band.bound == 20
    assert "rack c (1 broker) holds at least 40" in band.forcing
    assert "rack a (2 brokers) holds at most 40" in band.forcing


def test_even_racks_force_nothing():
    tree = RackTree.build({b: f"r{b % 3}" for b in range(6)})
    band = count_band(tree, list(range(6)), {3: 41})
    assert band.bound == 1 and band.forcing == ()
    assert count_band(tree, list(range(6)), {3: 40}).bound == 0


def test_two_level_racks_keep_a_small_data_centre_s_brokers_above_the_others():
    # dc1 has two brokers, dc2 four: every RF-4 partition puts two replicas in each data centre
    tree = RackTree.build({0: "/dc1/r1", 1: "/dc1/r2", 2: "/dc2/r1", 3: "/dc2/r2", 4: "/dc2/r3", 5: "/dc2/r4"})
    band = count_band(tree, list(range(6)), {4: 24})
    assert band.bound == 12
    assert band.forcing == ("rack /dc1/r1 (1 broker) holds at least 24", "rack /dc1/r2 (1 broker) holds at least 24")
