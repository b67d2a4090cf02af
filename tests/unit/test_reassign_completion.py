"""When is a move complete: log-dir moves (AlterReplicaLogDirs) verified with DescribeLogDirs,
and prompt completion detection in the polling loop (pure or with stand-ins for the cluster)."""

from __future__ import annotations

import time

import pytest

from kops.model import Partition, Topic, Topology
from kops.ops import journal as J
from kops.ops import reassign as R
from kops.ops.progress import poll
from kops.ops.reassign import (
    LOG_DIR_DONE,
    LOG_DIR_ELSEWHERE,
    LOG_DIR_MOVING,
    LOG_DIR_WAITING,
    log_dir_states,
    partition_statuses,
    settle,
    status_exit_code,
)
from kops.ops.move import Move
from tests.unit.engine_fakes import AdminConn

D1, D2 = "/data/d1", "/data/d2"


def test_log_dir_states():
    dirs = {
        ("t", 0, 1): {"dir": D2, "future": None},  # done
        ("t", 0, 2): {"dir": D1, "future": D2},  # moving into the requested dir
        ("t", 0, 3): {"dir": D1, "future": None},  # in another dir, nothing moves it
        ("t", 0, 5): {"dir": D1, "future": "/data/d3"},  # moving somewhere else
    }
    want = {1: D2, 2: D2, 3: D2, 4: D2, 5: D2}
    assert log_dir_states(want, "t", 0, dirs) == {
        1: LOG_DIR_DONE, 2: LOG_DIR_MOVING, 3: LOG_DIR_ELSEWHERE, 4: LOG_DIR_WAITING, 5: LOG_DIR_ELSEWHERE,
    }
    # paths compare normalised; brokers that could not be asked are never "done"
    assert log_dir_states({1: D2 + "/"}, "t", 0, dirs) == {1: LOG_DIR_DONE}
    assert log_dir_states({1: D2}, "t", 0, None) == {1: LOG_DIR_WAITING}


def _topo(replicas=(1, 2)):
    return Topology(brokers=(), topics=(Topic("t", (Partition("t", 0, tuple(replicas)),)),))


def test_a_move_with_log_dirs_is_done_only_in_its_dirs():
    m = Move("t", 0, (1, 2), (1, 2), log_dirs=(D2, "any"))  # a log-dir move only
    assert not m.noop and m.log_dir_moves == {1: D2}
    topo = _topo()
    kw = dict(submitted_at=0, now=100)
    assert settle(m, topo, {}, **kw, log_dirs=None) == J.IN_FLIGHT  # not read yet: not done
    assert settle(m, topo, {}, **kw, log_dirs={1: LOG_DIR_MOVING}) == J.IN_FLIGHT
    assert settle(m, topo, {}, **kw, log_dirs={1: LOG_DIR_DONE}) == J.DONE
    plain = Move("t", 0, (1, 3), (1, 2))
    assert settle(plain, topo, {}, **kw) == J.DONE  # without log dirs nothing changes


def test_statuses_with_log_dirs():
    topo = _topo()
    tgt = [(("t", 0), (1, 2))]

    def st(states, **kw):
        return partition_statuses(tgt, topo, {}, log_dirs={("t", 0): states}, **kw)[0]

    assert st({1: LOG_DIR_DONE}).state == "complete"
    s = st({1: LOG_DIR_MOVING})
    assert s.state == "in_progress" and status_exit_code([s]) == 3
    assert "log dir moves: broker 1 moving" in s.message()
    assert s.to_dict()["log_dirs"] == {"1": "moving"}
    s = st({1: LOG_DIR_ELSEWHERE})
    assert s.state == "mismatch" and status_exit_code([s]) == 1
    assert "not in the requested log dirs (broker 1 elsewhere)" in s.message()
    # a kops execution still drives it (it sends AlterReplicaLogDirs): in progress
    assert st({1: LOG_DIR_ELSEWHERE}, driving=[("t", 0)]).state == "in_progress"
    assert st({1: LOG_DIR_WAITING}).state == "in_progress"  # DescribeLogDirs unanswered: not complete


class _Store:
    def __init__(self):
        self.saved = 0

    def save(self, j):
        self.saved += 1


