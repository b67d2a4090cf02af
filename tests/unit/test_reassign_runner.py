"""The engine's coordinator (kops.ops.reassign.runner.Runner): how it is built, and how a
check wires the trackers together (the cluster stood in)."""

from __future__ import annotations

import time

import pytest

from kops.model import Broker, Partition, Topic, Topology
from kops.ops import journal as J
from kops.ops import reassign as R
from kops.ops.disk_fit import DiskCheck
from kops.ops.move import Move
from kops.ops.reassign.options import FRESH_S, HALT_HEALTH
from tests.unit.engine_fakes import Reporter, Store

M = Move("t", 0, (1, 2), (1, 3), size_bytes=10)


def _topo(isr=(1, 2), min_isr="1"):
    return Topology(brokers=tuple(Broker(i) for i in (1, 2, 3)),
                    topics=(Topic("t", (Partition("t", 0, (1, 2), isr=isr, leader=1),),
                                  configs={"min.insync.replicas": min_isr}),))


@pytest.fixture
def cluster(monkeypatch):
    """Reads of the cluster counted, submissions recorded, the new replicas' sizes unknown."""
    seen = {"reads": 0, "submitted": [], "topo": _topo()}

    def read(conn, topics=None, sizes=False):
        seen["reads"] += 1
        return seen["topo"]

    monkeypatch.setattr(R.admin, "read", read)
    monkeypatch.setattr(R.admin, "submit", lambda conn, targets: seen["submitted"].append(dict(targets))
                        or {tp: None for tp in targets})
    monkeypatch.setattr("kops.cluster.topology.replica_sizes", lambda conn, brokers, topics: {})
    monkeypatch.setattr("kops.cluster.topology.log_dir_usage", lambda conn, brokers, topics=(): None)
    return seen


def _journal():
    return J.Journal(id="x", cluster_id="c", moves=[M])


def test_a_new_execution_starts_from_its_preflight(cluster):
    """The first wave uses the preflight's read (no second read, no second disk check), and
    the disk warnings shown before the confirmation are kept and journaled, not shown again."""
    j, rep = _journal(), Reporter()
    prepared = R.Prepared(_topo(), [M], read_at=time.monotonic(),
                          disk=DiskCheck((), ("broker 9 unknown",), 5.0))
    runner = R.Runner.after_preflight(object(), Store(), j, R.ExecuteOptions(), prepared, reporter=rep)
    snap = runner.tick()
    assert cluster["reads"] == 0 and cluster["submitted"] == [{("t", 0): (1, 3)}]
    assert snap.in_flight == 1 and j.progress[M.name] == J.IN_FLIGHT and j.waves == 1
    assert runner.notes == ["disk check: broker 9 unknown"] and rep.messages == []
    assert any(e.endswith(" disk check: broker 9 unknown") for e in j.events)


def test_a_preflight_read_too_old_is_read_again_and_the_wave_checked(cluster):
    j = _journal()
    prepared = R.Prepared(_topo(), [M], read_at=time.monotonic() - FRESH_S - 1)
    runner = R.Runner.after_preflight(object(), Store(), j, R.ExecuteOptions(), prepared)
    runner.tick()
    assert cluster["reads"] == 1 and len(cluster["submitted"]) == 1
    assert any("disk check skipped before a wave" in n for n in runner.notes)  # the wave's own check ran


def test_an_unhealthy_cluster_halts_before_a_wave(cluster):
    cluster["topo"] = _topo(isr=(1,), min_isr="2")
    j = _journal()
    runner = R.Runner(object(), Store(), j, R.ExecuteOptions())
    outcome = runner.run()  # without --wait: one check
    assert cluster["submitted"] == [] and j.state == J.HALTED and runner.halt.by == HALT_HEALTH
    assert runner.notes[0].startswith("stopped before wave 1: 1 partition(s) unhealthy, e.g. t-0: under min ISR")
    assert outcome.exit_code == 1 and not outcome.finished
    assert outcome.message.startswith("execution x halted by the health check: t-0: under min ISR")


def _two_moves_one_finished(monkeypatch, sizes):
    """A Runner over t-0 (finished: at its target, no longer reassigning) and t-1 (still
    reassigning, ``sizes`` copied), its throttle syncs recorded instead of applied."""
    a, b = Move("t", 0, (1, 2), (1, 3), size_bytes=10), Move("t", 1, (1, 2), (1, 4), size_bytes=10)
    topo = Topology(brokers=tuple(Broker(i) for i in range(1, 5)),
                    topics=(Topic("t", (Partition("t", 0, (1, 3)), Partition("t", 1, (1, 2, 4),
                                                                                adding_replicas=(4,),
                                                                                removing_replicas=(2,)))),))
    monkeypatch.setattr(R.admin, "read", lambda conn, topics=None, sizes=False: topo)
    monkeypatch.setattr("kops.cluster.topology.replica_sizes", lambda conn, brokers, topics: dict(sizes))
    j = J.Journal(id="x", cluster_id="c", moves=[a, b])
    j.progress[a.name] = j.progress[b.name] = J.IN_FLIGHT
    runner = R.Runner(object(), Store(), j, R.ExecuteOptions(throttle=1000))
    syncs = []
    monkeypatch.setattr(runner.throttles, "sync", lambda topo, in_flight, **kw: syncs.append(in_flight) or [])
    return runner, a, b, syncs


def test_throttles_of_finished_moves_lifted_at_once_unless_the_rest_end_within_seconds(monkeypatch):
    """A move finishes: its throttles are lifted at that check; but while every other move in
    flight is about to end too (its new replica's size says so), they are lifted together later."""
    for sizes, lifted in (({}, 1), ({("t", 1, 4): 9}, 0)):
        runner, a, b, syncs = _two_moves_one_finished(monkeypatch, sizes)
        runner.snapshot()  # what the last check's progress saw
        runner.tick()
        assert runner.j.progress[a.name] == J.DONE and runner.j.progress[b.name] == J.IN_FLIGHT
        assert len(syncs) == lifted, sizes


def test_a_finished_move_wakes_the_loop_up(monkeypatch):
    runner, a, b, _ = _two_moves_one_finished(monkeypatch, {("t", 1, 4): 1})
    runner.tick()  # t-1 still reassigning: watched
    monkeypatch.setattr(R.admin, "ongoing", lambda conn: {})
    assert runner.moves_finished() is True


def test_the_bytes_copied_so_far_show_in_the_progress(monkeypatch):
    runner, a, b, _ = _two_moves_one_finished(monkeypatch, {("t", 1, 4): 7})
    assert runner.snapshot().bytes_done == 7
    runner.tick()  # t-0 done: its bytes count in full
    assert runner.snapshot().bytes_done == 17
