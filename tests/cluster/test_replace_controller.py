"""A KRaft controller replaced on a dynamic quorum (KIP-853) for real: a Kafka 3.9.2 sandbox whose 3
controllers were formatted with --initial-controllers (kraft.version 1) runs the replace-controller
playbook through `kops playbook run`, the sandbox's own verbs as its hooks (`kops sandbox controller
add` starts the new controller as an observer, `kops sandbox controller remove` deprovisions the old
one), under an acks=all producer. A thread reads the quorum (DescribeQuorum) every 0.3 s meanwhile:
it always has a leader, the voter set goes from the old controllers to the new ones, and every
acknowledged message is read back. A static quorum (controller.quorum.voters, kraft.version 0) is
refused before anything changes, naming what it needs."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time

import pytest

from kops.errors import ClusterError
from tests.cluster.kafka_helpers import Producing, consume_all, create_topic, kops
from tests.cluster.sandboxes import own_sandbox

pytestmark = pytest.mark.cluster

TOPIC = "through-the-replacement"


@pytest.fixture(scope="module")
def dynamic39(tmp_path_factory, request):
    """KRaft, Kafka 3.9.2, a dynamic quorum of 3 controllers; 3 brokers in racks a, b, c."""
    from kops.sandbox import Sandbox

    yield from own_sandbox(Sandbox, tmp_path_factory, request, "kops-replace-ctrl", "dynamic quorum sandbox",
                           brokers=3, racks="a,b,c", mode="kraft", kafka_version="3.9.2", controllers=3,
                           dynamic_quorum=True)


@pytest.fixture(scope="module")
def static39(tmp_path_factory, request):
    """KRaft, Kafka 3.9.2, a static quorum (controller.quorum.voters) of 1 controller; 1 broker."""
    from kops.sandbox import Sandbox

    yield from own_sandbox(Sandbox, tmp_path_factory, request, "kops-static-quorum", "static quorum sandbox",
                           brokers=1, racks="a", mode="kraft", kafka_version="3.9.2")


class QuorumWatch:
    """DescribeQuorum every 0.3 s in the background (kops' reader): the leaders and voter sets seen."""

    def __init__(self, bs: str):
        from kops.cluster.config import ClientConfig
        from kops.cluster.connection import Connection

        self.conn = Connection(bs, ClientConfig(), timeout_s=10)
        self.samples: list[tuple[int, tuple[int, ...]]] = []
        self.unanswered = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        from kops.cluster.topology import read_quorum

        while not self._stop.is_set():
            try:
                q = read_quorum(self.conn)
                self.samples.append((q.leader, tuple(v.id for v in q.voters)))
            except ClusterError:
                self.unanswered += 1
            self._stop.wait(0.3)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join(15)
        self.conn.close()


def _run(sb, home, *args: str):
    return kops("playbook", "run", "replace-controller", "--bootstrap-server", sb.bootstrap_servers, "--yes",
                "--output", "json", *args, env={"KOPS_HOME": str(home)}, timeout=600)


def _quorum(sb):
    from kops.cluster.config import ClientConfig
    from kops.cluster.connection import Connection
    from kops.cluster.topology import read_quorum

    with Connection(sb.bootstrap_servers, ClientConfig(), timeout_s=10) as conn:
        return read_quorum(conn)


def test_a_controller_is_replaced_under_an_acks_all_producer(dynamic39, tmp_path):
    from kops.sandbox.procs import free_ports

    sb = dynamic39
    bs = sb.bootstrap_servers
    before = _quorum(sb)
    voters = [v.id for v in before.voters]
    assert voters == [1000, 1001, 1002] and before.leader in voters, before
    old = next(v for v in voters if v != before.leader)  # a follower: the leader stays, so one exists throughout
    new = sb.quorum.next_controller_id()
    port = free_ports(1)[0]
    params = _params(sb, old, new, port, tmp_path / "hooks")

    # the sandbox refuses to take away a controller that is still a voter
    r = kops("sandbox", "controller", "remove", "--id", str(old), "--workdir", str(sb.workdir))
    assert r.returncode == 2 and f"controller {old} is still a voter" in r.stderr, r.stderr

    dry = _run(sb, tmp_path, *params, "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    summaries = {s["id"]: s["summary"] for s in json.loads(dry.stdout)["steps"]}
    assert f"add --id {new} --port {port}" in summaries["provision"] and f"remove --id {old}" in summaries["deprovision"]
    assert f"would add controller {new} (CONTROLLER://127.0.0.1:{port})" in summaries["add"], summaries
    assert f"would remove controller {old}" in summaries["remove"] and "leaving 3 voters" in summaries["remove"], summaries
    assert [v.id for v in _quorum(sb).voters] == voters and new not in sb.controller_ids  # nothing changed
    assert not (tmp_path / "hooks").exists()  # no hook ran

    create_topic(bs, TOPIC, partitions=3, rf=3, min_isr=2)
    with Producing(bs, TOPIC) as prod, QuorumWatch(bs) as watch:
        r = _run(sb, tmp_path, *params)
    assert r.returncode == 0, r.stdout + r.stderr[-4000:]
    steps = {s["id"]: s for s in json.loads(r.stdout)["steps"]}
    assert all(s["status"] == "done" for s in steps.values()), steps
    assert f"added controller {new}" in steps["add"]["summary"] and f"removed controller {old}" in steps["remove"]["summary"]
    assert (tmp_path / "hooks").read_text().count("run") == 2

    after = _quorum(sb)
    want = sorted({*voters, new} - {old})
    assert [v.id for v in after.voters] == want and after.leader in want, after
    assert all(after.lag(v) is not None and after.lag(v) <= 10 for v in after.voters), after
    sb.state.load()
    assert new in sb.controller_ids and old not in sb.controller_ids and not sb.nodes.running(old)
    # the quorum had a leader in every answer, and went through the four-voter set to the new one
    assert len(watch.samples) >= 10, (watch.samples, watch.unanswered)
    assert all(leader >= 0 for leader, _ in watch.samples), watch.samples
    seen = list(dict.fromkeys(vs for _, vs in watch.samples))
    assert seen[0] == tuple(voters) and seen[-1] == tuple(want), seen
    assert tuple(sorted({*voters, new})) in seen, seen  # added before the old one was removed
    # nothing acknowledged was lost
    assert prod.acked and prod.failed == 0, (len(prod.acked), prod.failed)
    got = consume_all(bs, prod.acked, TOPIC)
    assert prod.acked <= got, f"{len(prod.acked - got)} acknowledged messages lost"


def _params(sb, old: int, new: int, port: int, counter) -> list[str]:
    """The sandbox's verbs as the hooks; each hook run appends a line to ``counter``."""
    sandbox, workdir = f"{shlex.quote(sys.executable)} -m kops sandbox controller", shlex.quote(str(sb.workdir))
    count = f"echo run >> {shlex.quote(str(counter))} && "
    return ["-p", f"old_controller={old}", "-p", f"new_controller={new}",
            "-p", f"new_controller_endpoint=127.0.0.1:{port}",
            "-p", f"controller_command={count}{sandbox} add --id {new} --port {port} --workdir {workdir}",
            "-p", f"deprovision_command={count}{sandbox} remove --id {old} --workdir {workdir}"]


def _state_once_added(proc: subprocess.Popen, home) -> dict | None:
    """The run's state file once its ``add`` step is done (the new voter committed), as kops
    wrote it; None when the run ends first."""
    while proc.poll() is None:
        with contextlib.suppress(ValueError, OSError, KeyError):
            for f in (home / "playbook-runs").glob("replace-controller-*.json"):
                st = json.loads(f.read_text())
                if any(s["id"] == "add" and s["status"] == "done" for s in st["steps"]):
                    return st
        time.sleep(0.05)
    return None


def test_a_run_killed_after_the_add_is_resumed_without_doing_anything_twice(dynamic39, tmp_path):
    """kops SIGKILLed once the new voter is committed; --resume goes on from there: the provision
    hook is not run again, the old controller is removed and deprovisioned once."""
    from kops.sandbox.procs import free_ports

    sb = dynamic39
    sb.state.load()
    before = _quorum(sb)
    voters = [v.id for v in before.voters]
    old = next(v for v in voters if v != before.leader and v < 1003)  # an original follower
    new, port = sb.quorum.next_controller_id(), free_ports(1)[0]
    counter = tmp_path / "hooks"
    env = {**os.environ, "KOPS_HOME": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "kops", "playbook", "run", "replace-controller", "--bootstrap-server",
                             sb.bootstrap_servers, "--yes", *_params(sb, old, new, port, counter)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    try:
        st = _state_once_added(proc, tmp_path)
        assert st is not None, "the run ended before its add step was done"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    assert new in [v.id for v in _quorum(sb).voters] and counter.read_text().count("run") == 1
    r = kops("playbook", "run", "replace-controller", "--bootstrap-server", sb.bootstrap_servers, "--resume",
             st["run_id"], "--output", "json", env={"KOPS_HOME": str(tmp_path)}, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr[-4000:]
    steps = {s["id"]: s for s in json.loads(r.stdout)["steps"]}
    assert all(s["status"] == "done" for s in steps.values()), steps
    assert counter.read_text().count("run") == 2  # provision once before the kill, deprovision once after
    after = _quorum(sb)
    assert [v.id for v in after.voters] == sorted({*voters, new} - {old}) and after.leader >= 0, after


def test_a_removal_that_cannot_commit_for_a_while_is_sent_until_it_did(dynamic39):
    """A stopped voter is removed while the voter the new set needs besides the leader is stopped
    (SIGSTOP) for 8 s: the removal cannot commit, the leader answers it REQUEST_TIMED_OUT or, once
    it resigned for want of a majority, NOT_LEADER_OR_FOLLOWER. kops sends it again until the
    leader's answer says it is committed (CI once saw a RemoveRaftVoter answered late after 61 s).

    The voter removed is stopped first, as Kafka's own procedure has it (stop the voter, then
    remove-controller): a running one can crash the leader of Kafka 3.9.2 -- its answer to the
    leader's BeginQuorumEpoch heartbeat, arriving once the new voter set is appended, ends the
    leader's process ("Unexpected acknowledgement from non-voter"), and with it dead and the
    other voter stopped the removal never commits (a fresh-clone run, 2026-12-03)."""
    from kops.cluster.config import ClientConfig
    from kops.cluster.connection import Connection
    from kops.cluster.raft_voters import remove_voter
    from kops.errors import ClusterTimeout

    sb = dynamic39
    q = _quorum(sb)
    old = next(v for v in q.voters if v.id != q.leader)
    other = next(v.id for v in q.voters if v.id not in (q.leader, old.id))  # the new set: the leader and it
    sb.state.load()  # (the earlier tests' hooks added and removed controllers)
    assert sb.quorum.remove_controller(old.id, force=True), f"controller {old.id} was not running"
    pid = sb.nodes.pid(other)
    assert pid and sb.nodes.running(other), f"controller {other}'s process not found"
    os.kill(pid, signal.SIGSTOP)
    t0 = time.monotonic()
    resume = threading.Timer(8, os.kill, (pid, signal.SIGCONT))
    resume.start()
    try:
        with Connection(sb.bootstrap_servers, ClientConfig(), timeout_s=10) as conn:
            note = remove_voter(conn, old.id, old.directory_id, timeout_s=120)
    except ClusterTimeout as e:  # (say whether a controller of the new set died: the Kafka bug above)
        raise AssertionError(f"{e.message}; controllers of the new set running: "
                             f"{ {c: sb.nodes.running(c) for c in (q.leader, other)} }") from e
    finally:
        resume.join()
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
    # the fault happened: the first answer left the change open, and it was sent again
    assert time.monotonic() - t0 >= 8 and note.startswith("committed") and "a late answer" in note, note
    assert int(note.split("(sent ")[1].split(" time")[0]) >= 2, note
    after = _quorum(sb)
    assert old.id not in [v.id for v in after.voters] and other in [v.id for v in after.voters], after


def test_a_static_quorum_is_refused_before_anything_changes(static39, tmp_path):
    sb = static39
    before = _quorum(sb)
    r = _run(sb, tmp_path, "-p", "old_controller=1000", "-p", "new_controller=1001",
             "-p", "new_controller_endpoint=127.0.0.1:1", "-p", f"controller_command=touch {tmp_path / 'provisioned'}",
             "-p", "deprovision_command=true", "-p", "min_voters=1")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "static" in r.stderr and "kraft.version feature level 1" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert [v.id for v in _quorum(sb).voters] == [v.id for v in before.voters]
    assert not (tmp_path / "provisioned").exists()
    # the sandbox's own verb says the same
    r = kops("sandbox", "controller", "add", "--workdir", str(sb.workdir))
    assert r.returncode == 2 and "no dynamic KRaft quorum" in r.stderr, r.stderr
