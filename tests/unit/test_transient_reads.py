"""A read that times out after the cluster has answered is sent again; an unreachable cluster
fails after one timeout (DESIGN: bounded, never a hang)."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from kops.cluster import connection, topology
from kops.cluster.config import ClientConfig
from kops.cluster.connection import Connection
from kops.errors import ClusterError, ClusterTimeout


def _conn() -> Connection:
    return Connection("127.0.0.1:1", ClientConfig(), None, 0.1)


def _done(value) -> Future:
    f: Future = Future()
    f.set_result(value)
    return f


def test_timeout_before_any_answer_is_unreachable_then_a_slow_broker():
    c = _conn()
    with pytest.raises(ClusterError) as e:
        c.wait(Future(), "describe cluster")
    assert type(e.value) is ClusterError and "no answer from the cluster" in e.value.message
    assert c.wait(_done("ok"), "describe cluster") == "ok"
    with pytest.raises(ClusterTimeout, match="describe configs of topic t: no answer"):
        c.wait(Future(), "describe configs of topic t")


def test_librdkafka_timed_out_after_an_answer_is_a_timeout():
    from confluent_kafka import KafkaError, KafkaException

    c = _conn()
    timed_out = KafkaException(KafkaError(KafkaError._TIMED_OUT, "Failed while waiting for response from broker"))
    f: Future = Future()
    f.set_exception(timed_out)
    with pytest.raises(ClusterError) as e:
        c.wait(f, "describe configs of topic t")
    assert type(e.value) is ClusterError and "cannot reach the cluster" in e.value.message
    c.wait(_done(1), "describe cluster")
    with pytest.raises(ClusterTimeout, match="cannot reach the cluster"):
        c.wait(f, "describe configs of topic t")
    assert type(c.map_error(timed_out, "read metadata")) is ClusterTimeout
    other = KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART, "x"))
    assert type(c.map_error(other, "describe topic t")) is ClusterError


def _flaky(monkeypatch, outcomes):
    calls = []

    def fake(conn, opts):
        calls.append(1)
        out = outcomes[min(len(calls), len(outcomes)) - 1]
        if isinstance(out, Exception):
            raise out
        return out

    monkeypatch.setattr(topology, "_read_topology", fake)
    return calls


def test_read_topology_sends_a_timed_out_read_again(monkeypatch):
    calls = _flaky(monkeypatch, [ClusterTimeout("x: no answer"), ClusterTimeout("x: no answer"), "topology"])
    c = _conn()
    seen = []
    real = topology._read_topology

    def spy(conn, opts):
        seen.append((conn.timeout_s, conn._admin))
        return real(conn, opts)

    monkeypatch.setattr(topology, "_read_topology", spy)
    c._admin = "client 1"
    assert topology.read_topology(c) == "topology"
    assert len(calls) == topology.READ_ATTEMPTS == 3
    # each attempt by a new client, with twice the time to answer; the timeout is restored
    assert seen == [(0.1, "client 1"), (0.2, None), (0.4, None)] and c.timeout_s == 0.1


def test_read_topology_gives_up_after_its_attempts(monkeypatch):
    calls = _flaky(monkeypatch, [ClusterTimeout("describe configs of topic t: no answer")])
    with pytest.raises(ClusterTimeout, match="describe configs of topic t"):
        topology.read_topology(_conn())
    assert len(calls) == topology.READ_ATTEMPTS


def test_read_topology_does_not_repeat_other_errors(monkeypatch):
    calls = _flaky(monkeypatch, [ClusterError("describe cluster: no answer from the cluster")])
    with pytest.raises(ClusterError):
        topology.read_topology(_conn())
    assert len(calls) == 1


def test_an_unanswered_election_is_sent_again_by_a_new_client(monkeypatch):
    """ElectLeaders is safe to repeat: a batch whose request got no answer is sent once more by
    a new confluent-kafka client; a second silence fails the run, naming the batch."""
    from kops.ops import elections

    monkeypatch.setattr(elections, "ELECTION_WAIT_S", 0.2)
    c = _conn()
    c.wait(_done(1), "describe cluster")  # the cluster had answered
    clients = []

    class Admin:
        def __init__(self, answer):
            self.answer = answer
            clients.append(self)

        def poll(self, _timeout):
            return 0

        def elect_leaders(self, etype, batch):
            if self.answer == "not needed":
                from confluent_kafka import KafkaError, KafkaException

                return _done({tp: KafkaException(KafkaError(KafkaError.ELECTION_NOT_NEEDED)) for tp in batch})
            return _done({tp: None for tp in batch}) if self.answer else Future()

    answers = iter([False, True])
    monkeypatch.setattr(c, "admin", lambda: c._admin or setattr(c, "_admin", Admin(next(answers))) or c._admin)
    res = elections.run_elections(c, "preferred", [("t", 0), ("t", 1)])
    assert [o.status for o in res.outcomes] == [elections.ELECTED] * 2 and len(clients) == 2
    # the request sent again is on record: its answer can hide what the first one did
    assert len(res.resent) == 1 and "no answer" in res.resent[0] and "sent again" in res.resent[0]
    assert res.to_dict()["resent"] == res.resent

    # the first request elected both, its answer was lost: the second is answered "not needed"
    answers = iter([False, "not needed"])
    c._admin = None
    res = elections.run_elections(c, "preferred", [("t", 0)])
    assert [o.status for o in res.outcomes] == [elections.NOT_NEEDED]
    assert "its first request may have elected it" in res.outcomes[0].reason
    # ... unless the caller read, before the first request, that it was not led as asked: then
    # the first request elected it
    answers = iter([False, "not needed"])
    c._admin = None
    res = elections.run_elections(c, "preferred", [("t", 0), ("t", 1)], needed={("t", 0)})
    assert [o.status for o in res.outcomes] == [elections.ELECTED, elections.NOT_NEEDED]
    assert res.outcomes[0].reason.startswith("elected by the first request: its answer was lost")
    assert res.counts() == {"elected": 1, "not_needed": 1, "failed": 0}
    c._admin = None
    answers = iter(["not needed"])
    quiet = elections.run_elections(c, "preferred", [("t", 0)])
    assert quiet.resent == [] and "resent" not in quiet.to_dict()
    assert quiet.outcomes[0].reason == "valid replica already elected"

    answers = iter([False, False])
    c._admin = None
    with pytest.raises(ClusterTimeout, match=r"preferred leader election \(batch 1/1\): no answer") as e:
        elections.run_elections(c, "preferred", [("t", 0)])
    assert "batches done before the failure: 0/1" in e.value.details[-1]


class _Admin:
    """list_topics answers from a script: an exception to raise or a value to return."""

    def __init__(self, outcomes):
        self.outcomes, self.calls = list(outcomes), []

    def list_topics(self, *args, timeout=None):
        self.calls.append(args)
        out = self.outcomes.pop(0)
        if isinstance(out, Exception):
            raise out
        return out

    def poll(self, timeout):  # serves error callbacks: there are none here
        return 0


def test_partial_metadata_from_a_just_started_broker_is_asked_again(monkeypatch):
    """CI: a replace-broker playbook died on librdkafka's `_PARTIAL` ("Partial response") right
    after a broker was added: the cluster answered, in part; asking again gets all of it."""
    from confluent_kafka import KafkaError, KafkaException

    monkeypatch.setattr("tenacity.nap.time.sleep", lambda s: None)
    partial = KafkaException(KafkaError(KafkaError._PARTIAL, "Failed to get metadata: Local: Partial response"))
    c = _conn()
    assert type(c.map_error(partial, "read metadata")) is ClusterTimeout
    c = _conn()
    c._admin = _Admin([partial, partial, "md"])
    assert c.metadata("t") == "md" and c._admin.calls == [("t",)] * 3
    c._admin = _Admin([partial] * 3 + ["md"])
    with pytest.raises(ClusterTimeout, match="look for x: .*Partial response"):
        c.metadata(what="look for x")


def test_metadata_of_an_unreachable_cluster_fails_at_once():
    from confluent_kafka import KafkaError, KafkaException

    c = _conn()
    c._admin = _Admin([KafkaException(KafkaError(KafkaError._TRANSPORT, "down")), "md"])
    with pytest.raises(ClusterError) as e:
        c.metadata()
    assert type(e.value) is ClusterError and len(c._admin.calls) == 1


class _KpAdmin:
    """kafka-python's describe_cluster answering from a script: an exception or an answer."""

    def __init__(self, outcomes):
        self.outcomes, self.calls = list(outcomes), 0

    def describe_cluster(self):
        self.calls += 1
        out = self.outcomes.pop(0) if len(self.outcomes) > 1 else self.outcomes[0]
        if isinstance(out, Exception):
            raise out
        return out


