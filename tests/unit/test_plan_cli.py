"""``kops plan rebalance | decommission | add-brokers | drain-rack | set-replication-factor |
move-topics`` on --topology files (no cluster)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kops.cli.main import app
from kops.model import ReassignmentPlan


@pytest.fixture
def runner():
    try:
        return CliRunner(mix_stderr=False)
    except TypeError:  # click >= 8.2 keeps stderr apart by default
        return CliRunner()


def snapshot(tmp_path, brokers, topics, sizes=False, dead=()):
    doc = {
        "version": 1,
        "brokers": [{"id": b, "rack": r, "alive": b not in dead} for b, r in brokers.items()],
        "topics": [
            {
                "name": name,
                "partitions": [
                    {"partition": i, "replicas": list(r), **({"size_bytes": 1_000_000 * (i + 1)} if sizes else {})}
                    for i, r in enumerate(parts)
                ],
            }
            for name, parts in topics.items()
        ],
    }
    f = tmp_path / "topology.json"
    f.write_text(json.dumps(doc))
    return str(f)


RACKS = {b: f"az{b % 2}" for b in range(20)}
# one replica per broker, both AZs per partition: removing broker 19 needs exactly 1 move
TEN = {"t": [(i, 19 - i) if i % 2 else (19 - i, i) for i in range(10)]}


def run(runner, *args):
    return runner.invoke(app, ["plan", *args])


def test_decommission_plan_on_stdout_report_on_stderr(runner, tmp_path):
    topo = snapshot(tmp_path, RACKS, TEN)
    res = run(runner, "decommission", "--brokers", "19", "--topology", topo)
    assert res.exit_code == 0, res.stderr
    plan = ReassignmentPlan.from_json(res.stdout)
    assert len(plan.entries) == 1
    (entry,) = plan.entries
    assert entry.tp == ("t", 0) and 19 not in entry.replicas and 0 in entry.replicas
    assert "replicas moved" in res.stderr and "Kafka --generate" in res.stderr
    assert "lower bound" in res.stderr


def test_output_json_one_document_with_plan_and_report(runner, tmp_path):
    topo = snapshot(tmp_path, RACKS, TEN, sizes=True)
    res = run(runner, "decommission", "--brokers", "19", "--topology", topo, "--throttle", "1M", "--output", "json")
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert set(doc) == {"plan", "report"}
    rep = doc["report"]
    assert rep["replicas_moved"] == 1 == rep["lower_bound"]["moves"]
    assert rep["kafka_generate"]["partitions_changed"] == 10
    assert rep["bytes_moved"] == 1_000_000
    assert rep["duration"]["seconds"] == round(1_000_000 / 2**20, 1)
    assert doc["plan"]["version"] == 1 and len(doc["plan"]["partitions"]) == 1
    again = run(runner, "decommission", "--brokers", "19", "--topology", topo, "--throttle", "1M", "--output", "json")
    assert again.stdout == res.stdout  # deterministic, byte for byte


def test_rebalance_bounded_and_chart(runner, tmp_path):
    racks = {b: f"r{b % 3}" for b in range(6)}
    topo = snapshot(tmp_path, racks, {"t": [(0, 1, 2)] * 9})
    png = tmp_path / "chart.png"
    res = run(runner, "rebalance", "--topology", topo, "--max-moves", "2", "--chart", str(png), "--output", "json")
    assert res.exit_code == 0, res.stderr
    rep = json.loads(res.stdout)["report"]
    assert rep["replicas_moved"] == 2 and rep["bounded"]["complete"] is False
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_add_brokers_drain_rack_set_rf_move_topics(runner, tmp_path):
    racks = {b: f"r{b % 3}" for b in range(9)}
    topo = snapshot(tmp_path, racks, {"t": [(0, 1, 2), (3, 4, 5)] * 3, "u": [(0, 1)] * 2})
    res = run(runner, "add-brokers", "--brokers", "6,7,8", "--topology", topo, "--output", "json")
    assert res.exit_code == 0, res.stderr
    for e in json.loads(res.stdout)["plan"]["partitions"]:
        assert len(set(e["replicas"])) == len(e["replicas"])
    res = run(runner, "drain-rack", "--rack", "r2", "--topology", topo, "--output", "json")
    assert res.exit_code == 0, res.stderr
    for e in json.loads(res.stdout)["plan"]["partitions"]:
        assert not set(e["replicas"]) & {2, 5, 8}
    res = run(runner, "set-replication-factor", "--topic", "u", "--replication-factor", "3", "--topology", topo, "--output", "json")
    assert res.exit_code == 0, res.stderr
    entries = json.loads(res.stdout)["plan"]["partitions"]
    assert {e["topic"] for e in entries} == {"u"} and all(len(e["replicas"]) == 3 for e in entries)
    move = tmp_path / "move.json"
    move.write_text(json.dumps({"topics": [{"topic": "u"}], "version": 1}))
    res = run(runner, "move-topics", "--topics-to-move-json-file", str(move), "--broker-list", "6,7,8",
              "--topology", topo)  # fmt: skip
    assert res.exit_code == 0, res.stderr
    for e in ReassignmentPlan.from_json(res.stdout).entries:
        assert e.topic == "u" and set(e.replicas) <= {6, 7, 8}


def test_infeasible_goal_exits_2_naming_partitions_and_racks(runner, tmp_path):
    topo = snapshot(tmp_path, {0: "a", 1: "b", 2: "c"}, {"t": [(0, 1, 2)]})
    res = run(runner, "drain-rack", "--rack", "c", "--topology", topo)
    assert res.exit_code == 2
    assert "t-0" in res.stderr and "racks a, b" in res.stderr
    assert res.stdout == ""
    res = run(runner, "decommission", "--brokers", "9", "--topology", topo)
    assert res.exit_code == 2 and "not in the cluster" in res.stderr
    res = run(runner, "rebalance", "--topology", topo, "--max-bytes", "lots")
    assert res.exit_code == 2 and "--max-bytes" in res.stderr


def test_replicas_goal_met_where_rack_safety_forces_the_spread_and_names_the_racks(runner, tmp_path):
    # racks a, a, b, b, c and RF 3: every partition has a replica on broker 4 (rack c's only one)
    parts = [(p % 2, 2 + (p // 2) % 2, 4) for p in range(40)]
    parts[:6] = [(0, 2, 4)] * 6  # brokers 0 and 2 start above their share
    topo = snapshot(tmp_path, dict(enumerate("aabbc")), {"t": parts})
    res = run(runner, "rebalance", "--topology", topo, "--output", "json")
    assert res.exit_code == 0, res.stderr
    rep = json.loads(res.stdout)["report"]
    replicas = rep["goals"]["replicas"]
    assert (replicas["before"], replicas["after"], replicas["bound"], replicas["status"]) == (23, 20, 20, "met")
    assert "rack c (1 broker) holds at least 40" in replicas["rack_bound"]
    text = run(runner, "rebalance", "--topology", topo)
    assert "replicas: rack safety allows no spread below 20" in text.stderr
