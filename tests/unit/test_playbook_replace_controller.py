"""The replace-controller playbook (KIP-853): its file and parameters validated, the dry run on a
snapshot naming every step and hook with its parameters, and the pure parts of its checks --
when a replacement may start, when an observer or voter counts as caught up, when the old
controller may be removed, which brokers a removal would strand -- and the sandbox's dynamic
quorum settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kops.cli.main import app
from kops.cluster.raft_voters import parse_servers, stranded_brokers
from kops.errors import BadInput
from kops.model import Quorum, QuorumReplica
from kops.playbook import quorum as pq
from kops.playbook.library import find
from kops.playbook.spec import bind_params, parse_playbook

DATA = Path(__file__).parent / "data"
runner = CliRunner()
PARAMS = {"old_controller": "1000", "new_controller": "1003", "new_controller_endpoint": "ctrl4.example:9093",
          "controller_command": "provision-controller 1003 ctrl4.example:9093",
          "deprovision_command": "retire-controller 1000"}


def _q(leader=1000, hw=100, voters=((1000, 100), (1001, 100), (1002, 100)), observers=((0, 100),)) -> Quorum:
    return Quorum(leader=leader, epoch=3, high_watermark=hw,
                  voters=tuple(QuorumReplica(i, leo, directory_id=f"dir-{i}") for i, leo in voters),
                  observers=tuple(QuorumReplica(i, leo, directory_id=f"dir-{i}") for i, leo in observers))


def test_the_playbook_validates_and_names_what_it_needs():
    pb = find("replace-controller")
    assert all(p.help for p in pb.params.values())
    assert [s.type for s in pb.steps] == ["quorum_check", "shell", "wait_for", "add_voter", "wait_for",
                                          "remove_voter", "shell", "wait_for"]
    with pytest.raises(BadInput) as e:
        bind_params(pb, {"old_controller": "1000"})
    assert all(k in "\n".join([e.value.message, *e.value.details])
               for k in ("new_controller", "controller_command", "deprovision_command"))
    bound = bind_params(pb, PARAMS)
    assert bound["min_voters"] == 3 and bound["max_lag"] == 10 and bound["old_controller"] == 1000


def test_the_dry_run_shows_every_step_and_hook_with_its_parameters(tmp_path, monkeypatch):
    monkeypatch.setenv("KOPS_HOME", str(tmp_path))
    args = ["playbook", "run", "replace-controller", "--dry-run", "--topology", str(DATA / "topo6.json"),
            "--output", "json"]
    for k, v in PARAMS.items():
        args += ["--param", f"{k}={v}"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.stderr
    by = {s["id"]: s["summary"] for s in json.loads(r.stdout)["steps"]}
    assert list(by) == ["preflight", "provision", "observer", "add", "voter", "remove", "deprovision", "verify"]
    assert "would run: provision-controller 1003 ctrl4.example:9093" == by["provision"]
    assert by["deprovision"] == "would run: retire-controller 1000"
    assert "would add controller 1003 (CONTROLLER://ctrl4.example:9093)" in by["add"]
    assert "would remove controller 1000" in by["remove"]
    assert "quorum_observer" in by["observer"] and "quorum_replaced" in by["verify"]


@pytest.mark.parametrize(("step", "problem"), [
    ("  - {id: w, type: wait_for, condition: quorum_voter, timeout: 1m}", "condition quorum_voter needs 'controller'"),
    ("  - {id: w, type: wait_for, condition: quorum_replaced, controller: 1, timeout: 1m}",
     "'old_controller' goes with condition quorum_replaced"),
    ("  - {id: w, type: wait_for, condition: healthy, old_controller: 1, timeout: 1m}",
     "'old_controller' goes with condition quorum_replaced"),
    ("  - {id: a, type: add_voter, controller: 1003}", "a add_voter step needs 'endpoint'"),
    ("  - {id: r, type: remove_voter, controller: -1}", "field 'controller'"),
    ("  - {id: r, type: remove_voter, controller: 1, min_voters: 0}", "field 'min_voters'"),
])
def test_bad_steps_are_refused_with_their_line(step, problem):
    with pytest.raises(BadInput) as e:
        parse_playbook(f"name: x\nsteps:\n{step}\n", source="x.yaml")
    text = "\n".join([e.value.message, *e.value.details])
    assert problem in text and "x.yaml:3" in text, text


def test_a_replacement_starts_only_on_a_healthy_dynamic_kraft_quorum():
    q = _q()
    assert pq.replace_problems("kraft", None, q, 1000, 1003, 3, 0, {0, 1, 2}) == []
    assert "only a KRaft cluster" in pq.replace_problems("zookeeper", None, None, 1000, 1003, 3, 0, set())[0]
    assert pq.replace_problems("kraft", "static quorum", q, 1000, 1003, 3, 0, set()) == ["static quorum"]
    problems = "\n".join(pq.replace_problems("kraft", None, _q(voters=((1000, 100), (1001, 40), (1002, 100))),
                                             1005, 2, 3, 10, {0, 1, 2}))
    assert "controller 1005 is not a voter" in problems and "id 2 is a broker's" in problems
    assert "1001 (60 records behind the high watermark 100)" in problems
    small = pq.replace_problems("kraft", None, _q(voters=((1000, 100),)), 1000, 1003, 3, 0, set())
    assert small and "fewer than min_voters 3" in small[0] and "-p min_voters=1" in small[0]
    assert pq.replace_problems("kraft", None, _q(voters=((1000, 100),)), 1000, 1003, 1, 0, set()) == []
    assert "the quorum has no leader" in pq.replace_problems("kraft", None, _q(leader=-1), 1000, 1003, 3, 0, set())


def test_observer_and_voter_are_caught_up_within_max_lag():
    q = _q(observers=((0, 100), (1003, 95)))
    assert pq.observer_state(q, 1003, 5)[0] and not pq.observer_state(q, 1003, 4)[0]
    assert "does not follow the metadata log yet" in pq.observer_state(q, 1004, 5)[1]
    assert "is not a voter" in pq.voter_state(q, 1003, 5)[1]
    added = _q(voters=((1000, 100), (1001, 100), (1002, 100), (1003, 100)))
    assert pq.voter_state(added, 1003, 0)[0]
    assert not pq.observer_state(_q(leader=-1, observers=((1003, 100),)), 1003, 0)[0]


def test_the_old_controller_is_removed_only_when_nothing_is_lost():
    four = _q(voters=((1000, 100), (1001, 100), (1002, 100), (1003, 100)))
    assert pq.removal_problems(four, 1000, 1003, 3, 0) == []
    # the replacement must be a caught-up voter first
    assert "its replacement is not ready" in pq.removal_problems(_q(), 1000, 1003, 3, 0)[0]
    # never the last voter, never below min_voters
    assert "is the last voter" in pq.removal_problems(_q(voters=((1000, 100),)), 1000, None, 1, 0)[0]
    assert "fewer than min_voters 3" in pq.removal_problems(_q(), 1000, None, 3, 0)[0]
    # another voter behind: the removal would leave the quorum without a caught-up majority
    lagging = _q(voters=((1000, 100), (1001, 100), (1002, 10), (1003, 100)))
    assert "1002 (90 records behind" in pq.removal_problems(lagging, 1000, 1003, 3, 0)[0]
    # the old controller itself may be behind (a dead machine is the usual reason to replace one)
    dead_old = _q(voters=((1000, 3), (1001, 100), (1002, 100), (1003, 100)))
    assert pq.removal_problems(dead_old, 1000, 1003, 3, 0) == []


def test_the_end_state_says_when_the_quorum_cannot_lose_a_voter():
    done = _q(leader=1001, voters=((1001, 100), (1002, 100), (1003, 100)))
    ok, why = pq.replaced_state(done, 1003, 1000, 0)
    assert ok and "WARNING" not in why
    ok, why = pq.replaced_state(_q(leader=1003, voters=((1003, 100),)), 1003, 1000, 0)
    assert ok and "cannot lose one more voter" in why
    assert "still a voter" in pq.replaced_state(_q(voters=((1000, 100), (1003, 100))), 1003, 1000, 0)[1]


def test_brokers_whose_bootstrap_servers_are_all_removed_are_named():
    servers = {0: parse_servers("c1:9093,c2:9093"), 1: parse_servers("c3:9093"), 2: None}
    assert stranded_brokers(servers, {("c3", 9093), ("c4", 9093)}) == [0]
    assert stranded_brokers(servers, {("c2", 9093), ("c3", 9093)}) == []
    assert parse_servers("[::1]:9093, bad ,h:x") == [("::1", 9093)]


@pytest.mark.parametrize("text", ["ctrl4", "ctrl4:", ":9093", "ctrl4:70000", "ctrl4:x"])
def test_a_bad_endpoint_is_bad_input(text):
    with pytest.raises(BadInput, match="HOST:PORT"):
        pq.parse_endpoint(text)


def test_the_sandbox_dynamic_quorum_settings(tmp_path):
    from kops.sandbox.config import SandboxConfig

    cfg = SandboxConfig(workdir=tmp_path, mode="kraft", kafka_version="3.9.2", controllers=3, dynamic_quorum=True,
                        controller_ports=[19001, 19002, 19003], broker_ports=[19101, 19102, 19103], brokers=3).validate()
    props = cfg.controller_properties(1000)
    assert props["controller.quorum.bootstrap.servers"] == "127.0.0.1:19001,127.0.0.1:19002,127.0.0.1:19003"
    assert "controller.quorum.voters" not in props and "controller.quorum.voters" not in cfg.broker_properties(0)
    grown = cfg.with_(extra_controllers={1003: 19004}, removed_controllers=[1000]).validate()
    assert grown.controller_ids == [1001, 1002, 1003] and grown.controller_port(1003) == 19004
    assert grown.initial_controller_ids == [1001, 1002]
    back = SandboxConfig.from_dict(json.loads(json.dumps(grown.to_dict())))
    assert (back.extra_controllers, back.removed_controllers) == ({1003: 19004}, (1000,))
    for bad, why in ((dict(kafka_version="3.8.1"), "needs Kafka 3.9 or later"),
                     (dict(mode="zookeeper", kafka_version="3.9.2"), "needs --mode kraft"),
                     (dict(extra_controllers={1001: 19009}), "takes an id from 1000"),
                     (dict(removed_controllers=[1000, 1001, 1002]), "every controller would be removed")):
        with pytest.raises(BadInput, match=why):
            cfg.with_(**bad).validate()
    with pytest.raises(BadInput, match="on a dynamic quorum only"):
        cfg.with_(dynamic_quorum=False, extra_controllers={1003: 19004}).validate()


def test_directory_ids_round_trip_in_a_snapshot():
    from dataclasses import replace

    import jsonschema

    from kops.cluster.snapshot import load_topology, parse_topology, topology_schema

    topo = replace(load_topology(DATA / "topo6.json"), mode="kraft", quorum=_q())
    doc = topo.to_dict()
    jsonschema.validate(doc, topology_schema())
    assert doc["quorum"]["voters"][0]["directory_id"] == "dir-1000"
    assert parse_topology(json.loads(json.dumps(doc))).quorum == topo.quorum


# -- a voter change answered late (until_committed) -----------------------------------------------
class _Clock:
    """Time that moves only when slept in or spent waiting for a send's answer."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


