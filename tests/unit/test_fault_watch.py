"""The fault lab's watch for faults a scenario did not inject (tests/faults/helpers.py): a broker
whose ZooKeeper session expired (registered anew) or a controller election is named ahead of the
scenario's own failure; a cluster that stayed as it was changes nothing."""

from __future__ import annotations

import pytest

from tests.faults import helpers


@pytest.fixture
def epochs(monkeypatch):
    now = {"brokers": {0: 1_000, 1: 1_000, 2: 1_000}, "controller_epoch": 1}
    monkeypatch.setattr(helpers, "cluster_epochs", lambda sb: {"brokers": dict(now["brokers"]),
                                                               "controller_epoch": now["controller_epoch"]})
    monkeypatch.setattr(helpers, "wait_settled", lambda sb, bs: helpers.cluster_epochs(sb))
    return now


def test_a_session_expiry_and_a_controller_election_are_named(epochs):
    before = helpers.cluster_epochs(None)
    assert helpers.unplanned_faults(None, before) == []
    epochs["brokers"][0] = 1_796_070_834_000  # registered anew (20:33:54 UTC)
    del epochs["brokers"][2]
    epochs["controller_epoch"] = 3
    got = helpers.unplanned_faults(None, before)
    assert got == ["broker 0 registered anew at 20:33:54 UTC (its ZooKeeper session expired)",
                   "broker 2 is not registered (its ZooKeeper session expired)",
                   "2 controller election(s) (controller epoch 1 -> 3)"], got


def test_a_failure_on_a_disturbed_cluster_names_the_faults_first(epochs):
    with pytest.raises(AssertionError) as e:
        with helpers.FaultWatch(None, "bs") as watch:
            watch.settle()
            epochs["brokers"][1] = 2_000
            raise AssertionError("[1, 1] != [0, 3]")
    msg = str(e.value)
    assert msg.startswith("the cluster had faults this scenario did not inject: broker 1 registered anew"), msg
    assert "[1, 1] != [0, 3]" in msg
    assert isinstance(e.value.__cause__, AssertionError)


def test_a_failure_on_a_quiet_cluster_is_left_as_it_is(epochs):
    with pytest.raises(AssertionError, match=r"^\[1, 1\] != \[0, 3\]$"):
        with helpers.FaultWatch(None, "bs") as watch:
            watch.settle()
            raise AssertionError("[1, 1] != [0, 3]")
    with pytest.raises(ValueError, match="before the baseline"):  # nothing settled yet: nothing to compare
        with helpers.FaultWatch(None, "bs"):
            epochs["controller_epoch"] = 9
            raise ValueError("before the baseline")


def test_a_passing_scenario_reports_what_happened_without_failing(epochs):
    with helpers.FaultWatch(None, "bs") as watch:
        watch.settle()
        epochs["controller_epoch"] = 2
        assert watch.faults() == ["1 controller election(s) (controller epoch 1 -> 2)"]