def _runner(monkeypatch, dirs_seq, alter_results):
    """A Runner over one log-dir move, with DescribeLogDirs / AlterReplicaLogDirs stood in."""
    m = Move("t", 0, (1, 2), (1, 2), log_dirs=(D2, "any"), size_bytes=10)
    j = J.Journal(id="x", cluster_id="c", moves=[m])
    j.progress[m.name] = J.IN_FLIGHT
    j.submitted_at[m.name] = 0.0
    sent = []
    it = iter(dirs_seq)
    monkeypatch.setattr("kops.cluster.topology.replica_log_dirs", lambda conn, brokers, topics: next(it))

    def alter(conn, reqs):
        sent.append(dict(reqs))
        return {k: alter_results.get(k) for k in reqs}

    monkeypatch.setattr(R.admin, "alter_log_dirs", alter)
    runner = R.Runner(object(), _Store(), j, R.ExecuteOptions(), None, None)
    return runner, m, sent


def test_runner_waits_for_the_log_dir_move(monkeypatch):
    k = ("t", 0, 1)
    runner, m, sent = _runner(monkeypatch, [
        {k: {"dir": D1, "future": None}},  # replica reassigned, request not acted on yet
        {k: {"dir": D1, "future": D2}},  # the future replica catches up
        {k: {"dir": D2, "future": None}},  # done
    ], {})
    topo = _topo()
    runner.refresh(topo, {})
    assert runner.j.progress[m.name] == J.IN_FLIGHT
    runner._log_dirs(runner.j.moves_in(J.IN_FLIGHT))
    assert sent == [{k: D2}]
    runner.refresh(topo, {})
    runner._log_dirs(runner.j.moves_in(J.IN_FLIGHT))
    assert runner.j.progress[m.name] == J.IN_FLIGHT and len(sent) == 1  # moving: not sent again
    assert runner.refresh(topo, {}) is True
    assert runner.j.progress[m.name] == J.DONE


def test_runner_marks_a_missing_log_dir_as_mismatch(monkeypatch):
    k = ("t", 0, 1)
    runner, m, sent = _runner(monkeypatch, [{k: {"dir": D1, "future": None}}] * 3,
                              {k: "LogDirNotFoundError"})
    topo = _topo()
    runner.refresh(topo, {})
    runner._log_dirs(runner.j.moves_in(J.IN_FLIGHT))
    assert any("has no log dir /data/d2" in n for n in runner.notes)
    runner.refresh(topo, {}, mismatch_after_s=0)
    assert runner.j.progress[m.name] == J.MISMATCH
    assert any("log dir move failed on broker(s) 1" in n for n in runner.notes)


# -- the polling loop: fixed rate, prompt wake-up --------------------------------------------


def test_poll_wakes_up_as_soon_as_the_cheap_check_says_so():
    ticks = []
    flag = {"at": None}

    def tick():
        ticks.append(time.monotonic())
        if len(ticks) == 1:
            flag["at"] = time.monotonic() + 0.3  # "the controller finishes a move" 0.3 s later
        return len(ticks)

    def wake():
        return flag["at"] is not None and time.monotonic() >= flag["at"]

    t0 = time.monotonic()
    value, finished = poll(tick, lambda n: n >= 2, interval_s=5.0, wake=wake, wake_interval_s=0.05)
    assert finished and value == 2
    assert time.monotonic() - t0 < 2.0  # not the 5 s interval


def test_poll_interval_includes_the_tick_and_wake_errors_are_not_fatal():
    ticks = []

    def tick():
        ticks.append(time.monotonic())
        time.sleep(0.15)  # a slow cluster read
        return len(ticks)

    def wake():
        raise RuntimeError("cluster hiccup")

    poll(tick, lambda n: n >= 3, interval_s=0.3, wake=wake, wake_interval_s=0.05)
    gaps = [b - a for a, b in zip(ticks, ticks[1:])]
    assert all(0.25 <= g < 0.42 for g in gaps), gaps  # ticks start every 0.3 s, not 0.45 s


# -- throttles are effective before moves start -----------------------------------------------


