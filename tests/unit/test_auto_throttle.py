"""The adaptive throttle's decisions (kops.ops.reassign.auto_throttle) and ``--throttle``'s
values (pure; times are passed in)."""

from __future__ import annotations

import re

import pytest

from kops.inputs.values import AUTO_THROTTLE_DEFAULT, AutoRate, Invalid, throttle_rate
from kops.model import Broker, Partition, Topic, Topology
from kops.ops.reassign.auto_throttle import (
    CEILING_S,
    HOLD_S,
    STEP_S,
    AutoThrottle,
    Signals,
    harm,
    isr_sizes,
)

MiB = 1024 * 1024


def topo(*parts, min_isr=None):
    configs = {"min.insync.replicas": str(min_isr)} if min_isr else {}
    return Topology(brokers=tuple(Broker(i) for i in range(4)),
                    topics=(Topic("t", tuple(Partition("t", i, r, isr, leader) for i, (r, isr, leader) in enumerate(parts)),
                                  configs=configs),))


# -- --throttle's values ------------------------------------------------------------------------
def test_throttle_takes_a_rate_auto_or_bounds():
    assert throttle_rate("50M") == 50 * MiB and throttle_rate("1048576") == MiB
    assert throttle_rate("auto") == AutoRate(*AUTO_THROTTLE_DEFAULT)
    assert throttle_rate(" auto:5MiB-1G ") == AutoRate(5 * MiB, 1024 * MiB)
    assert str(AutoRate(5 * MiB, 20 * MiB)) == "auto:5.0MiB/s-20.0MiB/s"


@pytest.mark.parametrize("bad, says", [
    ("0", "below 1"), ("auto:5M", "auto:MIN-MAX"), ("auto:20M-5M", "above the maximum"),
    ("autox", "auto:MIN-MAX"), ("auto:-5M", "minimum rate"), ("auto:1M-x", "maximum rate"), ("fast", "bytes/s"),
])
def test_a_bad_throttle_names_the_problem(bad, says):
    with pytest.raises(Invalid, match=says):
        throttle_rate(bad)


# -- harm ---------------------------------------------------------------------------------------
def test_harm_is_a_partition_not_moved_worse_than_at_the_start():
    before = topo(((0, 1, 2), (0, 1, 2), 0), ((1, 2, 3), (1, 2), 1), ((2, 3, 0), (2, 3, 0), 2))
    base = isr_sizes(before)
    assert harm(before, base, moving=()) == []  # under-replicated from the start: not kops' doing
    after = topo(((0, 1, 2), (0, 1), 0), ((1, 2, 3), (1, 2), 1), ((2, 3, 0), (2,), 2), min_isr=2)
    assert harm(after, base, moving={("t", 2)}) == ["t-0 lost an in-sync replica (ISR [0, 1] of [0, 1, 2])"]
    assert harm(after, base, moving=()) == ["t-0 lost an in-sync replica (ISR [0, 1] of [0, 1, 2])",
                                            "t-2 under min ISR (ISR [2])"]
    offline = topo(((0, 1, 2), (), None), ((1, 2, 3), (1, 2), 1), ((2, 3, 0), (2, 3, 0), 2))
    assert harm(offline, base, moving=()) == ["t-0 offline"]
    assert harm(offline, base, moving=(), ignore={"t"}) == []


# -- decisions ----------------------------------------------------------------------------------
COPIED = [0]  # bytes copied so far (a run's counter only grows)


@pytest.fixture(autouse=True)
def _new_run():
    COPIED[0] = 0


def ramp(a: AutoThrottle, t0: float, until: float, *, receiving=2, every=2.0):
    """Checks every ``every`` s with the copy running at the throttle; the changes made."""
    changes, t, copied = [], t0, COPIED[0]
    while t <= until:
        c = a.decide(Signals(now=t, copied=copied, receiving=receiving))
        if c:
            changes.append(c)
        copied += int(a.rate * receiving * every)
        t += every
    COPIED[0] = copied
    return changes


def test_it_starts_at_the_minimum_and_rises_while_the_copy_is_held_back():
    a = AutoThrottle(AutoRate(10 * MiB, 40 * MiB))
    assert a.rate == 10 * MiB
    changes = ramp(a, 0.0, 60.0)
    assert [c.after for c in changes] == [15 * MiB, int(22.5 * MiB), int(33.75 * MiB), 40 * MiB]
    assert all(b.reason == "no harm seen, the copy held back by the throttle" for b in changes)
    assert changes[1].before == changes[0].after
    assert changes[0].to_dict()["from"] == 10 * MiB
    assert str(changes[0]) == ("throttle auto: 10.0 MiB/s -> 15.0 MiB/s "
                               "(no harm seen, the copy held back by the throttle)")


