"""The log-dir tracker (kops.ops.reassign.log_dirs): AlterReplicaLogDirs sent until a broker
accepts it, and again when a replica is found in another dir; a broker without the dir is final
(DescribeLogDirs and AlterReplicaLogDirs stood in)."""

from __future__ import annotations

from kops.ops.move import Move
from kops.ops.reassign.log_dirs import LogDirMoves
from kops.ops.reassign.status import LOG_DIR_DONE, LOG_DIR_ELSEWHERE, LOG_DIR_MOVING, LOG_DIR_WAITING
from tests.unit.engine_fakes import Heard

D1, D2 = "/data/d1", "/data/d2"
K = ("t", 0, 1)  # the replica of t-0 on broker 1
M = Move("t", 0, (1, 2), (1, 2), log_dirs=(D2, "any"), size_bytes=10)  # a log-dir move only


class Cluster:
    """DescribeLogDirs answers ``dirs`` (None: unanswered); AlterReplicaLogDirs ``errors``."""

    def __init__(self, dirs=None, errors=None):
        self.dirs, self.errors = dirs, errors or {}
        self.described: list[tuple[list[int], list[str]]] = []
        self.sent: list[dict] = []

    def describe(self, brokers, topics):
        self.described.append((brokers, topics))
        return self.dirs

    def alter(self, requests):
        self.sent.append(dict(requests))
        return {k: self.errors.get(k) for k in requests}


def _tracker(cluster):
    return LogDirMoves(cluster.describe, cluster.alter)


def test_a_request_is_sent_until_accepted_and_the_move_followed_until_done():
    c = Cluster({K: {"dir": D1, "future": None}})
    t, heard = _tracker(c), Heard()
    t.read([M], set())
    assert t.states(M) == {1: LOG_DIR_ELSEWHERE} and c.described == [([1], ["t"])]
    t.drive([M], heard)
    assert c.sent == [{K: D2}]
    assert heard.said == [("event", "log dir move started: t-0 on broker 1 -> /data/d2")]
    c.dirs = {K: {"dir": D1, "future": D2}}  # the future replica catches up
    t.read([M], set())
    t.drive([M], heard)
    assert t.states(M) == {1: LOG_DIR_MOVING} and len(c.sent) == 1  # moving: not sent again
    c.dirs = {K: {"dir": D2, "future": None}}
    t.read([M], set())
    t.drive([M], heard)
    assert t.states(M) == {1: LOG_DIR_DONE} and len(c.sent) == 1 and t.failed(M) == []
    assert len(heard.said) == 1  # the start is journaled once


def test_a_replica_found_in_another_dir_is_sent_again():
    """A broker restarted before the move began forgets the request: the replica sits in its
    old dir with nothing moving it."""
    c = Cluster({K: {"dir": D1, "future": None}})
    t, heard = _tracker(c), Heard()
    t.read([M], set())
    t.drive([M], heard)
    t.read([M], set())
    t.drive([M], heard)
    assert c.sent == [{K: D2}, {K: D2}] and len(heard.said) == 1


def test_a_replica_not_there_yet_is_asked_for_once_the_broker_accepts():
    """Until the reassignment has created the replica the broker may refuse; a request it
    accepted is remembered by it (no second request while the replica is waiting)."""
    c = Cluster({}, errors={K: "ReplicaNotAvailableError"})
    t, heard = _tracker(c), Heard()
    t.read([M], set())
    assert t.states(M) == {1: LOG_DIR_WAITING}
    t.drive([M], heard)
    t.drive([M], heard)
    assert len(c.sent) == 2 and heard.said == []  # refused: sent again
    c.errors = {}
    t.drive([M], heard)
    t.drive([M], heard)
    assert len(c.sent) == 3 and len(heard.said) == 1  # accepted: not again while waiting


def test_a_broker_without_the_dir_is_final():
    c = Cluster({K: {"dir": D1, "future": None}}, errors={K: "LogDirNotFoundError"})
    t, heard = _tracker(c), Heard()
    t.read([M], set())
    t.drive([M], heard)
    assert heard.said == [("note", "t-0: broker 1 has no log dir /data/d2 (LogDirNotFoundError)")]
    assert t.failed(M) == ["1 (broker has no log dir /data/d2: LogDirNotFoundError)"]
    t.drive([M], heard)
    assert len(c.sent) == 1  # never sent again


def test_dirs_are_read_only_for_moves_at_their_target_and_forgotten_when_they_end():
    c = Cluster({K: {"dir": D2, "future": None}})
    t = _tracker(c)
    t.read([M], {M.tp})  # still reassigning: its replicas are not all there
    assert c.described == [] and t.states(M) is None
    plain = Move("t", 1, (1, 2), (1, 3), size_bytes=10)
    t.read([plain], set())  # no log dirs asked: nothing to read
    assert c.described == []
    t.read([M], set())
    assert t.states(M) == {1: LOG_DIR_DONE}
    t.read([], set())  # no longer in flight
    assert t.states(M) is None
    c.dirs = None  # the brokers could not be asked: nothing counts as done
    t.read([M], set())
    assert t.states(M) == {1: LOG_DIR_WAITING}