def test_topic_lists_are_applied_before_broker_rates():
    from kops.ops import throttle as T

    conn = AdminConn()
    changes = [T.Change("broker", "1", T.FOLLOWER_RATE, "100"), T.Change("topic", "t", T.FOLLOWER_REPLICAS, "0:1"),
               T.Change("broker", "2", T.LEADER_RATE, "100")]
    assert T.apply_changes(conn, changes) == []
    log = conn.a.log
    # the topic request completes before any broker request is sent
    assert log.index(("done", "t")) < min(log.index(("sent", "1")), log.index(("sent", "2")))
    # lifting throttles keeps no order: every request goes out at once
    conn = AdminConn()
    T.apply_changes(conn, [T.Change("broker", "1", T.FOLLOWER_RATE, None), T.Change("topic", "t", T.FOLLOWER_REPLICAS, None)])
    assert [e[0] for e in conn.a.log] == ["sent", "sent", "done", "done"]


def test_await_rates_waits_until_brokers_show_them(monkeypatch):
    from kops.model import Broker
    from kops.ops import throttle as T

    views = iter([{1: {}, 2: {T.LEADER_RATE: "100"}}, {1: {T.FOLLOWER_RATE: "100"}}])
    asked = []

    def seen(conn, ids):
        asked.append(list(ids))
        return next(views)

    monkeypatch.setattr("kops.cluster.topology.broker_throttle_configs", seen)
    topo = Topology(brokers=(Broker(1), Broker(2), Broker(3, alive=False)), topics=())
    desired = T.Desired(brokers={1: {T.FOLLOWER_RATE: "100"}, 2: {T.LEADER_RATE: "100"},
                                 3: {T.FOLLOWER_RATE: "100"}}, topics={})
    assert T.await_rates(object(), desired, topo, interval_s=0.01) == []
    assert asked == [[1, 2], [1]]  # a down broker is not waited for; a broker that shows it is done
    monkeypatch.setattr("kops.cluster.topology.broker_throttle_configs", lambda conn, ids: {})
    assert T.await_rates(object(), desired, topo, timeout_s=0.05, interval_s=0.01) == [1, 2]  # bounded


def test_await_lifted_waits_until_no_broker_shows_a_rate_kops_set(monkeypatch):
    """A removal is done when the brokers have applied it: until then a kops started right
    after would read kops' own rate as an operator's value (and restore it at its end)."""
    from kops.model import Broker
    from kops.ops import throttle as T

    records = T.ThrottleState(brokers={
        1: {T.FOLLOWER_RATE: {"original": None, "set": "100", "active": False}},
        2: {T.LEADER_RATE: {"original": "5", "set": "100", "prior": ["50"], "active": True}},
        3: {T.FOLLOWER_RATE: {"original": None, "set": "100"}},  # down
        4: {T.LEADER_RATE: {"original": "100", "set": "100"}},  # kops' value was already there
    })
    views = iter([
        {1: {T.FOLLOWER_RATE: "100"}, 2: {T.LEADER_RATE: "5"}},  # 1 has not applied the delete yet
        {1: {T.FOLLOWER_RATE: "100"}},
        {1: {}},
    ])
    asked = []

    def seen(conn, ids):
        asked.append(list(ids))
        return next(views)

    monkeypatch.setattr("kops.cluster.topology.broker_throttle_configs", seen)
    topo = Topology(brokers=(Broker(1), Broker(2), Broker(3, alive=False), Broker(4)), topics=())
    assert T.await_lifted(object(), records, topo, interval_s=0.01) == []
    assert asked == [[1, 2], [1], [1]]
    # an earlier value of this execution ("prior") counts as kops' too; someone else's does not
    monkeypatch.setattr("kops.cluster.topology.broker_throttle_configs",
                        lambda conn, ids: {1: {T.FOLLOWER_RATE: "777"}, 2: {T.LEADER_RATE: "50"}})
    assert T.await_lifted(object(), records, topo, timeout_s=0.05, interval_s=0.01) == [2]


def test_wake_up_while_metadata_lags_behind_the_controller(monkeypatch):
    runner, m, _ = _runner(monkeypatch, [], {})
    monkeypatch.setattr(R.admin, "ongoing", lambda conn: {("t", 0): {}})
    runner._watch = {("t", 0)}
    assert runner.moves_finished() is False  # still reassigning
    monkeypatch.setattr(R.admin, "ongoing", lambda conn: {})
    assert runner.moves_finished() is False  # asked the cluster WAKE_SOON_S ago: not yet again
    runner._woke_at -= R.WAKE_SOON_S
    assert runner.moves_finished() is True  # the controller finished it
    runner._watch = set()
    runner._lagging = {("t", 0): time.monotonic()}  # ... but the last metadata read was behind
    runner._ticked_at = time.monotonic()
    assert runner.moves_finished() is False  # the tick that saw it was a moment ago
    runner._ticked_at -= R.LAG_RECHECK_EVERY_S
    assert runner.moves_finished() is True
    runner._lagging = {("t", 0): time.monotonic() - R.LAG_RECHECK_S - 1}  # long enough: a mismatch
    assert runner.moves_finished() is False


