"""The stall watch (kops.ops.reassign.stall): when ``execute --wait`` stops waiting (pure; the
times are passed in)."""

from __future__ import annotations

from kops.model import Broker, Topology
from kops.ops.move import Move
from kops.ops.reassign.options import NO_PROGRESS_S
from kops.ops.reassign.stall import StallWatch


def mv(p, original, target):
    return Move("t", p, tuple(original), tuple(target), size_bytes=100)


def brokers(*down, n=6):
    return Topology(brokers=tuple(Broker(i, alive=i not in down) for i in range(n)), topics=())


def test_every_move_waiting_on_a_down_broker_stalls_after_the_bound():
    m = mv(0, (0, 1), (0, 2))
    w = StallWatch(stall_after_s=60.0, throttle=None)
    assert w.check(brokers(2), [m], pending=False, finished=0, now=100.0) == [
        "every move in flight waits on down broker(s) [2]"]
    assert w.waiting_on_down and not w.stalled
    assert w.check(brokers(2), [m], pending=False, finished=0, now=160.0) == []  # said once
    assert not w.stalled  # not past the bound yet
    w.check(brokers(2), [m], pending=False, finished=0, now=160.5)
    assert w.stalled and w.reason == "stalled on down broker(s)"  # run() ends the wait: exit 3


def test_a_broker_back_up_or_a_wave_waiting_is_no_stall():
    m = mv(0, (0, 1), (0, 2))
    w = StallWatch(stall_after_s=0.0, throttle=None)
    w.check(brokers(2), [m], pending=False, finished=0, now=0.0)
    w.check(brokers(), [m], pending=False, finished=0, now=1.0)  # broker 2 is back: the clock restarts
    assert not w.waiting_on_down
    w.check(brokers(2), [m], pending=False, finished=0, now=2.0)
    assert not w.stalled
    waves_left = StallWatch(stall_after_s=0.0, throttle=None)
    for now in (0.0, 1.0, 2.0):  # a later wave may still run: not stalled
        assert waves_left.check(brokers(2), [m], pending=True, finished=0, now=now) == []
    assert not waves_left.stalled and not waves_left.waiting_on_down


def test_a_kept_replica_on_a_down_broker_stalls_a_move_too():
    """Kafka completes a move only once every target replica is in the ISR: a move whose new
    replica is on a live broker but which keeps a replica on a dead one waits as long as one
    whose destination is dead (found by the fault lab); moving off a dead broker does not."""
    keeps_dead = mv(0, (0, 1, 2), (0, 3, 2))  # broker 2 stays, and is down
    into_dead = mv(1, (0, 1, 3), (0, 4, 3))  # destination 4 is down
    off_dead = mv(2, (0, 1, 2), (0, 1, 5))  # moves off the dead broker 2: completes without it
    topo = brokers(2, 4)
    for moves, stalls in (([keeps_dead, into_dead], True), ([keeps_dead, off_dead], False)):
        w = StallWatch(stall_after_s=0.0, throttle=None)
        notes = w.check(topo, moves, pending=False, finished=0, now=0.0)
        w.check(topo, moves, pending=False, finished=0, now=1.0)
        assert w.stalled is stalls, moves
        assert notes == (["every move in flight waits on down broker(s) [2, 4]"] if stalls else [])


def test_moves_that_copy_nothing_with_every_broker_up_end_the_wait():
    """CI run G: a follower fetching from a broker that kept a deleted topic's log got
    INCONSISTENT_TOPIC_ID for good; every broker was up, so `rebalance step` (no --timeout)
    waited for 5 minutes without a word until the test killed it. A move whose new replicas copy
    nothing for the window (longer at a very low throttle) is stuck; when every move in flight
    is, the wait ends (exit 3, resumable) and says why."""
    m = mv(0, (0, 1), (0, 2))
    w = StallWatch(stall_after_s=60.0, throttle=50 << 20)
    w.copied({m.name: 0}, 1000.0)
    assert w.check(brokers(), [m], pending=False, finished=0, now=1000.0) == []
    assert w.check(brokers(), [m], pending=False, finished=0, now=1000.0 + NO_PROGRESS_S - 1) == []
    notes = w.check(brokers(), [m], pending=False, finished=0, now=1000.0 + NO_PROGRESS_S + 1)
    assert w.stalled and "no data copied for 120 s" in w.reason and m.name in w.reason
    assert notes == [w.reason]

    # at 1 KB/s a follower's 1 MiB fetch takes ~17 min: that is not a stall yet
    slow = StallWatch(stall_after_s=60.0, throttle=1024)
    slow.copied({m.name: 0}, 0.0)
    slow.check(brokers(), [m], pending=False, finished=0, now=NO_PROGRESS_S * 10)
    assert not slow.stalled and slow.window_s == 3 * 1024.0

    # a move that copies is never stalled, however long it takes
    busy = StallWatch(stall_after_s=60.0, throttle=50 << 20)
    for k in range(10):
        busy.copied({m.name: k * 1000}, k * 100.0)
        busy.check(brokers(), [m], pending=False, finished=0, now=k * 100.0 + 1)
    assert not busy.stalled

    # a move whose copying was never seen (sizes unanswered) says nothing
    unseen = StallWatch(stall_after_s=60.0, throttle=50 << 20)
    unseen.check(brokers(), [m], pending=False, finished=0, now=0.0)
    unseen.check(brokers(), [m], pending=False, finished=0, now=NO_PROGRESS_S * 10)
    assert not unseen.stalled


def test_moves_that_finish_are_progress_though_the_others_copy_nothing():
    """Scale bench (10,000 partitions, 4,003 moves of 16 KiB partitions submitted at once): the
    new replicas held their bytes within seconds, then the controller completed ~10 moves a
    second; with no byte copied by any move still in flight for 120 s, the wait ended (exit 3)
    while 1,550 moves were still finishing. A move finished within the window is progress."""
    moves = [mv(i, (0, 1), (0, 2)) for i in range(3)]
    w = StallWatch(stall_after_s=60.0, throttle=50 << 20)
    now = 1000.0
    w.copied({m.name: 16 << 10 for m in moves}, now)  # all copied at once, none finished yet
    w.check(brokers(), moves, pending=False, finished=0, now=now)
    for k in range(2):  # one move finishes every 100 s: never 120 s without progress
        now += 100
        w.check(brokers(), moves[k + 1:], pending=False, finished=k + 1, now=now)
        assert not w.stalled
    now += NO_PROGRESS_S + 1  # then nothing finishes, nothing copies: stalled
    w.check(brokers(), moves[2:], pending=False, finished=2, now=now)
    assert w.stalled and moves[2].name in w.reason


def test_moves_that_copy_nothing_need_not_be_data_moves():
    """Reorders copy nothing and are never stuck on a broker: they stall nothing."""
    reorder = mv(0, (0, 2), (2, 0))
    w = StallWatch(stall_after_s=0.0, throttle=None)
    for now in (0.0, 1.0, NO_PROGRESS_S * 2):
        assert w.check(brokers(2), [reorder], pending=False, finished=0, now=now) == []
    assert not w.stalled