def _until(outcomes, timeout_s=60.0):
    """until_committed (a removal) with each send's outcome: None (committed), a ClusterTimeout
    (raised once the attempt's time passed) or another error (raised at once)."""
    from kops.cluster.raft_voters import until_committed
    from kops.errors import ClusterTimeout

    clock, outcomes, attempts = _Clock(), list(outcomes), []

    def send(attempt_s):
        attempts.append((clock.now, attempt_s))
        outcome = outcomes.pop(0)
        if isinstance(outcome, ClusterTimeout):
            clock.sleep(attempt_s)
        if outcome is not None:
            raise outcome

    note = until_committed(send, "VoterNotFoundError", timeout_s, attempt_s=20, pause_s=1, clock=clock,
                           sleep=clock.sleep)
    return note, attempts


def _late(text="RequestTimedOutError (error 7): The request timed out."):
    from kops.errors import ClusterTimeout

    return ClusterTimeout(f"remove controller 1001 (directory d) from the KRaft quorum: {text}")


def _not_found():
    from kops.errors import ClusterError

    return ClusterError("remove controller 1001 (directory d) from the KRaft quorum: VoterNotFoundError (error 127)")


def test_a_voter_change_answered_at_once_is_sent_once():
    note, attempts = _until([None])
    assert note == "" and attempts == [(0.0, 20)]