def _broker(i, rack=None, **kw):
    return {"broker_id": i, "host": "127.0.0.1", "port": 9092 + i, "rack": rack, **kw}


def _kp_conn(monkeypatch, outcomes, timeout_s=0.1, admin=None):
    """A connection whose kafka-python client is ``admin(outcomes)`` (a :class:`_KpAdmin` by
    default), its waits between two questions shortened."""
    monkeypatch.setattr("kops.cluster.connection.DESCRIBE_CLUSTER_RETRY_S", 0.01)
    monkeypatch.setattr("kops.cluster.connection.CONTROLLER_RETRY_S", 0.01)
    c = Connection("127.0.0.1:1", ClientConfig(), None, timeout_s)
    kp = (admin or _KpAdmin)(outcomes)
    c._kp_admin = kp
    return c, kp


def test_describe_cluster_asks_again_while_a_just_started_broker_names_no_broker(monkeypatch):
    """A broker that has just started answers from an empty metadata cache (no broker, controller
    -1): asked again; the whole answer comes back by id, fenced brokers left out."""
    empty = {"cluster_id": "c1", "controller_id": -1, "brokers": []}
    whole = {"cluster_id": "c1", "controller_id": 2,
             "brokers": [_broker(2, "b"), _broker(0, "a"), _broker(1, "a", is_fenced=True)]}
    c, kp = _kp_conn(monkeypatch, [empty, empty, whole], timeout_s=5)
    d = c.describe_cluster()
    assert kp.calls == 3
    assert d.cluster_id == "c1" and d.controller_id == 2
    assert [(n.id, n.rack, n.port) for n in d.nodes] == [(0, "a", 9092), (2, "b", 9094)]


