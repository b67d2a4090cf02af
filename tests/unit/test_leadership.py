"""Leader imbalance exactly as Kafka's ZooKeeper controller computes it, with worked examples,
and the demote/restore reorder planning (pure: no cluster)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kops.model import Broker, Partition, Topic, Topology
from kops.placement.leadership import (
    DemotionRecord,
    demoted_order,
    election_needed,
    leader_imbalance,
    plan_demote,
    plan_restore,
)

RACK = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}


def topo(parts, down=(), brokers=RACK):
    """parts: list of (topic, partition, replicas, leader, isr or None=all replicas)."""
    by_topic: dict[str, list[Partition]] = {}
    for t, p, reps, leader, isr in parts:
        by_topic.setdefault(t, []).append(
            Partition(t, p, tuple(reps), tuple(reps if isr is None else isr), leader))
    return Topology(
        brokers=tuple(Broker(b, r, alive=b not in down) for b, r in brokers.items()),
        topics=tuple(Topic(t, tuple(ps)) for t, ps in sorted(by_topic.items())),
    )


# ------------------------------------------------------------------------------------------
# Worked examples of the controller's arithmetic
# ------------------------------------------------------------------------------------------


def test_worked_example_from_the_research_notes():
    # broker 1 preferred for 10 partitions, 1 led by someone else -> 1/10 = 0.10, not > 0.10
    # broker 2 preferred for 1 partition led by broker 1 -> 1/1 = 1.0 > 0.10 -> elected
    parts = [("t", i, [1, 2], 1 if i else 2, None) for i in range(10)]
    parts.append(("u", 0, [2, 1], 1, None))
    rep = leader_imbalance(topo(parts), 10)
    b = {x.broker: x for x in rep.brokers}
    assert (b[1].preferred, b[1].not_preferred, b[1].ratio, b[1].over_threshold) == (10, 1, 0.1, False)
    assert (b[2].preferred, b[2].not_preferred, b[2].ratio, b[2].over_threshold) == (1, 1, 1.0, True)
    # only the over-threshold broker's partitions are elected; t-0 (broker 1's) is left alone
    assert rep.candidates() == [("u", 0)]
    assert not rep.balanced and rep.not_preferred_total == 2
    assert rep.unreachable() == []


def test_imbalance_after_the_confirmed_elections():
    """`leader rebalance` reports "after" from the leaders the controller confirmed
    (Topology.with_leaders), not from a second read."""
    parts = [("t", i, [1, 2], 1 if i else 2, None) for i in range(10)]
    parts.append(("u", 0, [2, 1], 1, None))
    t = topo(parts)
    after = leader_imbalance(t.with_leaders({("u", 0): 2}), 10)
    assert after.balanced and after.not_preferred_total == 1 and after.candidates() == []
    assert t.partition("u", 0).leader == 1 and t.with_leaders({}) is t  # the original is unchanged


def test_strictly_greater_and_float_semantics():
    # 1/10 is exactly the double 0.1 == 10/100: at the threshold, not over it
    parts = [("t", i, [1, 2], 2 if i == 0 else 1, None) for i in range(10)]
    assert leader_imbalance(topo(parts), 10).balanced
    # 2/10 = 0.2 > 0.1
    parts[1] = ("t", 1, [1, 2], 2, None)
    rep = leader_imbalance(topo(parts), 10)
    assert [b.broker for b in rep.over_threshold] == [1]
    assert rep.candidates() == [("t", 0), ("t", 1)]
    # threshold 20: 0.2 is not > 0.2; threshold 0: any non-preferred leader triggers
    assert leader_imbalance(topo(parts), 20).balanced
    one = [("t", i, [1, 2], 2 if i == 0 else 1, None) for i in range(1000)]
    rep0 = leader_imbalance(topo(one), 0)
    assert rep0.over_threshold and rep0.brokers[0].ratio == 1 / 1000
    # 3/30 = 0.1 exactly as a double too (Java and Python agree: IEEE doubles)
    p30 = [("t", i, [3, 4], 4 if i < 3 else 3, None) for i in range(30)]
    assert leader_imbalance(topo(p30), 10).balanced
    p7 = [("t", i, [3, 4], 4 if i < 1 else 3, None) for i in range(7)]  # 1/7 = 0.142.. > 0.1
    assert not leader_imbalance(topo(p7), 10).balanced


def test_offline_partition_counts_as_not_preferred_and_dead_preferred_is_blocked():
    # broker 3 is down: its 4 preferred partitions are led by 4 (2 of them) or offline (2)
    parts = [("t", i, [3, 4], 4, [4]) for i in range(2)] + [("t", i, [3], None, [3]) for i in range(2, 4)]
    parts += [("t", i, [4, 3], 4, [4]) for i in range(4, 8)]
    rep = leader_imbalance(topo(parts, down={3}), 10)
    b = {x.broker: x for x in rep.brokers}
    assert (b[3].preferred, b[3].not_preferred, b[3].ratio) == (4, 4, 1.0)
    assert b[3].alive is False and b[3].candidates == ()
    assert [x.reason for x in b[3].blocked] == ["preferred replica 3 is down"] * 4
    assert b[4].ratio == 0.0 and not b[4].over_threshold
    # balance cannot be reached: broker 3 stays at 100%
    assert [x.broker for x in rep.unreachable()] == [3]


def test_preferred_out_of_isr_is_blocked_but_others_elected():
    # broker 5 preferred for 10; 3 led by 6: two electable, one with 5 out of the ISR
    parts = [("t", i, [5, 6], 5, None) for i in range(7)]
    parts += [("t", 7, [5, 6], 6, None), ("t", 8, [5, 6], 6, None), ("t", 9, [5, 6], 6, [6])]
    rep = leader_imbalance(topo(parts), 10)
    b5 = next(b for b in rep.brokers if b.broker == 5)
    assert (b5.not_preferred, b5.ratio, b5.over_threshold) == (3, 0.3, True)
    assert b5.candidates == (("t", 7), ("t", 8))
    assert [(x.tp, x.reason) for x in b5.blocked] == [(("t", 9), "preferred replica 5 is not in the ISR [6]")]
    # after electing 7 and 8: 1/10 = 0.1, not > 0.1 -> balance reached despite the blocked one
    assert rep.unreachable() == []
    # with only one election allowed: 2/10 > 0.1 -> not reached (exit 3 in the CLI)
    assert [b.broker for b in rep.unreachable(rep.candidates(1))] == [5]
    # at threshold 5: 1/10 > 0.05 -> even after both elections, not reachable
    assert [b.broker for b in leader_imbalance(topo(parts), 5).unreachable()] == [5]
    # broker 5 is live: t-9 is asked for (the ISR read may lag the controller's), after the candidates
    assert [x.preferred_live for x in b5.blocked] == [True]
    assert rep.out_of_isr() == [("t", 9)] and rep.out_of_isr(0) == []
    # if the controller elects it after all, it counts: at threshold 5 balance is reached
    at5 = leader_imbalance(topo(parts), 5)
    assert at5.unreachable([("t", 7), ("t", 8), ("t", 9)]) == []
    # a down preferred replica is not asked for
    down = leader_imbalance(topo(parts, down={5}), 5)
    assert down.out_of_isr() == [] and not any(x.preferred_live for x in down.blocked)


class _Elections:
    """What the controller answers an ElectLeaders request with, per partition (unit test of the
    rebalance's bookkeeping; the real controller's answers are in tests/cluster/test_leader.py)."""

    def __init__(self, answers):
        self.answers, self.sent = answers, []

    def __call__(self, conn, etype, tps, **kw):
        from kops.ops.elections import ElectionResult, Outcome

        self.sent.append(list(tps))
        return ElectionResult(etype, [Outcome(t, p, *self.answers[(t, p)]) for t, p in tps], batches=1)


@pytest.mark.parametrize("controller_isr_is_ahead", [True, False])
def test_rebalance_asks_the_controller_for_preferred_out_of_isr_as_read(monkeypatch, controller_isr_is_ahead):
    import kops.ops.leader_rebalance as lr

    # broker 5 preferred for 10: t-7 electable, t-8 and t-9 with 5 live but out of the ISR as read
    parts = [("t", i, [5, 6], 5, None) for i in range(7)]
    parts += [("t", 7, [5, 6], 6, None), ("t", 8, [5, 6], 6, [6]), ("t", 9, [5, 6], 6, [6])]
    refused = ("failed", "PREFERRED_LEADER_NOT_AVAILABLE: the preferred replica is down or not in the ISR",
               "PREFERRED_LEADER_NOT_AVAILABLE")
    answers = {("t", 7): ("elected",), ("t", 8): ("elected",) if controller_isr_is_ahead else refused,
               ("t", 9): ("not_needed",) if controller_isr_is_ahead else refused}
    fake = _Elections(answers)
    monkeypatch.setattr(lr, "_read", lambda conn, reassignments=True: topo(parts))
    monkeypatch.setattr(lr, "run_elections", fake)
    res = lr._rebalance_locked(None, 10.0, False, None, 1000, 0.0, True, None)
    assert fake.sent == [[("t", 7), ("t", 8), ("t", 9)]]  # the candidates first, then the asked
    assert (res.planned, res.asked) == ([("t", 7)], [("t", 8), ("t", 9)])
    doc = res.to_dict()
    if controller_isr_is_ahead:
        assert (res.status, res.exit_code, res.unreachable, res.blocked) == ("elected", 0, [], [])
        assert res.summary().startswith("leader rebalance: elected 2 of 3 partitions on brokers 5")
        assert next(b for b in res.after.brokers if b.broker == 5).not_preferred == 0
    else:  # 2/10 > 0.1: not reached; both named blocked with kops' reason, not counted as failures
        assert (res.status, res.exit_code, res.unreachable, res.refused) == ("not_reached", 3, [5], 2)
        assert [x.tp for x in res.blocked] == [("t", 8), ("t", 9)]
        assert "failed" not in res.summary() and "2 partitions blocked, e.g. t-8: preferred replica 5 is " \
            "not in the ISR [6]" in res.summary()
        assert len(doc["elections"]["failed"]) == 2 and len(doc["blocked"]) == 2
    assert doc["asked_out_of_isr"] == 2
    assert _samples(lr.gauges(res, now=0))["kops_leader_rebalance_blocked_partitions", ()] == len(res.blocked)
    # a dry run says what it would ask for; a cap leaves room for the asked only after the candidates
    dry = lr._plan_only(topo(parts), 10.0, None)
    assert dry.asked == [("t", 8), ("t", 9)] and "and ask the controller for 2" in dry.summary()
    assert lr._plan_only(topo(parts), 10.0, 2).asked == [("t", 8)]


def test_brokers_preferred_for_nothing_are_absent_and_kraft_mode():
    parts = [("t", 0, [1, 2], 2, None), ("t", 1, [1, 2], 1, None), ("t", 2, [1, 2], 1, None),
             ("t", 3, [1, 2], 1, None), ("t", 4, [1, 2], 1, None), ("t", 5, [1, 2], 1, None),
             ("t", 6, [1, 2], 1, None), ("t", 7, [1, 2], 1, None), ("t", 8, [1, 2], 1, None),
             ("t", 9, [1, 2], 1, None), ("t", 10, [1, 2], 1, None)]
    rep = leader_imbalance(topo(parts), 10)
    assert [b.broker for b in rep.brokers] == [1]  # 2 prefers nothing: no group, as in Kafka
    assert rep.balanced  # 1/11 < 0.1
    kr = leader_imbalance(topo(parts), 10, mode="kraft")  # KRaft: every non-preferred leader
    assert kr.candidates() == [("t", 0)]


def test_candidates_round_robin_under_max_elections_and_deleting_topics():
    parts = [("a", i, [1, 3], 3, None) for i in range(4)] + [("b", i, [3, 1], 1, None) for i in range(2)]
    rep = leader_imbalance(topo(parts), 10)
    assert rep.candidates() == [("a", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2), ("a", 3)]
    assert rep.candidates(3) == [("a", 0), ("b", 0), ("a", 1)]
    assert rep.candidates(0) == []
    rep2 = leader_imbalance(topo(parts), 10, deleting_topics=["a"])
    assert rep2.candidates() == [("b", 0), ("b", 1)]


def test_election_needed():
    alive = {1, 2}
    assert not election_needed(Partition("t", 0, (1, 2), (1, 2), 1), "preferred", alive)
    assert election_needed(Partition("t", 0, (1, 2), (1, 2), 2), "preferred", alive)
    assert not election_needed(Partition("t", 0, (1, 2), (1, 2), 2), "unclean", alive)
    assert election_needed(Partition("t", 0, (3, 2), (3,), None), "unclean", alive)


# ------------------------------------------------------------------------------------------
# Demote / restore planning
# ------------------------------------------------------------------------------------------


def test_demoted_order():
    assert demoted_order([3, 5, 1], {3}, [3, 5, 1], [1, 3, 5]) == (5, 1, 3)
    # first follower out of the ISR -> next in-sync one leads
    assert demoted_order([3, 5, 1], {3}, [3, 1], [1, 3, 5]) == (1, 5, 3)
    assert demoted_order([3, 5, 1], {3}, [3, 1], [3, 5]) is None  # 1 is down, 5 not in sync
    assert demoted_order([3, 4], {3, 4}, [3, 4], [3, 4]) is None
    assert demoted_order([3, 5, 1], {3, 5}) == (1, 3, 5)


def test_plan_demote_rack_never_leaves_a_partition_without_in_sync_leader():
    parts = [
        ("t", 0, [3, 5, 1], 3, None),      # preferred+leader on rack b -> reorder to [5,1,3], elect
        ("t", 1, [1, 3, 5], 3, None),      # leader 3 but preferred 1 elsewhere -> elect only
        ("t", 2, [5, 4, 1], 5, None),      # 4 only a follower -> untouched
        ("t", 3, [4, 6, 2], 4, [4]),       # no other in-sync replica -> unmovable
        ("t", 4, [3], 3, None),            # RF 1 -> unmovable
        ("t", 5, [4, 2, 6], 2, None),      # preferred 4 but not leading -> reorder, no election
    ]
    mv = plan_demote(topo(parts), [3, 4])
    assert dict(mv.reorder) == {("t", 0): (5, 1, 3), ("t", 5): (2, 6, 4)}
    assert mv.elect == (("t", 0), ("t", 1))
    assert [(u.tp, u.reason) for u in mv.unmovable] == [
        (("t", 3), "no other live in-sync replica (not in the ISR [4]: [6, 2])"),
        (("t", 4), "replication factor 1: the only replica is on broker 3"),
    ]
    assert all(sorted(r) == sorted(mv.original[tp]) for tp, r in mv.reorder.items())  # sets unchanged
    plan = json.loads(mv.plan().to_json())
    assert plan["version"] == 1 and {(e["topic"], e["partition"]) for e in plan["partitions"]} == {("t", 0), ("t", 5)}


def test_demote_skips_reassigning_partitions():
    t = topo([("t", 0, [3, 5, 1], 3, None)])
    p = t.topics[0].partitions[0]
    from dataclasses import replace

    t2 = t.with_assignment({})
    t2 = Topology(brokers=t.brokers, topics=(Topic("t", (replace(p, adding_replicas=(1,)),)),))
    mv = plan_demote(t2, [3])
    assert not mv.reorder and mv.unmovable[0].reason.startswith("being reassigned")


def test_restore_round_trip_and_composition():
    before = topo([("t", 0, [3, 5, 1], 3, None), ("t", 1, [4, 3, 6], 4, None), ("t", 2, [1, 2, 5], 1, None)])
    mv = plan_demote(before, [3])
    assert dict(mv.reorder) == {("t", 0): (5, 1, 3)}
    records = {tp: DemotionRecord(mv.original[tp], r, frozenset({3})) for tp, r in mv.reorder.items()}
    # after the demotion (and elections) the cluster looks like this; then rack b (3,4) is demoted too
    mid = topo([("t", 0, [5, 1, 3], 5, None), ("t", 1, [4, 3, 6], 4, None), ("t", 2, [1, 2, 5], 1, None)])
    mv2 = plan_demote(mid, [3, 4], already_demoted={tp: (r.original, set(r.brokers)) for tp, r in records.items()})
    assert dict(mv2.reorder) == {("t", 1): (6, 4, 3)}
    records[("t", 1)] = DemotionRecord((4, 3, 6), (6, 4, 3), frozenset({3, 4}))
    now = topo([("t", 0, [5, 1, 3], 5, None), ("t", 1, [6, 4, 3], 6, None), ("t", 2, [1, 2, 5], 1, None)])
    # restore broker 4 only: t-1 goes to its original order with 3 (still demoted) last
    mv3, upd = plan_restore(now, [4], records)
    assert dict(mv3.reorder) == {("t", 1): (4, 6, 3)}
    assert mv3.elect == (("t", 1),)
    assert upd == {("t", 1): DemotionRecord((4, 3, 6), (4, 6, 3), frozenset({3}))}
    # restore 3 and 4: everything back to the original order; the record empties
    mv4, upd4 = plan_restore(now, [3, 4], records)
    assert dict(mv4.reorder) == {("t", 0): (3, 5, 1), ("t", 1): (4, 3, 6)}
    assert mv4.elect == (("t", 0), ("t", 1))
    assert upd4 == {("t", 0): None, ("t", 1): None}


def test_restore_leaves_changed_partitions_and_waits_for_isr():
    records = {("t", 0): DemotionRecord((3, 5, 1), (5, 1, 3), frozenset({3})),
               ("t", 1): DemotionRecord((3, 1, 5), (1, 5, 3), frozenset({3}))}
    now = topo([("t", 0, [1, 5, 3], 1, None),          # someone reordered it since
                ("t", 1, [1, 5, 3], 1, [1, 5])])       # 3 back but not yet in the ISR
    mv, upd = plan_restore(now, [3], records)
    assert dict(mv.reorder) == {("t", 1): (3, 1, 5)}
    assert mv.elect == ()
    reasons = {u.tp: u.reason for u in mv.unmovable}
    assert reasons[("t", 0)].startswith("replica order changed since the demotion")
    assert reasons[("t", 1)].startswith("preferred replica 3 is not in the ISR")
    assert upd[("t", 0)] is None


def test_restore_without_record_elects_preferred():
    now = topo([("t", 0, [3, 5, 1], 5, None), ("t", 1, [3, 5, 1], 3, None)])
    mv, upd = plan_restore(now, [3], {})
    assert mv.elect == (("t", 0),) and not mv.reorder and upd == {}


# ------------------------------------------------------------------------------------------
# CLI on snapshots (no cluster)
# ------------------------------------------------------------------------------------------


def _snapshot(tmp_path, parts, down=()):
    path = tmp_path / "topo.json"
    path.write_text(topo(parts, down=down).to_json())
    return str(path)


def test_cli_rebalance_dry_run_on_snapshot(tmp_path):
    from kops.cli.leader import app

    parts = [("t", i, [1, 2], 1, None) for i in range(9)] + [("t", 9, [1, 2], 2, None)]
    parts += [("u", 0, [2, 1], 1, None)]
    snap = _snapshot(tmp_path, parts)
    metrics = tmp_path / "m.prom"
    r = CliRunner().invoke(app, ["rebalance", "--topology", snap, "--output", "json",
                                 "--metrics-file", str(metrics)])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["dry_run"] and doc["would_elect"] == [{"topic": "u", "partition": 0}]
    assert {b["broker"]: b["imbalance_ratio"] for b in doc["before"]["brokers"]} == {1: 0.1, 2: 1.0}
    text = metrics.read_text()
    assert 'kops_leader_imbalance_ratio{broker="2"} 1' in text
    assert "kops_leader_rebalance_duration_seconds" in text


def test_cli_rebalance_exit_3_when_preferred_down(tmp_path):
    from kops.cli.leader import app

    parts = [("t", i, [3, 4], 4, [4]) for i in range(3)] + [("t", 3, [4, 3], 4, [4])]
    r = CliRunner().invoke(app, ["rebalance", "--topology", _snapshot(tmp_path, parts, down={3})])
    assert r.exit_code == 3
    assert "preferred replica 3 is down" in r.output


def test_cli_balance_plan_on_snapshot(tmp_path):
    from kops.cli.leader import app

    # every partition prefers broker 1: skewed
    parts = [("s", i, [1, 3, 5], 1, None) for i in range(6)]
    r = CliRunner().invoke(app, ["balance-plan", "--topology", _snapshot(tmp_path, parts), "--output", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    counts = [v for k, v in doc["after"]["preferred_leaders"].items() if int(k) in (1, 3, 5)]
    assert sorted(counts) == [2, 2, 2]
    for e in doc["plan"]["partitions"]:
        assert sorted(e["replicas"]) == [1, 3, 5]


def test_cli_elect_bad_input(tmp_path):
    from kops.cli.leader import app

    r = CliRunner().invoke(app, ["elect", "--election-type", "preferred", "--bootstrap-server", "127.0.0.1:1"])
    assert r.exit_code == 2 and "One and only one" in r.output
    f = tmp_path / "e.json"
    f.write_text('{"partitions": [{"topic": "a", "partition": 0}, {"topic": "a", "partition": 0}]}')
    r = CliRunner().invoke(app, ["elect", "--election-type", "preferred", "--path-to-json-file", str(f),
                                 "--bootstrap-server", "127.0.0.1:1"])
    assert r.exit_code == 2 and "duplicate" in r.output
    f.write_text('{"topics": []}')
    r = CliRunner().invoke(app, ["elect", "--election-type", "preferred", "--path-to-json-file", str(f),
                                 "--bootstrap-server", "127.0.0.1:1"])
    assert r.exit_code == 2 and "missing" in r.output


@pytest.mark.parametrize("threshold", [-1, 101])
def test_cli_threshold_range(tmp_path, threshold):
    from kops.cli.leader import app

    r = CliRunner().invoke(app, ["rebalance", "--topology", _snapshot(tmp_path, [("t", 0, [1], 1, None)]),
                                 "--imbalance-threshold", str(threshold)])
    assert r.exit_code == 2


# ------------------------------------------------------------------------------------------
# Lock, metrics and the demotion record (no cluster)
# ------------------------------------------------------------------------------------------


class _NoZk:
    zookeeper = None


def test_run_lock_is_exclusive_and_names_its_holder(tmp_path):
    from kops.ops.leader_rebalance import LockHeld, RunLock

    with RunLock(_NoZk(), "c1", what="leader rebalance", lock_dir=tmp_path):
        with pytest.raises(LockHeld) as e:
            RunLock(_NoZk(), "c1", what="leader demote", lock_dir=tmp_path).acquire()
        assert "leader rebalance" in e.value.message and e.value.exit_code == 3
        RunLock(_NoZk(), "c2", what="other cluster", lock_dir=tmp_path).acquire().release()
    RunLock(_NoZk(), "c1", what="again", lock_dir=tmp_path).acquire().release()


def _samples(gauges) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The written metrics, parsed back: {(name, sorted labels): value}."""
    from prometheus_client.parser import text_string_to_metric_families

    from kops.ops import metrics

    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(metrics.text(gauges)) for s in family.samples}