def test_a_late_answer_is_sent_again_and_the_next_answer_is_exact():
    """CI: RemoveRaftVoter answered REQUEST_TIMED_OUT after 61 s by the broker forwarding it; the
    leader may commit it later. Sent again: REQUEST_TIMED_OUT at once while it is pending, then
    VOTER_NOT_FOUND once the earlier send committed it."""
    note, attempts = _until([_late(), _late("pending"), _not_found()])
    assert [t for t, _ in attempts] == [0.0, 21.0, 42.0]
    assert note.startswith("committed by an earlier send, as the leader answered the next (VoterNotFoundError) "
                           "(sent 3 times; a late answer: remove controller 1001")


def test_a_late_answer_then_a_committed_send():
    note, attempts = _until([_late(), None])
    assert len(attempts) == 2 and note.startswith("committed (sent 2 times; a late answer:")


def test_the_committed_error_before_any_late_answer_is_an_error():
    """VOTER_NOT_FOUND to the first send: the directory id is not the voter's, nothing was removed."""
    err = _not_found()
    with pytest.raises(type(err)) as caught:
        _until([err])
    assert caught.value is err


def test_an_error_that_is_no_late_answer_ends_it_at_once():
    from kops.errors import AuthorizationError, ClusterError

    for outcomes in ([ClusterError("UnsupportedVersionError")], [_late(), ClusterError("InvalidVoterKeyError")],
                     [AuthorizationError("not authorized")]):
        with pytest.raises(type(outcomes[-1])) as caught:
            _until(outcomes)
        assert caught.value is outcomes[-1]