def test_describe_cluster_that_never_names_a_broker_times_out(monkeypatch):
    c, kp = _kp_conn(monkeypatch, [{"cluster_id": None, "controller_id": -1, "brokers": []}])
    with pytest.raises(ClusterTimeout, match="describe cluster: .*named no live broker"):
        c.describe_cluster()
    assert kp.calls >= 2


def test_describe_cluster_retries_a_dropped_connection_not_a_refusal(monkeypatch):
    from kafka import errors as ke

    whole = {"cluster_id": "c1", "controller_id": 0, "brokers": [_broker(0)]}
    c, kp = _kp_conn(monkeypatch, [ke.KafkaConnectionError("reset"), ke.NodeNotReadyError(0), whole], timeout_s=5)
    assert [n.id for n in c.describe_cluster().nodes] == [0] and kp.calls == 3
    c, kp = _kp_conn(monkeypatch, [ke.ClusterAuthorizationFailedError("no"), whole], timeout_s=5)
    with pytest.raises(ClusterError, match="describe cluster: not authorized"):
        c.describe_cluster()
    assert kp.calls == 1


def _failed(exc) -> Future:
    f: Future = Future()
    f.set_exception(exc)
    return f


def test_a_controller_request_answered_not_controller_goes_again_through_a_new_client(monkeypatch):
    """librdkafka sends CreateTopics / DeleteTopics / ElectLeaders to the controller it knows and
    surfaces NOT_CONTROLLER when that broker lost the role; a new client finds the new one."""
    from confluent_kafka import KafkaError, KafkaException

    from kops.cluster.connection import CONTROLLER_ATTEMPTS, ControllerMoved

    monkeypatch.setattr("tenacity.nap.time.sleep", lambda s: None)
    moved = KafkaException(KafkaError(KafkaError.NOT_CONTROLLER, "Broker: Not controller for cluster"))
    c = _conn()
    clients = iter(range(100))
    c.admin = lambda: next(clients)  # each renew_admin() makes admin() return a new client
    renewed = []
    monkeypatch.setattr(c, "renew_admin", lambda: renewed.append(1))
    sent = []

    def send(admin):
        sent.append(admin)
        return _failed(moved) if len(sent) < 3 else _done("created")

    assert c.to_controller(send, "create topic t") == "created"
    assert len(sent) == 3 and len(renewed) == 2
    sent.clear()
    with pytest.raises(ControllerMoved, match="create topic t: NOT_CONTROLLER.*the controller moved"):
        c.to_controller(lambda admin: sent.append(admin) or _failed(moved), "create topic t")
    assert len(sent) == CONTROLLER_ATTEMPTS
    # any other error is not sent again
    sent.clear()
    other = KafkaException(KafkaError(KafkaError.TOPIC_ALREADY_EXISTS, "exists"))
    with pytest.raises(ClusterError, match="TOPIC_ALREADY_EXISTS"):
        c.to_controller(lambda admin: sent.append(admin) or _failed(other), "create topic t")
    assert len(sent) == 1


