"""Disk stages (kops.ops.disk_fit): a plan that shuffles data between full brokers runs in an
order that frees space before it is needed, or is refused when no order fits; the waves keep
the stages (kops.ops.reassign.next_wave), and a later stage waits for the space the brokers
free when they delete the moved-away replicas (no cluster)."""

from __future__ import annotations

import pytest

from kops.errors import BadInput
from kops.model import Broker, LogDir, Partition, PlanEntry, ReassignmentPlan, Topic, Topology
from kops.ops.disk_fit import plan_disk
from kops.ops.move import Move
from kops.ops.validate import validate_plan
from tests.unit.engine_fakes import Store

GB = 1_000_000_000


def _topo(usable: dict[int, int], parts: dict[int, tuple[int, ...]], size=10 * GB) -> Topology:
    """Brokers 0-5 (racks a,a,b,b,c,c), one 100 GB dir each with ``usable`` bytes (default 80 GB);
    topic t with partitions ``parts`` of ``size`` bytes."""
    brokers = tuple(Broker(b, "abc"[b // 2], log_dirs=(LogDir(f"/d/{b}", 100 * GB, usable.get(b, 80 * GB)),))
                    for b in range(6))
    ps = tuple(Partition("t", p, r, isr=r, leader=r[0], size_bytes=size) for p, r in parts.items())
    return Topology(brokers=brokers, topics=(Topic("t", ps),))


def _moves(topo, targets: dict[int, tuple[int, ...]]) -> list[Move]:
    return validate_plan(ReassignmentPlan(tuple(PlanEntry("t", p, r) for p, r in targets.items())), topo)


def test_a_plan_that_fits_at_once_runs_in_one_stage():
    topo = _topo({}, {0: (0, 2, 4), 1: (1, 3, 5)})
    moves, check = plan_disk(_moves(topo, {0: (1, 2, 4), 1: (0, 3, 5)}), topo)
    assert check.stages == 1 and not check.overflows and {m.stage for m in moves} == {0}


def test_space_freed_first_lets_a_shuffle_between_full_brokers_run():
    """Broker 0 is 75 GB full (5 GB under the 80 % threshold): partition 0 (10 GB) leaves it for
    broker 1, partition 1 (10 GB) arrives from broker 1. At once: 85 % at the peak, refused; after
    partition 0's move has ended: 75 % again. Two stages, the move off broker 0 first."""
    topo = _topo({0: 25 * GB}, {0: (0, 2, 4), 1: (1, 3, 5)})
    moves, check = plan_disk(_moves(topo, {0: (1, 2, 4), 1: (0, 3, 5)}), topo)
    assert check.stages == 2 and [f.broker for f in check.overflows] == [0]
    assert {m.name: m.stage for m in moves} == {"t-0": 0, "t-1": 1}
    assert "runs in" not in check.rule()  # the rule stays the options'; the CLI says the stages
    # kept in the journal
    assert [Move.from_dict(m.to_dict()).stage for m in moves] == [0, 1]


def test_no_order_fits_refuses_with_every_figure():
    topo = _topo({0: 25 * GB, 1: 25 * GB}, {0: (0, 2, 4), 1: (1, 3, 5)}, size=10 * GB)
    # brokers 0 and 1 (75 GB used each) each receive 10 GB and lose nothing: no order frees room
    with pytest.raises(BadInput) as ei:
        plan_disk(_moves(topo, {0: (0, 1, 4), 1: (1, 0, 5)}), topo)
    assert ei.value.exit_code == 2 and "brokers 0,1" in ei.value.message and "nothing was changed" in ei.value.message


def test_chains_take_as_many_stages_as_they_need_and_unknown_brokers_do_not_block():
    # 0 -> 1 -> 2: broker 2 frees for 1, then 1 frees for 0's partition... each full broker
    # receives only after its own partition left
    topo = _topo({1: 25 * GB, 2: 25 * GB}, {0: (0, 3, 5), 1: (1, 3, 5), 2: (2, 4, 5)})
    moves, check = plan_disk(_moves(topo, {2: (4, 0, 5), 1: (2, 3, 5), 0: (1, 3, 5)}), topo)
    assert {m.name: m.stage for m in moves} == {"t-2": 0, "t-1": 1, "t-0": 2} and check.stages == 3
    # a destination whose free space is unknown limits nothing (the disk check warns about it)
    bare = Topology(brokers=tuple(Broker(b, "abc"[b // 2]) if b == 1 else x
                                  for b, x in zip(range(6), topo.brokers)), topics=topo.topics)
    moves, check = plan_disk(_moves(bare, {2: (4, 0, 5), 1: (2, 3, 5), 0: (1, 3, 5)}), bare)
    assert {m.name: m.stage for m in moves} == {"t-2": 0, "t-1": 1, "t-0": 0}
    assert any("broker 1 unknown" in w for w in check.warnings)


def test_waves_keep_the_stages():
    from kops.ops.reassign import next_wave

    a = Move("t", 0, (0, 2), (1, 2), size_bytes=1, stage=0)
    b = Move("t", 1, (1, 3), (0, 3), size_bytes=1, stage=1)
    c = Move("t", 2, (4, 5), (5, 4), stage=1)  # a reorder: free, but of stage 2 all the same
    assert next_wave([a, b, c], []) == [a]
    assert next_wave([b, c], [a]) == []  # stage 1 waits while a is in flight
    assert next_wave([b, c], []) == [b, c]


def test_a_later_stage_waits_for_the_space_its_earlier_stages_free_then_halts(monkeypatch):
    """Stage 0 (t-0 off broker 3) has ended, but broker 3 has not deleted the old replica's files
    yet: the stage-1 wave waits (said once) instead of halting, starts when the space is back,
    and halts as any disk stop when it does not come back within SPACE_WAIT_S."""
    from kops.cluster.topology import LogDirRead
    from kops.ops import journal as J
    from kops.ops import reassign as R

    a = Move("t", 0, (3, 1), (2, 1), size_bytes=10 * GB, stage=0)
    b = Move("t", 1, (1, 2), (1, 3), size_bytes=10 * GB, stage=1)
    topo = Topology(brokers=tuple(Broker(i) for i in (1, 2, 3)), topics=(Topic("t", (
        Partition("t", 0, (2, 1), isr=(2, 1), leader=2), Partition("t", 1, (1, 2), isr=(1, 2), leader=1),
    )),))
    usable = [25 * GB]  # 75 GB used: 10 GB more is 85 %
    monkeypatch.setattr(R.admin, "read", lambda conn, topics=None, sizes=False: topo)
    monkeypatch.setattr("kops.cluster.topology.log_dir_usage", lambda conn, brokers, topics=(): LogDirRead(
        entries=[(("t", 1, 1), "/d", 10 * GB, False), (("t", 1, 2), "/d", 10 * GB, False)],
        dirs={b: (LogDir("/d", 100 * GB, usable[0] if b == 3 else 80 * GB),) for b in (1, 2, 3)}))

    j = J.Journal(id="x", cluster_id="c", moves=[a, b])
    j.progress[a.name] = J.DONE
    runner = R.Runner(object(), Store(), j, R.ExecuteOptions())
    started = []
    monkeypatch.setattr(R.admin, "submit", lambda conn, targets: started.append([f"{t}-{p}" for t, p in targets])
                        or {tp: None for tp in targets})
    monkeypatch.setattr("kops.cluster.topology.replica_sizes", lambda conn, brokers, topics: {})
    clock = [1000.0]
    monkeypatch.setattr(R.runner.time, "monotonic", lambda: clock[0])
    runner.tick()
    assert started == [] and j.state == J.RUNNING
    assert sum("disk stage 2: waiting for broker(s) 3" in n for n in runner.notes) == 1
    clock[0] += 60
    runner.tick()
    assert started == [] and j.state == J.RUNNING
    usable[0] = 35 * GB  # the old replica's files are gone
    runner.tick()
    assert started == [["t-1"]]

    # never freed: a disk stop once SPACE_WAIT_S has passed
    j2 = J.Journal(id="y", cluster_id="c", moves=[a, b])
    j2.progress[a.name] = J.DONE
    usable[0] = 25 * GB
    runner = R.Runner(object(), Store(), j2, R.ExecuteOptions())
    runner.tick()
    clock[0] += R.options.SPACE_WAIT_S + 1
    runner.tick()
    assert j2.state == J.HALTED and runner.halt.by == "disk check"
