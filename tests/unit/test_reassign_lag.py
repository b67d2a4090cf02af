"""The lag watch (kops.ops.reassign.lag): mismatches confirmed only after a while, and finished
moves noticed between checks while broker metadata trails the controller (pure; the times are
passed in, the controller is a stand-in)."""

from __future__ import annotations

from kops.model import Partition, Topic, Topology
from kops.ops.move import Move
from kops.ops.reassign.lag import LagWatch
from kops.ops.reassign.options import LAG_RECHECK_EVERY_S, LAG_RECHECK_S, WAKE_S, WAKE_SOON_S

M = Move("t", 0, (1, 2), (1, 3), size_bytes=10)


def _topo(replicas):
    return Topology(brokers=(), topics=(Topic("t", (Partition("t", 0, tuple(replicas)),)),))


class Controller:
    """ListPartitionReassignments, counted."""

    def __init__(self, ongoing):
        self.ongoing, self.asked = ongoing, 0

    def __call__(self):
        self.asked += 1
        return self.ongoing


def test_a_mismatch_counts_once_it_has_been_seen_for_a_while():
    w = LagWatch()
    assert not w.mismatch_pending
    assert w.confirmed("t-0", 100.0, 15.0) is False  # first seen now
    assert w.mismatch_pending  # (verify reads again before it believes it)
    assert w.confirmed("t-0", 114.9, 15.0) is False
    assert w.confirmed("t-0", 115.0, 15.0) is True
    w.settled("t-0")  # the metadata caught up: seen again later, the clock starts anew
    assert not w.mismatch_pending
    assert w.confirmed("t-0", 200.0, 15.0) is False
    assert w.confirmed("t-1", 0.0, 0.0) is True  # no wait asked: at once


def test_a_finished_move_is_noticed_between_checks():
    w = LagWatch()
    w.checking(0.0)
    w.saw([M], _topo((1, 3, 2)), {M.tp}, 0.1)  # reassigning at the check: watched
    ctl = Controller({M.tp: {}})
    assert w.wake(1.0, ctl, ending_soon=False) is False and ctl.asked == 1  # still reassigning
    ctl.ongoing = {}
    assert w.wake(1.25, ctl, ending_soon=False) is False and ctl.asked == 1  # not due (WAKE_S)
    assert w.wake(1.25, ctl, ending_soon=True) is True and ctl.asked == 2  # due (WAKE_SOON_S): finished


def test_the_controller_is_asked_rarely_while_every_move_has_long_to_go():
    """Between checks the cluster is asked every WAKE_S seconds, every WAKE_SOON_S only when a
    move may end soon (its sizes say so); not at all when nothing is reassigning."""
    w = LagWatch()
    w.saw([M], _topo((1, 3, 2)), {M.tp}, 0.0)
    ctl = Controller({M.tp: {}})
    assert WAKE_SOON_S < 0.25 < WAKE_S < 0.75
    assert w.wake(10.0, ctl, ending_soon=False) is False and ctl.asked == 1
    assert w.wake(10.25, ctl, ending_soon=False) is False and ctl.asked == 1  # not due yet
    assert w.wake(10.25, ctl, ending_soon=True) is False and ctl.asked == 2
    assert w.wake(11.0, ctl, ending_soon=False) is False and ctl.asked == 3
    idle = LagWatch()
    idle.saw([M], _topo((1, 3)), set(), 0.0)  # done and shown: nothing to watch
    assert idle.wake(10.0, ctl, ending_soon=True) is False and ctl.asked == 3


def test_metadata_behind_the_controller_is_looked_at_again_shortly():
    """The controller finished the move but the read still shows the old replicas: the next
    check runs LAG_RECHECK_EVERY_S after the last one (not a poll interval later), for
    LAG_RECHECK_S; after that it is a mismatch's business, not the wake-up's."""
    w = LagWatch()
    w.checking(100.0)
    w.saw([M], _topo((1, 2)), set(), 100.0)  # not reassigning, replicas not at the target: lagging
    ctl = Controller({})
    assert w.wake(100.0 + LAG_RECHECK_EVERY_S / 2, ctl, ending_soon=False) is False
    assert w.wake(100.0 + LAG_RECHECK_EVERY_S, ctl, ending_soon=False) is True
    assert ctl.asked == 0  # no need to ask the controller
    w.checking(101.0)
    w.saw([M], _topo((1, 2)), set(), 101.0)  # still behind: lagging since the first time seen
    assert w.wake(100.0 + LAG_RECHECK_S + 1, ctl, ending_soon=False) is False
    w.saw([M], _topo((1, 3)), set(), 102.0)  # caught up
    assert w.wake(102.0 + 1, ctl, ending_soon=False) is False and ctl.asked == 0