def test_read_topology_does_not_nest_the_metadata_retries(monkeypatch):
    """A cut-off host: every metadata request times out. Each of read_topology's attempts sends
    it once (not 3 x 3 requests, each with its timeout: minutes per tick on a gone cluster)."""
    monkeypatch.setattr("tenacity.nap.time.sleep", lambda s: None)
    c = _conn()
    c._answered = True
    c._admin = _Admin([ClusterTimeout(f"read metadata: no answer {i}") for i in range(20)])
    monkeypatch.setattr(c, "renew_admin", lambda: None)  # keep the scripted client
    with pytest.raises(ClusterTimeout):
        topology.read_topology(c)
    assert len(c._admin.calls) == topology.READ_ATTEMPTS
    # outside read_topology, metadata keeps its own attempts
    c._admin = _Admin([ClusterTimeout(f"read metadata: no answer {i}") for i in range(20)])
    with pytest.raises(ClusterTimeout):
        c.metadata()
    assert len(c._admin.calls) == connection.METADATA_ATTEMPTS


def test_a_deadline_bounds_every_wait_and_stops_the_retries(monkeypatch):
    """bounded_by(deadline): a run's --timeout ends a read the cluster never answers at the
    deadline, and nothing is sent again past it."""
    import time

    c = _conn()
    c.timeout_s = 30.0
    c._answered = True
    t0 = time.monotonic()
    with c.bounded_by(t0 + 0.3):
        with pytest.raises(ClusterTimeout, match="no answer from the cluster at .* before the run.s --timeout"):
            c.wait(Future(), "describe configs of topic t")
        assert time.monotonic() - t0 < 2 and c.past_deadline()
        with c.bounded_by(t0 + 60):  # a later bound inside keeps the earlier one
            assert c.past_deadline()
        c._admin = _Admin([ClusterTimeout("read metadata: no answer")] * 5)
        with pytest.raises(ClusterTimeout):
            c.metadata()
        assert len(c._admin.calls) == 1  # past the deadline: not sent again
    assert not c.past_deadline() and c._deadline is None
    with c.bounded_by(None):
        assert not c.past_deadline()


class _ControllerAdmin:
    """kafka-python's admin client sending controller-bound requests from a script: each call
    raises the next exception or returns the answer; ``_controller_id`` is its cached controller."""

    def __init__(self, outcomes):
        self.outcomes, self.calls, self._controller_id, self.forgotten = list(outcomes), 0, 3, 0

    def ask(self):
        self.calls += 1
        if self._controller_id is None:
            self.forgotten += 1
            self._controller_id = 4
        out = self.outcomes.pop(0) if len(self.outcomes) > 1 else self.outcomes[0]
        if isinstance(out, BaseException):
            raise out
        return out


def _controller_conn(monkeypatch, outcomes, timeout_s=5.0):
    return _kp_conn(monkeypatch, outcomes, timeout_s, admin=_ControllerAdmin)


def test_a_controller_request_waits_through_a_controller_election(monkeypatch):
    """CI, stop 69: a cron heal step's ListPartitionReassignments during a ZooKeeper-mode
    controller election (22 s on a loaded host) got NOT_CONTROLLER twice (the brokers' metadata
    still named the old controller): kafka-python's "Failed to find active controller id!" ended
    the step. kops forgets the controller and asks again until a controller answers."""
    from kafka import errors as ke

    election = [RuntimeError("Failed to find active controller id!"), ke.NodeNotReadyError("controller"),
                ke.KafkaConnectionError("reset"), RuntimeError("Failed to find active controller id!")]
    c, kp = _controller_conn(monkeypatch, [*election, {"t-0": "ongoing"}])
    assert c.kp_controller(lambda a: a.ask(), "list partition reassignments") == {"t-0": "ongoing"}
    assert kp.calls == 5 and kp.forgotten == 4


def test_a_controller_that_never_shows_ends_in_a_timeout_naming_the_request(monkeypatch):
    c, kp = _controller_conn(monkeypatch, [RuntimeError("Failed to find active controller id!")], timeout_s=0.1)
    with pytest.raises(ClusterTimeout, match="list partition reassignments: no broker answered as the controller "
                                             "within 0 s .*Failed to find active controller id!"):
        c.kp_controller(lambda a: a.ask(), "list partition reassignments")
    assert kp.calls >= 2


def test_a_controller_request_is_not_sent_again_on_other_errors(monkeypatch):
    """Another RuntimeError, or an answer the controller gave (a timeout, a refusal): the caller's."""
    from kafka import errors as ke

    for err in (RuntimeError("something else"), ke.RequestTimedOutError("slow"),
                ke.ClusterAuthorizationFailedError("no")):
        c, kp = _controller_conn(monkeypatch, [err, {"never": "asked"}])
        with pytest.raises(type(err)):
            c.kp_controller(lambda a: a.ask())
        assert kp.calls == 1
