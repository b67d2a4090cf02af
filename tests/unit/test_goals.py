"""Goals measured before / after a plan against their bounds (issue 21 item 3's report; pure)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kops.model import Broker, Capacity, Partition, Topic, Topology
from kops.placement import goals as G
from kops.placement.balancer import Goal, plan

MB = 1 << 20


def cluster(sizes=True, rates=True, caps=True, racks="abc") -> Topology:
    cap = Capacity(disk_bytes=1000 * MB, nw_in_bytes_per_s=100 * MB, nw_out_bytes_per_s=100 * MB) if caps else None
    brokers = tuple(Broker(b, racks[b % len(racks)], capacity=cap) for b in range(6))
    parts = tuple(Partition("hot", i, (i % 6, (i + 1) % 6, (i + 2) % 6), size_bytes=200 * MB if sizes else None,
                            bytes_in_per_s=20 * MB if rates else None) for i in range(6))
    cold = tuple(Partition("cold", i, ((i + 3) % 6, (i + 4) % 6), size_bytes=10 * MB if sizes else None,
                           bytes_in_per_s=1 * MB if rates else None) for i in range(3))
    return Topology(brokers=brokers, topics=(Topic("hot", parts), Topic("cold", cold)))


def test_disk_capacity_counts_what_a_move_holds_twice():
    topo = cluster()
    before = topo.assignment()
    after = dict(before)
    after[("hot", 0)] = (3, 1, 2)  # broker 0's replica to broker 3
    g = G.evaluate(topo, before, after, threshold=0.8)
    d = g["disk-capacity"]
    # the fullest broker before: 4 (3 hot replicas, 600 MiB, + 2 cold, 20) = 62 %; broker 3 holds
    # 610 MiB and takes hot-0: 81 % after, the same at the peak of the move
    assert d["before"] == 62.0 and d["after"] == 81.0 and d["peak"] == 81.0 and d["status"] == "not met"
    assert d["blockers"] == ["broker 3: 81.0 % after, 81.0 % at the peak of the move"] and d["hard"]
    assert d["bound"] == round(100 * (18 * 200 + 6 * 10) / 6000, 1)  # the mean use: no placement does better
    # under a higher threshold the same plan is fine
    assert G.evaluate(topo, before, after, threshold=0.9)["disk-capacity"]["status"] == "met"


def test_network_goals_leaders_send_to_followers_and_consumers():
    topo = cluster()
    before = topo.assignment()
    g = G.evaluate(topo, before, before, fanout=1.0)
    # in: every replica takes its partition's bytes-in; broker 4: hot 2,3,4 (60) + cold 0,1 (2) MiB/s
    assert g["nw-in-capacity"]["after"] == 62.0 and g["nw-in-capacity"]["status"] == "met"
    # out: broker 3 leads hot-3 (20 x (2 followers + 1 consumer)) and cold-0 (1 x (1 + 1)) = 62 MiB/s
    assert g["nw-out-capacity"]["after"] == 62.0
    assert G.evaluate(topo, before, before, fanout=3.0)["nw-out-capacity"]["status"] == "not met"


def test_goals_without_their_data_are_unknown_never_met():
    topo = cluster(sizes=False, rates=False, caps=False)
    g = G.evaluate(topo, topo.assignment(), topo.assignment())
    for goal in ("disk-capacity", "nw-in-capacity", "nw-out-capacity", "disk-usage", "nw-in-usage", "leader-bytes-in"):
        assert g[goal]["status"] == "unknown" and g[goal]["needs"], goal
    assert [k for k in g] == list(G.GOALS)
    assert g["rack"]["status"] == "met" and g["replicas"]["after"] == 2  # cold's replicas: 2 on brokers 4, 5


def test_topic_spread_names_the_topics_stacked_on_a_few_brokers():
    brokers = tuple(Broker(b, None) for b in range(4))
    stacked = Topic("t", tuple(Partition("t", i, (0, 1)) for i in range(4)))
    even = Topic("u", tuple(Partition("u", i, (i % 4, (i + 1) % 4)) for i in range(4)))
    topo = Topology(brokers=brokers, topics=(stacked, even))
    g = G.evaluate(topo, topo.assignment(), topo.assignment())["topic-spread"]
    assert g["after"] == 1 and g["blockers"] == ["t"] and g["bound"] == 0 and g["status"] == "not met"
    res = plan(topo, Goal("rebalance"))
    assert res.report["goals"]["topic-spread"]["before"] == 1
    # racks of different sizes: the bound is not computed, the figure only reported
    uneven = Topology(brokers=(Broker(0, "a"), Broker(1, "a"), Broker(2, "b")), topics=(stacked,))
    assert G.evaluate(uneven, uneven.assignment(), uneven.assignment())["topic-spread"]["bound"] is None


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**16))
def test_the_planners_figures_agree_with_the_goals_own(seed):
    """The planner hands the goals it measured already (rack, replicas, leaders, first followers;
    bytes per broker, where the sizes are integers); they must be what the goals module measures
    itself."""
    import random

    rnd = random.Random(seed)
    n = rnd.randint(3, 8)
    # (odd seeds: sizes, up to 2**52 bytes a partition, and disks)
    sized = seed % 2
    brokers = tuple(Broker(b, rnd.choice(["a", "b", "c"]), capacity=Capacity(disk_bytes=2**60) if sized else None)
                    for b in range(n))
    parts = tuple(Partition("t", i, tuple(rnd.sample(range(n), rnd.randint(1, 3))),
                            size_bytes=rnd.randint(0, 2**rnd.choice([10, 40, 52])) if sized else None)
                  for i in range(rnd.randint(1, 20)))
    topo = Topology(brokers=brokers, topics=(Topic("t", parts),))
    res = plan(topo, Goal("rebalance"))
    before = topo.assignment()
    mine = G.evaluate(topo, before, {**before, **res.target}, brokers=topo.alive_broker_ids)
    for goal in ("replicas", "leaders", "first-followers", "topic-spread", "disk-usage", "disk-capacity"):
        got = {k: v for k, v in res.report["goals"][goal].items() if k not in ("why", "forced_by")}
        assert got == mine[goal], goal
    assert res.report["goals"]["rack"]["after"] == mine["rack"]["after"] == 0


def _sized(caps: dict[int, int], parts: list[tuple[int, ...]], size: int = 100 * MB) -> Topology:
    brokers = tuple(Broker(b, None, capacity=Capacity(disk_bytes=c) if c else None) for b, c in caps.items())
    return Topology(brokers=brokers, topics=(Topic("t", tuple(Partition("t", i, r, size_bytes=size)
                                                              for i, r in enumerate(parts))),))


def test_balancing_by_bytes_never_takes_a_small_disk_past_the_threshold():
    # brokers 0-2 hold 10 partitions x 100 MiB each (RF 1); broker 3 is new and small: 500 MiB
    parts = [(i % 3,) for i in range(30)]
    # (balanced by replica count: the disk-usage goal would give broker 3 its capacity's share)
    topo = _sized({0: 10_000 * MB, 1: 10_000 * MB, 2: 10_000 * MB, 3: 500 * MB}, parts)
    res = plan(topo, Goal("rebalance"), goals="replicas")
    on3 = sum(1 for r in res.target.values() if 3 in r)
    assert on3 == 4  # 400 MiB <= 80 % of 500 MiB; the count balance alone puts 7 there
    assert res.report["goals"]["disk-capacity"]["status"] == "met"
    roomy = plan(topo, Goal("rebalance"), disk_threshold=1.0, goals="replicas")
    assert sum(1 for r in roomy.target.values() if 3 in r) == 5
    unlimited = plan(_sized({0: 0, 1: 0, 2: 0, 3: 0}, parts), Goal("rebalance"))
    assert sum(1 for r in unlimited.target.values() if 3 in r) >= 6


def test_disk_use_is_balanced_as_a_share_of_each_brokers_capacity():
    # 20 x 100 MiB on broker 0; brokers 0, 1 have 1000 MiB, broker 2 has 2000 MiB: 5, 5, 10
    parts = [(0,)] * 20
    topo = _sized({0: 1000 * MB, 1: 1000 * MB, 2: 2000 * MB}, parts, size=100 * MB)
    # by default replica counts come first (within one of the mean), then disk use within them
    default = plan(topo, Goal("rebalance"))
    per = {b: sum(1 for r in default.target.values() if b in r) for b in (0, 1, 2)}
    assert per == {0: 7, 1: 6, 2: 7}, per
    du = default.report["goals"]["disk-usage"]
    assert du["verdict"] == "better" and du["after"] < du["before"], du
    # disk use first: each broker is given its capacity's share
    res = plan(topo, Goal("rebalance"), goals="disk-usage,leaders,first-followers")
    per = {b: sum(1 for r in res.target.values() if b in r) for b in (0, 1, 2)}
    assert per == {0: 5, 1: 5, 2: 10}, per
    du = res.report["goals"]["disk-usage"]
    assert du["after"] == 0.0 and du["before"] == 200.0, du
    assert res.report["goals_optimised"]["capacity_shares"] is True
    assert res.report["lower_bound"]["bytes_to_reach_mean"] == 15 * 100 * MB
    # by count the same cluster splits evenly instead (7, 7, 6: the disk goal left out)
    by_count = plan(topo, Goal("rebalance"), goals="replicas,leaders")
    assert sorted(sum(1 for r in by_count.target.values() if b in r) for b in (0, 1, 2)) == [6, 7, 7]


def test_a_forced_move_that_fits_nowhere_is_made_and_named():
    # decommission broker 0: its 5 x 100 MiB must go to 1 or 2, each with 300 MiB of 500 MiB used
    parts = [(0,)] * 5 + [(1,)] * 3 + [(2,)] * 3
    topo = _sized({0: 1000 * MB, 1: 500 * MB, 2: 500 * MB}, parts)
    res = plan(topo, Goal("decommission", brokers=(0,)))
    assert all(0 not in r for r in res.target.values())
    d = res.report["goals"]["disk-capacity"]
    assert d["status"] == "not met" and any("broker 1" in x or "broker 2" in x for x in d["blockers"]), d


def test_a_live_reads_disk_use_counts_everything_on_the_volume():
    """With log dirs that report their volumes, use now is total - usable (other files too)."""
    from kops.model import LogDir

    dirs = (LogDir("/d", total_bytes=1000 * MB, usable_bytes=300 * MB),)  # 700 MiB used, 100 by kops' replicas
    brokers = (Broker(0, None), Broker(1, None, log_dirs=dirs))
    topo = Topology(brokers=brokers, topics=(Topic("t", tuple(Partition("t", i, (0,), size_bytes=100 * MB)
                                                              for i in range(6))),))
    topo = topo.with_assignment({("t", 5): (1,)})
    res = plan(topo, Goal("rebalance"))
    # broker 1 may take one more (800 MiB = 80 %), not the two a count balance would give it
    assert sum(1 for r in res.target.values() if 1 in r) == 2
    assert res.report["goals"]["disk-capacity"]["after"] == 80.0


def test_unknown_disk_capacity_names_the_kafka_release_that_reports_it():
    """Kafka reports a log dir's total bytes from 3.3 (KIP-827): the report says so, with what the
    brokers run, so that an operator on 3.2 knows the capacity file is the way."""
    from dataclasses import replace

    topo = cluster(caps=False)
    old = replace(topo, brokers=tuple(replace(b, kafka_version="3.2") for b in topo.brokers))
    d = G.evaluate(old, old.assignment(), old.assignment())["disk-capacity"]
    assert d["status"] == "unknown"
    assert "Kafka 3.3 or later, KIP-827; these brokers run Kafka 3.2" in d["needs"]
    assert "--capacity-file" in d["needs"]
    unread = G.evaluate(topo, topo.assignment(), topo.assignment())["disk-capacity"]["needs"]
    assert "Kafka 3.3 or later" in unread and "these brokers run" not in unread


def test_brokers_sharing_one_volume_get_no_limit_from_it():
    """A local sandbox: six brokers on one host and one disk that is 90 % used by other things;
    the measured disk is nobody's alone, so it limits nothing (a capacity file still would)."""
    from kops.model import LogDir

    disk = (LogDir("/data", total_bytes=1000 * MB, usable_bytes=100 * MB),)
    brokers = tuple(Broker(b, None, host="127.0.0.1", log_dirs=disk) for b in range(3))
    topo = Topology(brokers=brokers, topics=(Topic("t", tuple(Partition("t", i, (0,), size_bytes=MB)
                                                              for i in range(6))),))
    res = plan(topo, Goal("rebalance"))
    assert sorted(sum(1 for r in res.target.values() if b in r) for b in range(3)) == [2, 2, 2]
    d = res.report["goals"]["disk-capacity"]
    assert d["status"] == "unknown" and "sharing one volume" in d["needs"]
    # its own host each (a real cluster): the same disks are 90 % full, nothing may move there
    apart = Topology(brokers=tuple(Broker(b, None, host=f"k{b}", log_dirs=disk) for b in range(3)),
                     topics=topo.topics)
    assert plan(apart, Goal("rebalance")).changes == {}
