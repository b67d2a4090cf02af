"""Plan validation before the first write (pure: plan + Topology)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kops.errors import BadInput
from kops.model import Broker, Partition, PlanEntry, ReassignmentPlan, Topic, Topology
from kops.ops.move import Move
from kops.ops.validate import plan_problems, validate_plan


def topo(down=(), reassigning=None) -> Topology:
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    brokers = tuple(Broker(b, r, alive=b not in down) for b, r in racks.items())
    reassigning = reassigning or {}
    parts = tuple(
        Partition("orders", p, reps, isr=reps, leader=reps[0], size_bytes=1000 * (p + 1),
                  adding_replicas=tuple(reassigning.get(p, ((), ()))[0]),
                  removing_replicas=tuple(reassigning.get(p, ((), ()))[1]))
        for p, reps in enumerate([(0, 2, 4), (1, 3, 5), (2, 4, 0)])
    )
    return Topology(brokers=brokers, topics=(Topic("orders", parts, configs={"min.insync.replicas": "2"}),),
                    cluster_id="c1")


def plan(*entries) -> ReassignmentPlan:
    out = []
    for e in entries:
        t, p, r = e[:3]
        d = tuple(e[3]) if len(e) > 3 else None
        out.append(PlanEntry(t, p, tuple(r), d))
    return ReassignmentPlan(tuple(out))


def test_valid_plan_gives_moves_in_plan_order():
    moves = validate_plan(plan(("orders", 1, [1, 3, 4]), ("orders", 0, [0, 2, 4])), topo())
    assert [m.name for m in moves] == ["orders-1", "orders-0"]
    m = moves[0]
    assert m.original == (1, 3, 5) and m.target == (1, 3, 4)
    assert m.adding == (4,) and m.removing == (5,)
    assert m.involved == {4, 5} and m.bytes_to_move == 2000
    assert moves[1].noop and not moves[1].moves_data


def test_every_offending_entry_is_named_at_once():
    bad = plan(
        ("nope", 0, [0, 1, 2]),          # unknown topic
        ("orders", 7, [0, 1, 2]),        # partition out of range
        ("orders", 0, [0, 9, 2]),        # unknown broker
        ("orders", 1, [1, 1, 3]),        # duplicate
        ("orders", 2, [2, 4, 0], ["any", "/data"]),  # log_dirs length
    )
    with pytest.raises(BadInput) as ei:
        validate_plan(bad, topo())
    d = "\n".join(ei.value.details)
    assert ei.value.exit_code == 2
    assert "nope-0: topic 'nope' does not exist" in d
    assert "orders-7: partition 7 does not exist (topic orders has 3 partitions: 0..2)" in d
    assert "orders-0: unknown broker 9" in d
    assert "orders-1: duplicate replicas 1" in d
    assert "orders-2: 2 log_dirs for 3 replicas" in d
    assert len(ei.value.details) == 5
    assert "nothing was changed" in ei.value.message


def test_relative_log_dir_is_rejected_any_and_absolute_accepted():
    ok = plan(("orders", 0, [0, 2, 4], ["any", "/kafka/d2", "any"]))
    assert validate_plan(ok, topo())[0].log_dir_moves == {2: "/kafka/d2"}
    assert any("absolute" in p for p in plan_problems(plan(("orders", 0, [0, 2, 4], ["any", "d2", "any"])), topo()))


def test_down_target_broker_refused_unless_allow_offline():
    p = plan(("orders", 0, [0, 2, 5]))
    problems = plan_problems(p, topo(down={5}))
    assert problems == ["orders-0: broker 5 is down (alive: 0,1,2,3,4); use --allow-offline to start it anyway"]
    assert plan_problems(p, topo(down={5}), allow_offline=True) == []


def test_replica_staying_on_down_broker_is_fine():
    # moving off a dead broker: broker 4 (down) is removed, 5 added
    assert plan_problems(plan(("orders", 0, [0, 2, 5])), topo(down={4})) == []


def test_conflict_with_reassignment_in_progress():
    t = topo(reassigning={1: ((4,), (5,))})
    problems = plan_problems(plan(("orders", 1, [1, 3, 0])), t)
    assert len(problems) == 1 and "orders-1: a reassignment is already in progress" in problems[0]
    assert "adding [4], removing [5]" in problems[0]
    # also when only the live listing knows it
    problems = plan_problems(plan(("orders", 2, [2, 4, 1])), topo(),
                             in_progress={("orders", 2): {"replicas": [2, 4, 0, 1], "adding_replicas": [1],
                                                         "removing_replicas": [0]}})
    assert "orders-2: a reassignment is already in progress" in problems[0]


def test_empty_plan():
    assert plan_problems(ReassignmentPlan(()), topo())[0].startswith("the plan has no partitions")


def test_move_roundtrip():
    m = Move("t", 1, (1, 2), (2, 3), ("any", "/d"), 10)
    assert Move.from_dict(m.to_dict()) == m


def test_cli_bad_plan_file_exits_2_before_connecting(tmp_path):
    from kops.cli.reassign import app

    f = tmp_path / "plan.json"
    f.write_text('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,1]},'
                 '{"topic":"t","partition":-1,"replicas":[1]}]}')
    r = CliRunner().invoke(app, ["execute", "--reassignment-json-file", str(f),
                                 "--bootstrap-server", "127.0.0.1:1", "--yes"])
    assert r.exit_code == 2, r.output
    r = CliRunner().invoke(app, ["execute", "--reassignment-json-file", str(tmp_path / "missing.json"),
                                 "--bootstrap-server", "127.0.0.1:1"])
    assert r.exit_code == 2
    f.write_text("{not json")
    r = CliRunner().invoke(app, ["verify", "--reassignment-json-file", str(f), "--bootstrap-server", "127.0.0.1:1"])
    assert r.exit_code == 2
