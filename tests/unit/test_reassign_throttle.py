"""Throttle computation and the sync plan (pure): scoped, merged, restored, dead brokers skipped."""

from __future__ import annotations

from kops.model import Broker, Partition, Topic, Topology
from kops.ops import throttle as T
from kops.ops.move import Move


def topo(broker_cfg=None, topic_cfg=None, down=()) -> Topology:
    broker_cfg = broker_cfg or {}
    brokers = tuple(Broker(b, "abc"[b // 2], alive=b not in down, configs=broker_cfg.get(b, {})) for b in range(6))
    parts = tuple(Partition("foo", p, (0, 2, 4)) for p in range(12))
    return Topology(brokers=brokers, topics=(Topic("foo", parts, configs=topic_cfg or {}),
                                              Topic("bar", (Partition("bar", 0, (1, 3, 5)),))))


M0 = Move("foo", 0, (0, 2, 4), (1, 2, 4))   # 0 -> 1
M10 = Move("foo", 10, (0, 2, 4), (0, 3, 4))  # 2 -> 3
MB = Move("bar", 0, (1, 3, 5), (1, 3, 5, 0))  # adds 0 only


def test_desired_is_kafka_shape_scoped_to_moves():
    d = T.desired_throttles([M0, M10, MB], rate=1000)
    foo = d.topics["foo"]
    assert T.format_replicas(foo[T.LEADER_REPLICAS]) == "0:0,0:2,0:4,10:0,10:2,10:4"  # string order like Kafka
    assert T.format_replicas(foo[T.FOLLOWER_REPLICAS]) == "0:1,10:3"
    assert T.format_replicas(d.topics["bar"][T.FOLLOWER_REPLICAS]) == "0:0"
    # leader rate on sources, follower rate on destinations
    assert d.brokers[2] == {T.LEADER_RATE: "1000"}
    assert d.brokers[1] == {T.LEADER_RATE: "1000", T.FOLLOWER_RATE: "1000"}  # source of bar-0, dest of foo-0
    assert d.brokers[3][T.FOLLOWER_RATE] == "1000"
    assert T.desired_throttles([M0], rate=None).brokers == {}  # no --throttle: nothing


def test_log_dir_throttle_only_on_brokers_with_log_dir_moves():
    m = Move("foo", 1, (0, 2, 4), (0, 2, 4), ("/d1", "any", "any"))
    d = T.desired_throttles([m, M0], rate=None, log_dir_rate=50)
    assert d.brokers == {0: {T.LOG_DIR_RATE: "50"}}


def test_sync_from_nothing_and_back_to_nothing():
    t = topo()
    sp = T.plan_sync(T.ThrottleState(), T.desired_throttles([M0], rate=500), t)
    got = {str(c) for c in sp.changes}
    assert "broker 0: leader.replication.throttled.rate=500" in got
    assert "broker 1: follower.replication.throttled.rate=500" in got
    assert "topic foo: leader.replication.throttled.replicas=0:0,0:2,0:4" in got
    assert "topic foo: follower.replication.throttled.replicas=0:1" in got
    assert not any("broker 3" in g or "broker 5" in g for g in got)  # not involved
    # the cluster now has those values
    t2 = topo(broker_cfg={b: {k: v for k, v in kv.items()} for b, kv in
                          {0: {T.LEADER_RATE: "500"}, 2: {T.LEADER_RATE: "500"}, 4: {T.LEADER_RATE: "500"},
                           1: {T.FOLLOWER_RATE: "500"}}.items()},
              topic_cfg={T.LEADER_REPLICAS: "0:0,0:2,0:4", T.FOLLOWER_REPLICAS: "0:1"})
    back = T.plan_sync(sp.state, T.Desired({}, {}), t2)
    assert {str(c) for c in back.changes} == {
        "broker 0: delete leader.replication.throttled.rate",
        "broker 2: delete leader.replication.throttled.rate",
        "broker 4: delete leader.replication.throttled.rate",
        "broker 1: delete follower.replication.throttled.rate",
        "topic foo: delete leader.replication.throttled.replicas",
        "topic foo: delete follower.replication.throttled.replicas",
    }
    assert back.state.empty


def test_foreign_values_are_merged_and_restored():
    t = topo(broker_cfg={0: {T.LEADER_RATE: "777"}}, topic_cfg={T.LEADER_REPLICAS: "5:1", T.FOLLOWER_REPLICAS: "*"})
    sp = T.plan_sync(T.ThrottleState(), T.desired_throttles([M0], rate=500), t)
    got = {str(c) for c in sp.changes}
    assert "broker 0: leader.replication.throttled.rate=500" in got
    assert sp.state.brokers[0][T.LEADER_RATE] == {"original": "777", "set": "500", "active": True}
    assert "topic foo: leader.replication.throttled.replicas=0:0,0:2,0:4,5:1" in got  # merged
    assert not any("follower.replication.throttled.replicas" in g for g in got)  # '*' left alone
    assert any("=* already throttles" in s for s in sp.skipped)
    # someone adds an entry meanwhile; kops removes only its own and restores the rate
    t2 = topo(broker_cfg={0: {T.LEADER_RATE: "500"}},
              topic_cfg={T.LEADER_REPLICAS: "0:0,0:2,0:4,5:1,7:3", T.FOLLOWER_REPLICAS: "*"})
    back = T.plan_sync(sp.state, T.Desired({}, {}), t2)
    got = {str(c) for c in back.changes}
    assert "broker 0: leader.replication.throttled.rate=777" in got
    assert "topic foo: leader.replication.throttled.replicas=5:1,7:3" in got
    assert not any("follower" in g and "topic" in g for g in got)


def test_rate_changed_by_someone_else_is_left_alone():
    st = T.ThrottleState(brokers={0: {T.LEADER_RATE: {"original": None, "set": "500"}}})
    back = T.plan_sync(st, T.Desired({}, {}), topo(broker_cfg={0: {T.LEADER_RATE: "999"}}))
    assert back.changes == [] and back.state.empty
    assert any("left alone" in s for s in back.skipped)


def test_down_brokers_are_skipped_and_removal_retried():
    sp = T.plan_sync(T.ThrottleState(), T.desired_throttles([M0], rate=500), topo(down={1}))
    assert not any(c.name == "1" for c in sp.changes)
    assert any("broker 1 is down" in s for s in sp.skipped)
    # broker 2 went down while its throttle is set: the record stays until it is back
    st = sp.state
    down2 = topo(broker_cfg={2: {T.LEADER_RATE: "500"}}, down={2})
    back = T.plan_sync(st, T.Desired({}, {}), down2)
    assert 2 in back.state.brokers and not any(c.name == "2" for c in back.changes)
    up2 = topo(broker_cfg={2: {T.LEADER_RATE: "500"}})
    again = T.plan_sync(back.state, T.Desired({}, {}), up2)
    assert "broker 2: delete leader.replication.throttled.rate" in {str(c) for c in again.changes}


def test_scoped_per_wave_removes_finished_partition_only():
    t = topo()
    s1 = T.plan_sync(T.ThrottleState(), T.desired_throttles([M0, M10], rate=500), t)
    t1 = topo(broker_cfg={b: {T.LEADER_RATE: "500"} for b in (0, 2, 4)} | {1: {T.FOLLOWER_RATE: "500"},
                                                                          3: {T.FOLLOWER_RATE: "500"}},
              topic_cfg={T.LEADER_REPLICAS: "0:0,0:2,0:4,10:0,10:2,10:4", T.FOLLOWER_REPLICAS: "0:1,10:3"})
    # foo-0 finished: its entries and broker 1's follower rate go, foo-10's stay
    s2 = T.plan_sync(s1.state, T.desired_throttles([M10], rate=500), t1)
    got = {str(c) for c in s2.changes}
    assert got == {
        "broker 1: delete follower.replication.throttled.rate",
        "topic foo: leader.replication.throttled.replicas=10:0,10:2,10:4",
        "topic foo: follower.replication.throttled.replicas=10:3",
    }


def test_state_roundtrip_and_parse():
    st = T.ThrottleState(brokers={1: {T.LEADER_RATE: {"original": None, "set": "5"}}},
                         topics={"foo": {T.LEADER_REPLICAS: {"original": None, "added": ["0:1"]}}})
    assert T.ThrottleState.from_dict(st.to_dict()).to_dict() == st.to_dict()
    assert T.parse_replicas(" 0:1 , 2:3,") == {"0:1", "2:3"}
    assert T.parse_replicas("*") is None and T.parse_replicas(None) == set()
    assert T.format_replicas(["2:1", "10:1"]) == "10:1,2:1"


def test_stale_config_reads_do_not_turn_kops_entries_into_foreign_ones():
    """Brokers learn dynamic config changes asynchronously: a read may still show entries kops
    already removed, or miss a rate kops just set. Neither may leave a kops throttle behind."""
    wave1 = T.plan_sync(T.ThrottleState(), T.desired_throttles([M0], rate=500), topo())
    # wave 1 done, wave 2 starts; the read is stale and still shows wave 1's entries
    stale = topo(broker_cfg={1: {T.FOLLOWER_RATE: "500"}},
                 topic_cfg={T.LEADER_REPLICAS: "0:0,0:2,0:4", T.FOLLOWER_REPLICAS: "0:1"})
    wave2 = T.plan_sync(wave1.state, T.desired_throttles([M10], rate=500), stale)
    got = {str(c) for c in wave2.changes}
    assert "topic foo: leader.replication.throttled.replicas=10:0,10:2,10:4" in got
    assert "topic foo: follower.replication.throttled.replicas=10:3" in got
    # the final removal reads a topology that does not show the rate kops set yet: still removed
    very_stale = topo()
    end = T.plan_sync(wave2.state, T.Desired({}, {}), very_stale, final=True)
    got = {str(c) for c in end.changes}
    assert "broker 3: delete follower.replication.throttled.rate" in got
    assert "topic foo: delete leader.replication.throttled.replicas" in got
    assert end.state.empty and end.state.brokers == {} and end.state.topics == {}
    # broker 1 was throttled in wave 1, lifted, and is throttled again later: its original
    # (None) is remembered, not re-read from a lagging config
    again = T.plan_sync(wave2.state, T.desired_throttles([M0], rate=500), topo(broker_cfg={1: {T.FOLLOWER_RATE: "500"}}))
    assert again.state.brokers[1][T.FOLLOWER_RATE]["original"] is None


def _cluster_after(changes, base_brokers=None, base_topic=None):
    """The configs a cluster has after ``changes`` were applied on top of the given ones."""
    brokers = {b: dict(kv) for b, kv in (base_brokers or {}).items()}
    tcfg = dict(base_topic or {})
    for c in changes:
        if c.kind == "broker":
            kv = brokers.setdefault(int(c.name), {})
            if c.value is None:
                kv.pop(c.key, None)
            else:
                kv[c.key] = c.value
        elif c.value is None:
            tcfg.pop(c.key, None)
        else:
            tcfg[c.key] = c.value
    return brokers, tcfg


def test_throttles_written_ahead_are_all_removed_after_a_kill_mid_apply():
    """kops journals merge_states(old, new) before it applies a throttle change. Killed after
    applying (before journaling the result), the run that resumes still removes every throttle;
    the pre-existing (foreign) values survive."""
    foreign_b = {5: {T.LEADER_RATE: "777"}}
    foreign_t = {T.LEADER_REPLICAS: "11:5"}
    wave1 = T.plan_sync(T.ThrottleState(), T.desired_throttles([M0], rate=500), topo(foreign_b, foreign_t))
    b1, t1 = _cluster_after(wave1.changes, foreign_b, foreign_t)
    # wave 2 adds M10: the journal gets the merged records, then kops dies mid-apply (all applied)
    wave2 = T.plan_sync(wave1.state, T.desired_throttles([M0, M10], rate=500), topo(b1, t1))
    journaled = T.merge_states(wave1.state, wave2.state)
    b2, t2 = _cluster_after(wave2.changes, b1, t1)
    assert b2[3][T.FOLLOWER_RATE] == "500"
    # the resumed run finishes: everything kops set is lifted, the foreign values are back
    end = T.plan_sync(journaled, T.Desired({}, {}), topo(b2, t2), final=True)
    b3, t3 = _cluster_after(end.changes, b2, t2)
    assert {b: kv for b, kv in b3.items() if kv} == foreign_b
    assert t3 == foreign_t
    assert end.state.empty


def test_write_ahead_record_never_applied_is_set_on_resume_and_harmless_to_remove():
    """Killed after journaling but before applying: the resumed run sets the rate it finds
    recorded but not present, and removing a record that was never applied changes nothing."""
    sp = T.plan_sync(T.ThrottleState(), T.desired_throttles([M0], rate=500), topo())
    journaled = T.merge_states(T.ThrottleState(), sp.state)
    again = T.plan_sync(journaled, T.desired_throttles([M0], rate=500), topo())  # nothing applied
    assert "broker 1: follower.replication.throttled.rate=500" in {str(c) for c in again.changes}
    end = T.plan_sync(journaled, T.Desired({}, {}), topo(), final=True)
    b, t = _cluster_after(end.changes)
    assert not any(b.values()) and not t


def test_merge_keeps_a_rate_that_changed_as_prior_so_removal_recognises_it():
    old = T.ThrottleState(brokers={1: {T.FOLLOWER_RATE: {"original": None, "set": "500", "active": True}}})
    new = T.ThrottleState(brokers={1: {T.FOLLOWER_RATE: {"original": "500", "set": "900", "active": True}}})
    m = T.merge_states(old, new)
    rec = m.brokers[1][T.FOLLOWER_RATE]
    assert rec["original"] is None and rec["set"] == "900" and rec["prior"] == ["500"]
    # killed before 900 was applied: 500 is still there, and it is kops', so it is removed
    end = T.plan_sync(m, T.Desired({}, {}), topo(broker_cfg={1: {T.FOLLOWER_RATE: "500"}}), final=True)
    assert "broker 1: delete follower.replication.throttled.rate" in {str(c) for c in end.changes}


def test_a_rate_changed_twice_while_a_broker_still_shows_the_first_is_not_foreign():
    """`resume --throttle` changes kops' rate; changed again before the broker applied the
    first change, the broker still shows kops' first value: that is kops', not an operator's."""
    s1 = T.plan_sync(T.ThrottleState(), T.desired_throttles([M0], rate=500), topo()).state
    s2 = T.plan_sync(s1, T.desired_throttles([M0], rate=530), topo(broker_cfg={1: {T.FOLLOWER_RATE: "500"}})).state
    sp = T.plan_sync(s2, T.desired_throttles([M0], rate=520), topo(broker_cfg={1: {T.FOLLOWER_RATE: "500"}}))
    assert "broker 1: follower.replication.throttled.rate=520" in {str(c) for c in sp.changes}
    assert not any("someone else" in n for n in sp.skipped)
    # and the lift recognises every value kops set on broker 1 as its own
    back = T.plan_sync(sp.state, T.Desired({}, {}), topo(broker_cfg={1: {T.FOLLOWER_RATE: "530"}}))
    assert "broker 1: delete follower.replication.throttled.rate" in {str(c) for c in back.changes}


def _landing_anyway(monkeypatch, failing: set[str], applied: list):
    """apply_changes that applies every change (into ``applied``) but reports the changes to the
    resources named in ``failing`` ("broker 1", "topic foo") as failed: requests that timed
    out on a slow link and were applied after kops gave up on them."""
    def fake(conn, changes):
        applied.extend(changes)
        return [(c.kind, c.name, "alter configs: timed out") for c in changes
                if f"{c.kind} {c.name}" in failing]
    monkeypatch.setattr(T, "apply_changes", fake)


def test_a_set_that_timed_out_but_landed_is_still_removed_at_the_end(monkeypatch):
    """Fault lab (a rack slow and lossy): a throttle SET whose answer never came may land all
    the same. Broker 1's rate is set (wave 1), lifted (wave 2 has nothing on it), set again
    (wave 3) by a request that times out but lands; the topic's list grows the same way. kops
    keeps the records of both states (what the journal wrote ahead), so the final removal lifts
    them; before, the old record (lifted) was put back and the rate stayed after a run that
    ended well."""
    applied: list = []
    _landing_anyway(monkeypatch, set(), applied)
    w1, _, _ = T.sync(None, T.ThrottleState(), T.desired_throttles([M0], rate=500), topo())
    w2, _, _ = T.sync(None, w1, T.desired_throttles([M10], rate=500), topo(*_cluster_after(applied)))
    assert not w2.brokers[1][T.FOLLOWER_RATE]["active"]
    _landing_anyway(monkeypatch, {"broker 1", "topic foo"}, applied)
    w3, notes, _ = T.sync(None, w2, T.desired_throttles([M0, M10], rate=500), topo(*_cluster_after(applied)))
    assert any("throttle change failed on broker 1" in n for n in notes)
    b, t = _cluster_after(applied)
    assert b[1][T.FOLLOWER_RATE] == "500" and "0:1" in t[T.FOLLOWER_REPLICAS]
    _landing_anyway(monkeypatch, set(), applied)
    end, _, _ = T.sync(None, w3, T.Desired({}, {}), topo(b, t), final=True)
    b, t = _cluster_after(applied)
    assert not any(b.values()) and not t and end.empty


def test_a_lift_that_failed_stays_recorded_and_is_sent_again(monkeypatch):
    applied: list = []
    _landing_anyway(monkeypatch, set(), applied)
    state, _, _ = T.sync(None, T.ThrottleState(), T.desired_throttles([M0], rate=500), topo())
    b, t = _cluster_after(applied)
    lost: list = []
    monkeypatch.setattr(T, "apply_changes", lambda conn, changes: [(c.kind, c.name, "timed out") for c in changes
                                                                     if c.name == "1"])
    left, notes, _ = T.sync(None, state, T.Desired({}, {}), topo(b, t), final=True)
    assert not left.empty and left.brokers[1][T.FOLLOWER_RATE]["active"] and not lost
    _landing_anyway(monkeypatch, set(), applied)
    again = T.plan_sync(left, T.Desired({}, {}), topo(b, t), final=True)
    assert "broker 1: delete follower.replication.throttled.rate" in {str(c) for c in again.changes}
    assert again.state.empty