def test_metrics_text_format():
    from kops.ops.leader_rebalance import STEPPED_ASIDE, RebalanceResult, gauges

    parts = [("t", i, [1, 2], 2 if i < 3 else 1, None) for i in range(10)]
    rep = leader_imbalance(topo(parts), 10)
    res = RebalanceResult("elected", 0, 10.0, before=rep, after=None, planned=rep.candidates())
    got = _samples(gauges(res, now=1700000000))
    assert got["kops_leader_imbalance_ratio", (("broker", "1"),)] == 0.3
    assert got["kops_leader_rebalance_elections", (("result", "elected"),)] == 0
    assert got["kops_leader_rebalance_last_run_timestamp_seconds", ()] == 1700000000
    aside = _samples(gauges(RebalanceResult(STEPPED_ASIDE, 0, 10.0, reason="locked")))
    assert aside["kops_leader_rebalance_stepped_aside", ()] == 1
    assert not any(name == "kops_leader_imbalance_ratio" for name, _ in aside)


def test_demotion_store_roundtrip(tmp_path):
    from kops.ops.leader_rebalance import DemotionStore

    store = DemotionStore("cid", tmp_path / "rec.json")
    assert store.load() == {}
    recs = {("t", 0): DemotionRecord((3, 5, 1), (5, 1, 3), frozenset({3}))}
    store.save(recs)
    assert store.load() == recs
    (tmp_path / "rec.json").write_text("{not json")
    from kops.errors import BadInput

    with pytest.raises(BadInput):
        store.load()