def test_no_rise_when_the_copy_is_not_held_back_or_nothing_copies():
    a = AutoThrottle(AutoRate(10 * MiB, 40 * MiB))
    for t in range(0, 60, 2):  # copying a tenth of what the throttle allows: the throttle is not the limit
        assert a.decide(Signals(now=float(t), copied=t * MiB, receiving=1)) is None
    idle = AutoThrottle(AutoRate(10 * MiB, 40 * MiB))
    assert all(idle.decide(Signals(now=float(t), copied=0, receiving=0)) is None for t in range(0, 60, 2))
    # bytes unknown say nothing: no raise on them (the runner's first check comes before its
    # first size read; bench/bench_auto_throttle.py saw a raise earned by nothing)
    unknown = AutoThrottle(AutoRate(10 * MiB, 40 * MiB))
    assert all(unknown.decide(Signals(now=float(t), receiving=1)) is None for t in range(0, 60, 2))
    # known from the second check on: the window starts there, and a slow copy still earns nothing
    late = AutoThrottle(AutoRate(10 * MiB, 40 * MiB))
    assert late.decide(Signals(now=0.0, receiving=1)) is None
    assert all(late.decide(Signals(now=float(t), copied=t * MiB // 20, receiving=1)) is None for t in range(2, 60, 2))


def test_a_destination_that_finished_does_not_make_the_others_look_held_back():
    """Two brokers receive at a quarter of the rate each (the copy is limited elsewhere); one
    finishes: what the rate allowed is counted per interval for the brokers receiving over it,
    so the one left, copying as slowly as before, earns no raise (the benchmark's last raise,
    16.9 -> 25.3 MiB/s a second before the end, came from comparing the bytes of both with the
    allowance of one)."""
    a = AutoThrottle(AutoRate(10 * MiB, 400 * MiB), rate=16 * MiB)
    copied, t = 0, 0.0
    while t <= 40.0:
        receiving = 2 if t < 8 else 1
        assert a.decide(Signals(now=t, copied=copied, receiving=receiving)) is None, t
        copied += int(receiving * 4 * MiB * 2.0)
        t += 2.0


def test_harm_halves_at_once_then_holds_and_caps_the_way_back():
    a = AutoThrottle(AutoRate(10 * MiB, 400 * MiB), rate=160 * MiB)
    assert a.decide(Signals(now=0.0, copied=0, receiving=1)) is None
    cut = a.decide(Signals(now=2.0, harmed=["t-0 lost an in-sync replica (ISR [0] of [0, 1])"], receiving=1))
    assert (cut.before, cut.after) == (160 * MiB, 80 * MiB)
    assert cut.reason == "harm: t-0 lost an in-sync replica (ISR [0] of [0, 1])"
    # still harmed a moment later: the cluster is given STEP_S to show what the cut did
    assert a.decide(Signals(now=4.0, harmed=["t-0 lost an in-sync replica"], receiving=1)) is None
    again = a.decide(Signals(now=2.0 + STEP_S, harmed=["t-0 lost an in-sync replica"], receiving=1))
    assert again.after == 40 * MiB
    last_harm = 2.0 + STEP_S
    # no rise during the hold, then up to 80 % of the rate harm was seen at (80 MiB/s -> 64)
    assert a.decide(Signals(now=last_harm + HOLD_S - 1, receiving=1)) is None
    changes = ramp(a, last_harm + HOLD_S, last_harm + CEILING_S - 10, receiving=1)
    assert [c.after for c in changes] == [60 * MiB, 64 * MiB]
    assert re.fullmatch(r"no harm for \d+ s, the copy held back by the throttle", changes[0].reason)
    # past the ceiling's time: up to the maximum
    later = ramp(a, last_harm + CEILING_S, last_harm + CEILING_S + 200, receiving=1)
    assert later[-1].after == 400 * MiB


def test_harm_at_the_minimum_changes_nothing_and_many_partitions_are_summed_up():
    a = AutoThrottle(AutoRate(10 * MiB, 40 * MiB))
    assert a.decide(Signals(now=0.0, harmed=["a", "b"], receiving=1)) is None
    b = AutoThrottle(AutoRate(1 * MiB, 40 * MiB), rate=8 * MiB)
    c = b.decide(Signals(now=0.0, harmed=[f"t-{i} offline" for i in range(5)], receiving=1))
    assert c.reason == "harm: t-0 offline; t-1 offline; t-2 offline; 2 more partition(s)"


def test_a_resumed_execution_continues_at_its_rate_within_the_bounds():
    assert AutoThrottle(AutoRate(10 * MiB, 40 * MiB), rate=25 * MiB).rate == 25 * MiB
    assert AutoThrottle(AutoRate(10 * MiB, 40 * MiB), rate=99 * MiB).rate == 40 * MiB
    assert AutoThrottle(AutoRate(10 * MiB, 40 * MiB), rate=1).rate == 10 * MiB


def test_the_probe_latency_over_its_baseline_is_harm():
    a = AutoThrottle(AutoRate(10 * MiB, 400 * MiB), rate=100 * MiB)
    t = 0.0
    for ms in (20, 25, 22, 21, 30, 24):  # baseline: the lowest median of 3 (22 ms)
        assert a.decide(Signals(now=t, probe_ms=ms, receiving=0)) is None
        t += 2
    # one slow sample is not a median yet
    assert a.decide(Signals(now=t, probe_ms=80, receiving=0)) is None
    cut = a.decide(Signals(now=t + 2, probe_ms=90, receiving=0))
    assert cut.after == 50 * MiB
    assert cut.reason == "harm: probe latency 80 ms, 3.6x its baseline 22 ms"
    # a fast cluster: 3x a 2 ms baseline is not yet harm (the margin)
    fast = AutoThrottle(AutoRate(10 * MiB, 400 * MiB), rate=100 * MiB)
    for i, ms in enumerate((2, 2, 2, 9, 9, 9)):
        assert fast.decide(Signals(now=2.0 * i, probe_ms=ms, receiving=0)) is None


def test_check_judges_reads_against_the_cluster_as_the_execution_found_it():
    a = AutoThrottle(AutoRate(10 * MiB, 400 * MiB), rate=40 * MiB)
    found = topo(((0, 1, 2), (0, 1), 0), ((1, 2, 3), (1, 2, 3), 1))
    a.start(found)
    # t-0 was already missing a replica: not harm; t-1 being moved: not judged
    assert a.check(topo(((0, 1, 2), (0, 1), 0), ((1, 2, 3), (1,), 1)), {("t", 1)}, now=0.0, copied=0,
                   receiving=1) is None
    cut = a.check(topo(((0, 1, 2), (0,), 0), ((1, 2, 3), (1, 2, 3), 1)), (), now=2.0, copied=0, receiving=1)
    assert cut.after == 20 * MiB and cut.reason == "harm: t-0 lost an in-sync replica (ISR [0] of [0, 1, 2])"
    assert a.changes == [cut]
    assert a.summary() == ("throttle auto: 1 change(s) between 20.0 MiB/s and 20.0 MiB/s, the last to 20.0 MiB/s "
                           "(the journal's events say when and why)")
    never = AutoThrottle(AutoRate(10 * MiB, 400 * MiB))
    assert never.check(found, (), now=0.0, copied=None, receiving=0) is None and never.summary() is None
    assert never.baseline == {("t", 0): 2, ("t", 1): 3}  # no start(): the first read is the baseline


def test_options_journal_the_bounds_and_resume_keeps_or_replaces_them():
    from kops.errors import BadInput
    from kops.ops.reassign.options import ExecuteOptions

    auto = AutoRate(10 * MiB, 40 * MiB)
    opts = ExecuteOptions(**ExecuteOptions.rate(auto), probe_topic="canary")
    assert (opts.throttle, opts.auto_throttle) == (10 * MiB, auto)
    journaled = opts.to_dict() | {"throttle": 25 * MiB}  # the rate auto had reached
    assert journaled["throttle_auto"] == {"min": 10 * MiB, "max": 40 * MiB} and journaled["probe_topic"] == "canary"
    again = ExecuteOptions().with_journal(journaled)  # resume without --throttle: auto, at its last rate
    assert (again.throttle, again.auto_throttle, again.probe_topic) == (25 * MiB, auto, "canary")
    fixed = ExecuteOptions(**ExecuteOptions.rate(5 * MiB)).with_journal(journaled)  # a fixed rate ends auto
    assert (fixed.throttle, fixed.auto_throttle, fixed.probe_topic) == (5 * MiB, None, None)
    wider = ExecuteOptions(**ExecuteOptions.rate(AutoRate(MiB, 400 * MiB))).with_journal(journaled)
    assert (wider.throttle, wider.auto_throttle.hi) == (25 * MiB, 400 * MiB)
    assert ExecuteOptions(throttle=7).with_journal({}).auto_throttle is None
    with pytest.raises(BadInput, match="--throttle auto"):
        ExecuteOptions(throttle=7, probe_topic="canary").check(zookeeper=False)


def test_past_its_window_it_drops_to_the_minimum_and_stays_there_while_closed():
    a = AutoThrottle(AutoRate(10 * MiB, 400 * MiB), rate=160 * MiB)
    assert a.decide(Signals(now=0.0, copied=0, receiving=1)) is None
    closed = "outside the maintenance window (Mon-Fri 01:00-06:00 UTC): the next opens Tue 2026-12-01 01:00 UTC (in 19 h 0 min)"
    drop = a.decide(Signals(now=2.0, copied=0, receiving=1, closed=closed))
    assert (drop.before, drop.after, drop.reason) == (160 * MiB, 10 * MiB, closed)
    # held back or not: no rise while the window is closed
    COPIED[0] = 9 * 200 * MiB
    assert all(a.decide(Signals(now=2.0 + 10 * i, copied=i * 200 * MiB, receiving=1, closed=closed)) is None
               for i in range(1, 10))
    assert [c.after for c in ramp(a, 200.0, 206.0, receiving=1)] == [15 * MiB]  # open again: rises as before