def test_late_answers_until_the_deadline_raise_the_last_one_with_the_sends():
    from kops.errors import ClusterTimeout

    with pytest.raises(ClusterTimeout) as caught:
        _until([_late()] * 5, timeout_s=60)
    assert caught.value.message.endswith("The request timed out.; not committed within 60 s (3 sends)")


def test_an_answer_that_says_ask_again_leaves_the_change_open():
    """Seen on 3.9.2: a leader that resigned before the removal committed answers
    NOT_LEADER_OR_FOLLOWER; kafka-python marks it retriable: sent again, like a late answer.
    VOTER_NOT_FOUND is an answer: it stays an error."""
    import kafka.errors as Errors

    from kops.cluster.config import ClientConfig
    from kops.cluster.connection import Connection
    from kops.cluster.raft_voters import _mapped
    from kops.errors import ClusterError, ClusterTimeout

    conn = Connection("127.0.0.1:1", ClientConfig(), timeout_s=1)
    err = _mapped(conn, Errors.NotLeaderForPartitionError(""), "remove controller 1000")
    assert type(err) is ClusterTimeout and "NotLeaderForPartitionError (error 6)" in err.message
    err = _mapped(conn, Errors.for_code(127)("Cannot remove voter"), "remove controller 1000")
    assert type(err) is ClusterError and "VoterNotFoundError (error 127)" in err.message


def _until_read(outcomes, shown):
    """_until with a quorum check: ``shown`` is what ``landed()`` gives (True, False, or an
    exception raised)."""
    from kops.cluster.raft_voters import until_committed

    clock, outcomes, reads = _Clock(), list(outcomes), []

    def send(attempt_s):
        outcome = outcomes.pop(0)
        if outcome is not None:
            raise outcome

    def landed():
        reads.append(clock.now)
        if isinstance(shown, Exception):
            raise shown
        return shown

    note = until_committed(send, "VoterNotFoundError", 60, landed=landed, attempt_s=20, pause_s=1, clock=clock,
                           sleep=clock.sleep)
    return note, reads


def test_the_committed_error_to_the_first_send_is_done_when_the_quorum_shows_it():
    """Seen on 3.9.2 under load: the first send answered VOTER_NOT_FOUND after 7 s, the voter gone
    (the forwarding broker had sent it twice, the first forward committed it): the quorum is read,
    it shows the removal, the step is done."""
    note, reads = _until_read([_not_found()], True)
    assert len(reads) == 1
    assert note == "committed by an earlier send, the quorum shows it (VoterNotFoundError) (sent 1 time)"


def test_the_committed_error_is_an_error_while_the_quorum_still_shows_the_voter():
    """VOTER_NOT_FOUND and the voter still in the set (another directory id): nothing was removed,
    after a late answer too."""
    for outcomes in ([_not_found()], [_late(), _not_found()]):
        err = outcomes[-1]
        with pytest.raises(type(err)) as caught:
            _until_read(outcomes, False)
        assert caught.value is err


def test_an_unreadable_quorum_leaves_the_answer_as_it_was():
    """The quorum cannot be read (electing a leader): after a late answer the committed error is
    taken as exact; to the first send it stays an error."""
    from kops.errors import ClusterTimeout

    unreadable = ClusterTimeout("describe the KRaft metadata quorum: timed out")
    note, reads = _until_read([_late(), _not_found()], unreadable)
    assert len(reads) == 1 and note.startswith(
        "committed by an earlier send, as the leader answered the next (VoterNotFoundError) (sent 2 times; a late")
    err = _not_found()
    with pytest.raises(type(err)):
        _until_read([err], unreadable)
