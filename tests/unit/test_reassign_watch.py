"""``reassign list --watch``: each broker's in/out rate from two samples of the new replicas' sizes."""

from __future__ import annotations

from kops.ops.reassign.watch import Flow, FlowSample, broker_flows


def test_growth_comes_into_the_destination_and_out_of_the_leader():
    before = FlowSample(10.0, {("t", 0, 3): 1_000, ("t", 1, 4): 0, ("t", 1, 5): 500}, {("t", 0): 0, ("t", 1): 1})
    now = FlowSample(12.0, {("t", 0, 3): 5_000, ("t", 1, 4): 2_000, ("t", 1, 5): 500}, {("t", 0): 0, ("t", 1): 1})
    assert broker_flows(before, now) == {
        0: Flow(0.0, 2_000.0),  # leader of t-0: 4,000 bytes in 2 s went out of it
        1: Flow(0.0, 1_000.0),  # leader of t-1: 2,000 to broker 4, nothing to broker 5
        3: Flow(2_000.0, 0.0),
        4: Flow(1_000.0, 0.0),
    }


def test_moves_that_started_ended_or_shrank_in_between_count_nothing():
    before = FlowSample(0.0, {("t", 0, 3): 9_000, ("t", 1, 4): 7_000}, {("t", 0): 0, ("t", 1): 1})
    now = FlowSample(5.0, {("t", 1, 4): 100, ("t", 2, 5): 4_000}, {("t", 1): 1, ("t", 2): 2})
    assert broker_flows(before, now) == {}
    # an offline partition: what its new replica received is counted in, no leader sent it
    assert broker_flows(FlowSample(0.0, {("t", 0, 3): 0}, {("t", 0): None}),
                        FlowSample(1.0, {("t", 0, 3): 10}, {("t", 0): None})) == {3: Flow(10.0, 0.0)}


def test_no_time_between_samples_is_no_rate():
    s = FlowSample(3.0, {("t", 0, 3): 1}, {("t", 0): 0})
    assert broker_flows(s, s) == {}
