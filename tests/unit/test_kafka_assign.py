"""Kafka-exact assignment: seed worked examples, Kafka's own unit-test expectations, properties."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kops.errors import BadInput
from kops.placement.kafka_assign import (
    INT_MAX,
    JavaRandom,
    KafkaAssignmentError,
    assign_replicas_to_brokers,
    assign_topics,
    literal_assign_replicas_to_brokers,
    rack_alternated_broker_list,
)

KIP36_RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


class Draws(random.Random):
    """An rng returning given draws (Kafka draws startIndex, then nextReplicaShift)."""

    def __init__(self, *draws: int):
        super().__init__(0)
        self.draws = list(draws)
        self.bounds: list[int] = []

    def randrange(self, n, stop=None, step=1):  # type: ignore[override]
        self.bounds.append(n)
        return self.draws.pop(0)


def unaware(n: int) -> list[tuple[int, str | None]]:
    return [(i, None) for i in range(n)]


# -- seed 000: rack-unaware, topic-test2 ------------------------------------------------------------
TOPIC_TEST2 = {0: [2, 0, 1], 1: [0, 1, 2], 2: [1, 2, 0], 3: [2, 1, 0], 4: [0, 2, 1], 5: [1, 0, 2]}


def test_seed000_topic_test2_with_its_random_draws():
    # seed 000 infers startIndex = 2 and a follower shift of 2 ("nextReplicaShift + 1" with 1)
    assert assign_replicas_to_brokers(unaware(3), 6, 3, rng=Draws(2, 2)) == TOPIC_TEST2
    # a shift of 0 is the same modulo (n - 1) = 2
    assert assign_replicas_to_brokers(unaware(3), 6, 3, rng=Draws(2, 0)) == TOPIC_TEST2
    # and with a fixed start index of 2 (both draws fixed to 2)
    assert assign_replicas_to_brokers(unaware(3), 6, 3, fixed_start_index=2) == TOPIC_TEST2


def test_seed000_partition_0_walkthrough_and_odd_broker_ids():
    # "if the brokerArray is [2,5,8] ... the replica allocation of partition 0 is [8,2,5]"
    got = assign_replicas_to_brokers([(2, None), (5, None), (8, None)], 1, 3, rng=Draws(2, 2))
    assert got == {0: [8, 2, 5]}


def test_random_draws_are_two_independent_draws_over_the_broker_count():
    rng = Draws(4, 1)
    assign_replicas_to_brokers(unaware(7), 3, 2, rng=rng)
    assert rng.bounds == [7, 7]
    rng = Draws(0, 0)
    assign_replicas_to_brokers(list(KIP36_RACKS.items()), 3, 2, rng=rng)
    assert rng.bounds == [6, 6]
    rng = Draws()
    assign_replicas_to_brokers(unaware(7), 3, 2, fixed_start_index=3, rng=rng)
    assert rng.bounds == []  # a fixed start index draws nothing


def test_java_random_reproduces_kafka_seeded_run():
    # AdminUtils.RAND.setSeed(42) then 6 partitions RF 3 on 3 brokers gives topic-test2 in Kafka 3.9.1
    assert assign_replicas_to_brokers(unaware(3), 6, 3, rng=JavaRandom(42)) == TOPIC_TEST2
    r = JavaRandom(42)
    assert [r.next_int(10) for _ in range(5)] == [0, 3, 8, 4, 0]  # java.util.Random(42).nextInt(10)


# -- Kafka's own unit tests (AdminRackAwareTest) -----------------------------------------------------
def test_kafka_testReplicaAssignment_rack_unaware_5_brokers():
    expected = {
        0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
        5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2],
    }  # fmt: skip
    assert assign_replicas_to_brokers(unaware(5), 10, 3, 0, -1) == expected


def test_rack_unaware_6_brokers_computed_example():
    got = assign_replicas_to_brokers(unaware(6), 12, 3, 0, 0)
    for i in range(6):
        assert got[i] == [i, (i + 1) % 6, (i + 2) % 6]
    assert [got[p] for p in range(6, 12)] == [[0, 2, 3], [1, 3, 4], [2, 4, 5], [3, 5, 0], [4, 0, 1], [5, 1, 2]]


def test_kafka_rack_alternated_lists():
    assert rack_alternated_broker_list(KIP36_RACKS) == [0, 3, 1, 5, 4, 2]
    without5 = {b: r for b, r in KIP36_RACKS.items() if b != 5}
    assert rack_alternated_broker_list(without5) == [0, 3, 1, 4, 2]
    nine = {b: f"rack{b // 3 + 1}" for b in range(9)}
    assert rack_alternated_broker_list(nine) == [0, 3, 6, 1, 4, 7, 2, 5, 8]
    # KIP-36 wiki: 0,1 -> rack1, 2,3 -> rack2, 4,5 -> rack3 "could be (0, 2, 4, 1, 3, 5)"
    assert rack_alternated_broker_list({0: "rack1", 1: "rack1", 2: "rack2", 3: "rack2", 4: "rack3", 5: "rack3"}) == [
        0, 2, 4, 1, 3, 5,
    ]  # fmt: skip


def test_java_string_order_of_racks():
    # Java sorts strings by UTF-16 code units: U+FF21 sorts after a surrogate pair (U+1F600)
    racks = {0: "\uff21", 1: "\U0001f600", 2: "\uff21", 3: "\U0001f600"}
    assert rack_alternated_broker_list(racks) == [1, 0, 3, 2]


# -- seeds 001 / 004 (KIP-36) ------------------------------------------------------------------------
KIP36_EXPECTED = {
    0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0], 5: [2, 0, 3],
    6: [0, 4, 2], 7: [3, 2, 0], 8: [1, 0, 3], 9: [5, 3, 1], 10: [4, 1, 5], 11: [2, 5, 4],
}  # fmt: skip


def test_seed001_kip36_partitions_0_to_11():
    assert assign_replicas_to_brokers(list(KIP36_RACKS.items()), 12, 3, 0, 0) == KIP36_EXPECTED


def test_kafka_testGetRackAlternatedBrokerListAndAssignReplicasToBrokers():
    got = assign_replicas_to_brokers(list(KIP36_RACKS.items()), 7, 3, 0, 0)
    assert got == {p: KIP36_EXPECTED[p] for p in range(7)}


def test_rack_aware_ignores_the_callers_broker_order():
    brokers = list(KIP36_RACKS.items())
    random.Random(3).shuffle(brokers)
    assert assign_replicas_to_brokers(brokers, 12, 3, 0, 0) == KIP36_EXPECTED


def test_seed001_uneven_racks():
    got = assign_replicas_to_brokers([(0, "rack1"), (1, "rack2"), (2, "rack2")], 3, 2, 0, 0)
    assert got == {0: [0, 1], 1: [1, 0], 2: [2, 0]}
    replicas = Counter(b for r in got.values() for b in r)
    assert replicas == {0: 3, 1: 2, 2: 1}  # "Broker 0 is penalized"
    assert Counter(r[0] for r in got.values()) == {0: 1, 1: 1, 2: 1}


def test_start_partition_id_continues_the_shift():
    # expansion: partitions 6..11 computed alone equal the tail of 0..11 (shift bump at pid 6)
    tail = assign_replicas_to_brokers(list(KIP36_RACKS.items()), 6, 3, 0, 6)
    assert tail == {p: KIP36_EXPECTED[p] for p in range(6, 12)}
    # starting in the middle of a round does not bump the shift until the next multiple of n
    mid = assign_replicas_to_brokers(list(KIP36_RACKS.items()), 4, 3, 0, 4)
    assert mid == {p: KIP36_EXPECTED[p] for p in range(4, 8)}


def check_distribution(assignment, racks, n_brokers, n_partitions, rf, *, rack=True, leaders=True, replicas=True):
    """Kafka's RackAwareTest.checkReplicaDistribution."""
    for reps in assignment.values():
        assert len(set(reps)) == len(reps)
    if rack:
        for reps in assignment.values():
            assert len({racks[b] for b in reps}) == rf
    if leaders:
        lc = Counter(r[0] for r in assignment.values())
        assert sorted(lc.values()) == [n_partitions // n_brokers] * n_brokers
    if replicas:
        rc = Counter(b for r in assignment.values() for b in r)
        assert sorted(rc.values()) == [n_partitions * rf // n_brokers] * n_brokers


SIX = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}


@pytest.mark.parametrize("draws", [(s, t) for s in range(6) for t in range(6)])
def test_kafka_AdminRackAwareTest_properties_for_every_draw(draws):
    b = list(SIX.items())
    check_distribution(assign_replicas_to_brokers(b, 6, 3, rng=Draws(*draws)), SIX, 6, 6, 3)  # testAssignmentWithRackAware
    check_distribution(assign_replicas_to_brokers(b, 12, 2, rng=Draws(*draws)), SIX, 6, 12, 2)  # With2ReplicasRackAware
    check_distribution(assign_replicas_to_brokers(b, 6, 2, rng=Draws(*draws)), SIX, 6, 6, 2)  # ...With6Partitions
    uneven = {0: "rack1", 1: "rack1", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}
    got = assign_replicas_to_brokers(list(uneven.items()), 12, 3, rng=Draws(*draws))
    check_distribution(got, uneven, 6, 12, 3, replicas=False)  # WithUnevenRacks
    expansion = {6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack3", 11: "rack1"}
    got = assign_replicas_to_brokers(list(expansion.items()), 12, 2, -1, 12, rng=Draws(*draws))
    assert sorted(got) == list(range(12, 24))
    check_distribution(got, expansion, 6, 12, 2)  # testRackAwareExpansion


def test_kafka_other_rack_aware_tests():
    check_distribution(assign_replicas_to_brokers(list(SIX.items()), 6, 3, 2, 0), SIX, 6, 6, 3)
    got = assign_replicas_to_brokers(list(SIX.items()), 13, 3, 0, 0)  # WithUnevenReplicas
    check_distribution(got, SIX, 6, 13, 3, leaders=False, replicas=False)
    three = {0: "rack1", 1: "rack2", 4: "rack3"}
    for s in range(3):
        for t in range(3):
            check_distribution(assign_replicas_to_brokers(list(three.items()), 3, 2, rng=Draws(s, t)), three, 3, 3, 2)
    large = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1",
             6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack1", 11: "rack3"}  # fmt: skip
    for s in range(12):
        for t in range(0, 12, 5):
            check_distribution(assign_replicas_to_brokers(list(large.items()), 96, 3, rng=Draws(s, t)), large, 12, 96, 3)
    more = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    got = assign_replicas_to_brokers(list(more.items()), 6, 5, rng=random.Random(1))  # testMoreReplicasThanRacks
    assert all(len(r) == 5 and len({more[b] for b in r}) == 3 for r in got.values())
    got = assign_replicas_to_brokers(list(more.items()), 6, 2, rng=random.Random(1))  # testLessReplicasThanRacks
    assert all(len({more[b] for b in r}) == 2 for r in got.values())
    single = {b: "rack1" for b in range(6)}
    got = assign_replicas_to_brokers(list(single.items()), 6, 3, rng=random.Random(2))  # testSingleRack
    assert all(len({single[b] for b in r}) == 1 for r in got.values())
    assert Counter(r[0] for r in got.values()) == {b: 1 for b in range(6)}
    skip = {0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}  # testSkipBrokerWithReplicaAlreadyAssigned
    got = assign_replicas_to_brokers(list(skip.items()), 6, 4, 2, -1)
    check_distribution(got, skip, 5, 6, 4, rack=False, leaders=False, replicas=False)


# -- errors, with Kafka's wording ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("brokers", "parts", "rf", "exc", "msg"),
    [
        (unaware(5), 0, 0, "InvalidPartitionsException", "Number of partitions must be larger than 0."),
        (unaware(5), -3, 2, "InvalidPartitionsException", "Number of partitions must be larger than 0."),
        (unaware(5), 10, 0, "InvalidReplicationFactorException", "Replication factor must be larger than 0."),
        (unaware(5), 10, 6, "InvalidReplicationFactorException", "Replication factor: 6 larger than available brokers: 5."),
        ([(0, "rack1"), (1, "rack3"), (2, "rack3"), (3, "rack2"), (4, None)], 10, 5, "AdminOperationException",
         "Not all brokers have rack information for replica rack aware assignment."),
        ([], 1, 1, "InvalidReplicationFactorException", "Replication factor: 1 larger than available brokers: 0."),
    ],
)  # fmt: skip
def test_errors_like_kafka(brokers, parts, rf, exc, msg):
    with pytest.raises(KafkaAssignmentError) as info:
        assign_replicas_to_brokers(brokers, parts, rf, -1, -1)
    assert isinstance(info.value, BadInput)
    assert info.value.kafka_exception == exc
    assert info.value.message == msg


def test_partial_racks_names_the_brokers_and_disable_rack_aware_works():
    brokers = [(0, "a"), (1, None), (2, "b"), (3, None)]
    with pytest.raises(BadInput) as info:
        assign_replicas_to_brokers(brokers, 4, 2, 0)
    assert any("[1, 3]" in d for d in info.value.details)
    got = assign_replicas_to_brokers(brokers, 4, 2, 0, rack_aware=False)
    assert got == assign_replicas_to_brokers([(b, None) for b, _ in brokers], 4, 2, 0)


def test_rack_unaware_keeps_the_callers_order():
    got = assign_replicas_to_brokers([(5, None), (1, None), (3, None)], 3, 1, 0)
    assert got == {0: [5], 1: [1], 2: [3]}


def test_overflowing_start_index_follows_java_int_arithmetic():
    # pid + startIndex overflows a Java int: Kafka indexes its list with a negative number and fails
    with pytest.raises(KafkaAssignmentError) as info:
        assign_replicas_to_brokers(unaware(4), 3, 2, INT_MAX, 0)
    assert info.value.kafka_exception == "IndexOutOfBoundsException"
    # partition 0 alone does not overflow
    assert assign_replicas_to_brokers(unaware(4), 1, 2, INT_MAX, 0) == {0: [3, 1]}  # (INT_MAX % 4, 1 + INT_MAX % 3)
    with pytest.raises(KafkaAssignmentError):
        assign_replicas_to_brokers(unaware(4), 1, 2, INT_MAX + 1, 0)


# -- properties ---------------------------------------------------------------------------------
@st.composite
def topologies(draw, max_brokers=40):
    n = draw(st.integers(1, max_brokers))
    ids = draw(st.lists(st.integers(0, 500), min_size=n, max_size=n, unique=True))
    n_racks = draw(st.integers(0, 8))
    if n_racks == 0:
        racks = [None] * n
    else:
        racks = [f"r{draw(st.integers(0, n_racks - 1))}" for _ in range(n)]
    return list(zip(ids, racks))


@settings(max_examples=300, deadline=None)
@given(
    topologies(),
    st.integers(1, 120),
    st.integers(1, 5),
    st.integers(-1, 200),
    st.integers(-1, 300),
    st.integers(0, 2**32),
)
def test_fast_path_equals_literal_java_semantics(brokers, parts, rf, fixed, sp, seed):
    rf = min(rf, len(brokers))
    a = assign_replicas_to_brokers(brokers, parts, rf, fixed, sp, rng=JavaRandom(seed))
    b = literal_assign_replicas_to_brokers(brokers, parts, rf, fixed, sp, rng=JavaRandom(seed))
    assert a == b


@settings(max_examples=200, deadline=None)
@given(topologies(), st.integers(1, 120), st.integers(1, 5), st.integers(-1, 100), st.integers(-1, 100))
def test_rack_aware_spans_min_rf_racks(brokers, parts, rf, fixed, sp):
    rf = min(rf, len(brokers))
    got = assign_replicas_to_brokers(brokers, parts, rf, fixed, sp, rng=random.Random(0))
    rack = dict(brokers)
    n_racks = len({r for r in rack.values()})
    first = max(0, sp)
    assert sorted(got) == list(range(first, first + parts))
    for reps in got.values():
        assert len(reps) == rf and len(set(reps)) == rf
        if rack[reps[0]] is not None:
            assert len({rack[b] for b in reps}) == min(rf, n_racks)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 6),  # racks
    st.integers(1, 6),  # brokers per rack
    st.integers(1, 4),  # rounds
    st.integers(1, 5),
    st.integers(-1, 50),
)
def test_even_racks_give_even_leaders_and_replicas(n_racks, per_rack, rounds, rf, fixed):
    """KIP-36: partitions = k x brokers and equal racks -> equal leader counts; when RF = #racks
    (or RF <= #racks... see below) equal replica counts as well."""
    n = n_racks * per_rack
    rf = min(rf, n_racks)  # the guarantees hold for RF <= #racks
    brokers = [(b, f"rack{b % n_racks}") for b in range(n)]
    got = assign_replicas_to_brokers(brokers, rounds * n, rf, fixed, rng=random.Random(fixed))
    leaders = Counter(r[0] for r in got.values())
    assert sorted(leaders.values()) == [rounds] * n
    replicas = Counter(b for r in got.values() for b in r)
    if rf == n_racks:
        assert sorted(replicas.values()) == [rounds * rf] * n


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 40), st.integers(1, 4), st.integers(1, 5), st.integers(-1, 50))
def test_rack_unaware_even_leaders_and_replicas(n, rounds, rf, fixed):
    rf = min(rf, n)
    got = assign_replicas_to_brokers(unaware(n), rounds * n, rf, fixed, rng=random.Random(n))
    assert sorted(Counter(r[0] for r in got.values()).values()) == [rounds] * n
    assert sorted(Counter(b for r in got.values() for b in r).values()) == [rounds * rf] * n
    assert all(len(set(r)) == rf for r in got.values())


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**16), st.booleans())
def test_assign_topics_is_a_call_per_topic(seed, rack_aware):
    """Kafka's --generate over many topics: the broker list read once, the results, the draws
    and the first error those of :func:`assign_replicas_to_brokers` called topic by topic."""
    rnd = random.Random(seed)
    n = rnd.randint(1, 12)
    racks = [f"r{rnd.randrange(4)}" for _ in range(n)]
    if rnd.random() < 0.2:
        racks[rnd.randrange(n)] = None  # (rack-aware: Kafka refuses)
    brokers = [(b, r) for b, r in zip(rnd.sample(range(100), n), racks)]
    if rnd.random() < 0.1:
        brokers.append((2**40, "r0"))  # (not a Java int)
    topics = [(rnd.randint(1, 30), rnd.randint(1, n + 1)) for _ in range(rnd.randint(1, 6))]

    def one_by_one():
        rng = random.Random(seed)
        for k, rf in topics:
            yield assign_replicas_to_brokers(brokers, k, rf, rack_aware=rack_aware, rng=rng)

    def outcome(results):
        got = []
        try:
            for res in results:
                got.append(res)
        except KafkaAssignmentError as e:
            got.append((str(e), e.kafka_exception, e.details))
        return got

    together = assign_topics(brokers, topics, rack_aware=rack_aware, rng=random.Random(seed))
    assert outcome(together) == outcome(one_by_one())
