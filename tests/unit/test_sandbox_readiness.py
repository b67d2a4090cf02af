"""A dynamic quorum's controllers agreeing on a leader, read from their server.logs (the lines are
Kafka 3.9.2's and 4.4.0's own, cut short)."""

from __future__ import annotations

import time

from kops.sandbox.readiness import lagging_brokers, quorum_agreement, raft_state, since_launch, startup_complete, view_agrees

LEADER_1000 = ("[2026-11-30 00:30:40,730] INFO [RaftManager id=1000] Completed transition to Leader(localReplicaKey="
               "ReplicaKey(id=1000, directoryId=Optional[yChhQiQWQxeuo35a3xEsZg]), epoch=4, epochStartOffset=0, "
               "highWatermark=Optional.empty, voterStates={1000=ReplicaState(replicaKey=ReplicaKey(id=1000, ")
LEADER_1001_E3 = ("[2026-11-30 00:30:39,392] INFO [RaftManager id=1001] Completed transition to Leader(localReplicaKey="
                  "ReplicaKey(id=1001, directoryId=Optional[iNNNmQhuQii6-LC8fu0FWg]), epoch=3, epochStartOffset=0, "
                  "highWatermark=Optional.empty) from CandidateState(localId=1001, epoch=3, retries=1)")
RESIGNED_1001 = ("[2026-11-30 00:30:41,089] INFO [RaftManager id=1001] Completed transition to Unattached(epoch=4, "
                 "votedKey=null, voters=[1000, 1001, 1002], electionTimeoutMs=1191, highWatermark=Optional.empty) from "
                 "Leader(localReplicaKey=ReplicaKey(id=1001, directoryId=Optional[iNNNmQhuQii6-LC8fu0FWg]), epoch=3, ")
FOLLOWER = ("[2026-11-30 00:30:41,445] INFO [RaftManager id={id}] Completed transition to FollowerState(fetchTimeoutMs="
            "2000, epoch={epoch}, leader={leader}, leaderEndpoints=Endpoints(endpoints={{ListenerName(CONTROLLER)="
            "127.0.0.1/<unresolved>:9192}}), voters=[1000, 1001, 1002], highWatermark=Optional.empty) from Unattached("
            "epoch=4, votedKey=null, voters=[1000, 1001, 1002], electionTimeoutMs=1191)")


def test_the_last_transition_is_the_state_and_its_own_epoch_not_the_previous_one():
    assert raft_state([LEADER_1000]) == ("Leader", 4, 1000)
    assert raft_state([LEADER_1001_E3, RESIGNED_1001]) == ("Unattached", 4, None)  # not the "from Leader(epoch=3"
    assert raft_state([RESIGNED_1001, FOLLOWER.format(id=1001, epoch=4, leader=1000)]) == ("FollowerState", 4, 1000)
    assert raft_state(["[2026-11-30 00:30:35,447] INFO [RaftManager id=1000] Starting"]) is None


def test_agreement_needs_one_leader_and_every_other_controller_following_it_at_its_epoch():
    """The failure seen: 1001 led epoch 3 while 1000 and 1002 had not heard of it, then 1000 won
    epoch 4 -- a broker started in between took 1001 for the controller for good."""
    f = lambda c, e=4, lead=1000: ("FollowerState", e, lead)  # noqa: E731
    assert quorum_agreement({1000: ("Leader", 4, 1000), 1001: f(1001), 1002: f(1002)}) == 1000
    assert quorum_agreement({1000: ("Leader", 4, 1000), 1001: ("Unattached", 4, None), 1002: f(1002)}) is None
    assert quorum_agreement({1000: ("CandidateState", 4, None), 1001: ("Leader", 3, 1001), 1002: None}) is None
    assert quorum_agreement({1000: ("Leader", 4, 1000), 1001: f(1001, 3, 1001), 1002: f(1002)}) is None  # an old epoch
    assert quorum_agreement({1000: ("Leader", 4, 1000), 1001: ("Leader", 3, 1001), 1002: f(1002)}) is None
    assert quorum_agreement({1000: ("Leader", 1, 1000)}) == 1000  # a quorum of one


class _State:
    """What since_launch reads of a sandbox's state: the node's launch record and log dir."""

    def __init__(self, log_dir, launched_s, offset):
        self.procs = {"controller-1000": {"launched_ms": int(launched_s * 1000), "log_offset": offset}}
        self.config = type("C", (), {"log_dir": staticmethod(lambda _n: log_dir)})()

    @staticmethod
    def key(_node):
        return "controller-1000"


def test_only_lines_logged_since_the_launch_count(tmp_path):
    """A restarted controller's server.log still ends with its previous run's state: that run's
    lines (before the launch's offset, or older than the launch) are not read as the present."""
    now = time.time()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now)) + ",000"
    old = LEADER_1000.replace("epoch=4", "epoch=2")
    new = FOLLOWER.format(id=1000, epoch=5, leader=1001).replace("2026-11-30 00:30:41,445", stamp)
    log = tmp_path / "server.log"
    log.write_text(old + "\n")
    st = _State(tmp_path, now - 1, log.stat().st_size)
    assert since_launch(st, 1000, "Completed transition to") == []
    assert raft_state(since_launch(st, 1000, "Completed transition to")) is None
    with open(log, "a") as fh:
        fh.write(new + "\n")
    assert raft_state(since_launch(st, 1000, "Completed transition to")) == ("FollowerState", 5, 1001)
    assert startup_complete(st, 1000, "leader=1001") and not startup_complete(st, 1000, "epoch=2")


def test_a_broker_whose_own_metadata_is_still_empty_is_not_ready_though_another_broker_names_it():
    """CI (test_security's fixture): broker 0, the controller, already named all three brokers;
    brokers 1 and 2 still answered from an empty metadata cache (no broker, controller -1) and a
    client that bootstrapped from one of them waited for a controller until it timed out."""
    every = {0, 1, 2}
    views = {0: (every, 0), 1: (set(), None), 2: (set(), None)}
    assert lagging_brokers(views, present=every, absent=set()) == [1, 2]
    views[1] = (every, 0)
    assert lagging_brokers(views, present=every, absent=set()) == [2]
    views[2] = ({0, 1, 2}, None)  # every broker but no controller yet
    assert lagging_brokers(views, present=every, absent=set()) == [2]
    assert lagging_brokers(views, present=every, absent=set(), controller=False) == []
    views[2] = (every, 0)
    assert lagging_brokers(views, present=every, absent=set()) == []


def test_a_broker_that_still_names_a_stopped_broker_or_its_controller_lags():
    views = {0: ({0, 2}, 0), 2: ({0, 1, 2}, 0)}
    assert lagging_brokers(views, present=set(), absent={1}) == [2]
    assert lagging_brokers({0: ({0, 2}, 1)}, present=set(), absent={1}) == [0]
    assert view_agrees({0, 2}, 0, present={0, 2}, absent={1})
