"""The throttle tracker (kops.ops.reassign.throttle_sync): when an execution's throttles are set
and lifted, journaled ahead of every change (a connection stand-in records the config changes)."""

from __future__ import annotations

import pytest

from kops.model import Broker, Partition, Topic, Topology
from kops.ops import journal as J
from kops.ops import throttle as T
from kops.ops.move import Move
from kops.ops.reassign import admin as A
from kops.ops.reassign.options import LIFT_DEFER_MAX_S
from kops.ops.reassign.record import Recorder
from kops.ops.reassign.throttle_sync import ThrottleSync
from tests.unit.engine_fakes import AdminConn

M = Move("t", 0, (1, 2), (1, 3), size_bytes=10)
TOPO = Topology(brokers=tuple(Broker(i) for i in (1, 2, 3)),
                topics=(Topic("t", (Partition("t", 0, (1, 3, 2), adding_replicas=(3,), removing_replicas=(2,)),)),))


class SavingStore:
    """Saves the journal; remembers how many config requests had been sent at each save."""

    def __init__(self, conn):
        self.conn, self.at = conn, []

    def save(self, j):
        self.at.append(len(self.conn.a.configs))


def _sync(rate=1000):
    conn = AdminConn()
    store = SavingStore(conn)
    j = J.Journal(id="x", cluster_id="c", moves=[M])
    record = Recorder(store, j)
    return ThrottleSync(conn, record, rate=rate, log_dir_rate=None, topics=["t"]), conn, store, j


def test_a_lift_waits_while_every_move_left_ends_within_seconds_but_not_longer():
    s, *_ = _sync()
    due = s.lift_due
    assert due(False, in_flight=True, pending=False, all_ending_soon=False, now=0.0) is False  # nothing finished
    assert due(True, in_flight=True, pending=False, all_ending_soon=False, now=0.0) is True  # at once
    assert due(True, in_flight=False, pending=False, all_ending_soon=True, now=0.0) is True  # the last move
    assert due(True, in_flight=True, pending=True, all_ending_soon=True, now=0.0) is True  # a wave waits
    # every move left ends within seconds: put off, also at checks where nothing finished ...
    assert due(True, in_flight=True, pending=False, all_ending_soon=True, now=10.0) is False
    assert due(False, in_flight=True, pending=False, all_ending_soon=True, now=11.0) is False
    assert due(False, in_flight=True, pending=False, all_ending_soon=True, now=10.0 + LIFT_DEFER_MAX_S) is False
    # ... but not for long (a move that stalls at its last byte)
    assert due(False, in_flight=True, pending=False, all_ending_soon=True, now=10.5 + LIFT_DEFER_MAX_S) is True
    assert due(False, in_flight=True, pending=False, all_ending_soon=True, now=20.0) is False  # done: nothing left
    # a lift put off is done at the first check that does not put it off
    assert due(True, in_flight=True, pending=False, all_ending_soon=True, now=30.0) is False
    assert due(False, in_flight=True, pending=False, all_ending_soon=False, now=31.0) is True
    assert due(False, in_flight=True, pending=False, all_ending_soon=False, now=32.0) is False


def test_throttles_are_journaled_before_any_is_applied():
    s, conn, store, j = _sync()
    changes = s.sync(TOPO, [M])
    assert {(c.kind, c.name) for c in changes} == {("topic", "t"), ("broker", "1"), ("broker", "2"), ("broker", "3")}
    assert store.at == [0, 4]  # written ahead with nothing sent yet, then saved once applied
    assert set(j.throttles.brokers) == {1, 2, 3} and j.throttles.brokers[3][T.FOLLOWER_RATE]["set"] == "1000"
    assert any(e.endswith("throttles: " + "; ".join(str(c) for c in changes)) for e in j.events)
    s, conn, store, j = _sync()
    s.sync(TOPO, [M], save=False)  # the caller saves soon after (with the wave)
    assert store.at == [0] and len(conn.a.configs) == 4


def test_the_throttles_of_a_wave_are_in_force_before_it_starts(monkeypatch):
    s, conn, store, j = _sync()
    shown = []

    def applied(c, ids):  # the brokers show the rates at once
        shown.append(list(ids))
        return {b: {k: v for k, v in (s.desired([M]).brokers[b]).items()} for b in ids}

    monkeypatch.setattr("kops.cluster.topology.broker_throttle_configs", applied)
    s.before_wave(TOPO, [M])
    assert shown == [[1, 2, 3]] and store.at == [0]  # waited for; saved with the wave, by the caller
    assert s.record.notes == []
    s.before_wave(TOPO, [])  # only lifting: nothing to wait for
    assert shown == [[1, 2, 3]]


def test_brokers_slow_to_apply_a_rate_are_named_and_the_wave_starts_anyway(monkeypatch):
    s, *_ = _sync()
    monkeypatch.setattr(T, "await_rates", lambda conn, desired, topo, timeout_s: [3])
    s.before_wave(TOPO, [M])
    assert s.record.notes == ["broker(s) [3] did not show the throttle rates kops set within 5 s; "
                              "starting the moves anyway"]


def test_nothing_recorded_nothing_read_at_the_end(monkeypatch):
    s, conn, *_ = _sync()
    monkeypatch.setattr(A, "read", lambda *a, **kw: pytest.fail("read without throttles to lift"))
    s.lift_all(None)
    assert conn.a.configs == []


def test_every_throttle_is_lifted_at_the_end_and_waited_for(monkeypatch):
    s, conn, store, j = _sync()
    s.sync(TOPO, [M])
    reads, asked = [], []
    monkeypatch.setattr(A, "read", lambda c, topics=None, sizes=False: reads.append(topics) or TOPO)
    monkeypatch.setattr("kops.cluster.topology.broker_throttle_configs",
                        lambda c, ids: asked.append(list(ids)) or {b: {} for b in ids})
    s.lift_all(TOPO)
    assert reads == [["t"]]  # the current values, for what to restore
    lifted = conn.a.configs[4:]
    assert {name for _, name, _ in lifted} == {"t", "1", "2", "3"}
    assert all(v is None for _, _, kv in lifted for v in kv.values())
    assert j.throttles.empty and any("throttles removed: " in e for e in j.events)
    assert asked == [[1, 2, 3]]  # until no broker shows a rate kops set
