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
from tests.unit.engine_fakes import AdminConn, Store

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
    runner = R.Runner(object(), Store(), j, R.ExecuteOptions())
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
    runner.log_dirs.drive(runner.j.moves_in(J.IN_FLIGHT), runner.record)
    assert sent == [{k: D2}]
    runner.refresh(topo, {})
    runner.log_dirs.drive(runner.j.moves_in(J.IN_FLIGHT), runner.record)
    assert runner.j.progress[m.name] == J.IN_FLIGHT and len(sent) == 1  # moving: not sent again
    assert runner.refresh(topo, {}) is True
    assert runner.j.progress[m.name] == J.DONE


def test_runner_marks_a_missing_log_dir_as_mismatch(monkeypatch):
    k = ("t", 0, 1)
    runner, m, sent = _runner(monkeypatch, [{k: {"dir": D1, "future": None}}] * 3,
                              {k: "LogDirNotFoundError"})
    topo = _topo()
    runner.refresh(topo, {})
    runner.log_dirs.drive(runner.j.moves_in(J.IN_FLIGHT), runner.record)
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