def test_wake_up_checks_rarely_while_every_move_has_long_to_go(monkeypatch):
    """Between ticks the cluster is asked every WAKE_S seconds, every WAKE_SOON_S only when a
    move may end soon (its sizes say so)."""
    runner, m, _ = _runner(monkeypatch, [], {})
    calls = []
    monkeypatch.setattr(R.admin, "ongoing", lambda conn: calls.append(1) or {("t", 0): {}})
    runner._watch = {("t", 0)}
    runner._ending_soon = False
    assert runner.moves_finished() is False and len(calls) == 1
    runner._woke_at -= R.WAKE_SOON_S
    assert runner.moves_finished() is False and len(calls) == 1  # not due yet
    runner._ending_soon = True
    assert runner.moves_finished() is False and len(calls) == 2


def test_the_runner_sees_a_move_ending_soon(monkeypatch):
    mb = 1_000_000
    m = Move("t", 0, (1, 2), (1, 3), size_bytes=100 * mb)
    j = J.Journal(id="x", cluster_id="c", moves=[m])
    j.progress[m.name] = J.IN_FLIGHT
    runner = R.Runner(object(), _Store(), j, R.ExecuteOptions(throttle=1 * mb), None, None)
    copied = {}
    monkeypatch.setattr("kops.cluster.topology.replica_sizes", lambda conn, brokers, topics: dict(copied))
    copied[("t", 0, 3)] = 10 * mb  # 90 s left at 1 MB/s
    assert runner.snapshot().bytes_done == 10 * mb and runner._ending_soon is False
    copied[("t", 0, 3)] = 98 * mb  # 2 s left
    assert runner.snapshot().bytes_done == 98 * mb and runner._ending_soon is True
    copied.clear()  # sizes unknown: it may end any moment
    runner.snapshot()
    assert runner._ending_soon is True


def _two_moves_one_finished(monkeypatch, sizes):
    """A Runner over t-0 (finished: at its target, no longer reassigning) and t-1 (still
    reassigning, ``sizes`` copied), its throttle syncs recorded instead of applied."""
    from kops.model import Broker

    a, b = Move("t", 0, (1, 2), (1, 3), size_bytes=10), Move("t", 1, (1, 2), (1, 4), size_bytes=10)
    topo = Topology(brokers=tuple(Broker(i) for i in range(1, 5)),
                    topics=(Topic("t", (Partition("t", 0, (1, 3)), Partition("t", 1, (1, 2, 4)))),))
    monkeypatch.setattr(R.admin, "read", lambda conn, topics=None, sizes=False: topo)
    monkeypatch.setattr(R.admin, "ongoing", lambda conn: {("t", 1): {"adding_replicas": [4], "removing_replicas": [2]}})
    monkeypatch.setattr("kops.cluster.topology.replica_sizes", lambda conn, brokers, topics: dict(sizes))
    j = J.Journal(id="x", cluster_id="c", moves=[a, b])
    j.progress[a.name] = j.progress[b.name] = J.IN_FLIGHT
    runner = R.Runner(object(), _Store(), j, R.ExecuteOptions(throttle=1000), None, None)
    syncs = []
    monkeypatch.setattr(runner, "_sync_throttles", lambda topo, in_flight, **kw: syncs.append(in_flight) or [])
    return runner, a, b, syncs


def test_throttles_of_finished_moves_lifted_at_once_unless_the_rest_end_within_seconds(monkeypatch):
    """A move finishes: its throttles are lifted at that tick; but while every other move in
    flight is about to end too (and no wave waits), they are lifted all together at the end."""
    for all_ending_soon, lifted in ((False, 1), (True, 0)):
        runner, a, b, syncs = _two_moves_one_finished(monkeypatch, {})
        runner._all_ending_soon = all_ending_soon
        runner.tick()
        assert runner.j.progress[a.name] == J.DONE and runner.j.progress[b.name] == J.IN_FLIGHT
        assert len(syncs) == lifted, all_ending_soon


def test_a_lift_put_off_is_done_once_the_rest_stops_ending_soon_or_after_a_bound(monkeypatch):
    runner, a, b, syncs = _two_moves_one_finished(monkeypatch, {("t", 1, 4): 9})
    runner._all_ending_soon = True
    runner.tick()  # a finished, b 1 byte from its end: put off
    assert syncs == [] and runner._all_ending_soon  # (the snapshot still says b ends soon)
    runner.tick()
    assert syncs == []  # still ending soon, within the bound
    runner._lift_deferred_at -= R.LIFT_DEFER_MAX_S + 1  # b stalls: not forever
    runner.tick()
    assert len(syncs) == 1 and runner._lift_deferred_at is None


def test_a_move_is_ending_soon_when_little_is_left_to_copy():
    from kops.ops.reassign.status import copying

    mb = 1_000_000
    m = Move("t", 0, (1, 2), (1, 3), size_bytes=100 * mb)
    other = Move("t", 1, (1, 2), (1, 4), size_bytes=100 * mb)
    c = copying([m], {("t", 0, 3): 10 * mb}, throttle=1 * mb)  # 90 s left at 1 MB/s
    assert c.copied == {"t-0": 10 * mb} and not c.ending_soon and not c.all_ending_soon
    c = copying([m, other], {("t", 0, 3): 98 * mb}, throttle=1 * mb)  # 2 s left for t-0, 100 s for t-1
    assert c.ending_soon and not c.all_ending_soon
    c = copying([m, other], {("t", 0, 3): 98 * mb, ("t", 1, 4): 96 * mb}, throttle=1 * mb)
    assert c.ending_soon and c.all_ending_soon
    c = copying([m], {("t", 0, 3): 200 * mb}, throttle=None)  # a replica bigger than planned: counted up to the size
    assert c.copied == {"t-0": 100 * mb} and c.all_ending_soon
    c = copying([m], {("t", 0, 3): 94 * mb}, throttle=None)  # no throttle: 5 % of the bytes is "soon"
    assert not c.ending_soon
    c = copying([m], {}, throttle=1 * mb)  # sizes unknown: it may end any moment, but not all surely
    assert c.ending_soon and not c.all_ending_soon
    assert copying([], {}, throttle=None).copied == {}


def test_poll_while_progressing_waits_as_long_as_lagging_metadata_catches_up():
    """After thousands of reorders or elections the answering broker's metadata trails the
    controller by more than 10 s: kops keeps reading while fewer partitions are left behind, and
    stops after ``quiet_s`` without progress, or at ``timeout_s``."""
    from kops.ops.progress import poll_while_progressing

    # catches up by one partition per read: 25 reads, each needed; far longer than quiet_s
    left = iter(range(24, -1, -1))
    reads = []
    last = poll_while_progressing(lambda: reads.append(1) or next(left), lambda n: n, timeout_s=60.0,
                                  quiet_s=0.2, interval_s=0.02)
    assert last == 0 and len(reads) == 25

    # no progress at all: stops after quiet_s and returns what is still behind
    reads.clear()
    last = poll_while_progressing(lambda: reads.append(1) or 3, lambda n: n, timeout_s=60.0, quiet_s=0.1,
                                  interval_s=0.01)
    assert last == 3 and 2 <= len(reads) < 100

    # nothing behind: one read, no waiting
    reads.clear()
    assert poll_while_progressing(lambda: reads.append(1) or 0, lambda n: n, timeout_s=60.0) == 0
    assert len(reads) == 1

    # progress that never ends is still bounded by timeout_s
    reads.clear()
    n = iter(range(10**6, 0, -1))
    poll_while_progressing(lambda: reads.append(1) or next(n), lambda v: v, timeout_s=0.3, interval_s=0.01)
    assert 2 <= len(reads) < 100


def test_poll_while_progressing_ends_with_the_first_read_error():
    """A read that fails ends the wait with its error (as the single read it replaces did),
    never with a half-empty result."""
    from kops.errors import ClusterError
    from kops.ops.progress import poll_while_progressing

    calls = []

    def tick():
        calls.append(1)
        if len(calls) > 1:
            raise ClusterError("no answer from the cluster")
        return 3

    with pytest.raises(ClusterError):
        poll_while_progressing(tick, lambda n: n, timeout_s=60.0, quiet_s=30.0, interval_s=0.01)
    assert len(calls) == 2
