"""``kops plan assign``: Kafka reassignment JSON, summary on stderr, exit codes."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kops.cli.main import app

KIP36 = "0:rack1,1:rack3,2:rack3,3:rack2,4:rack2,5:rack1"


@pytest.fixture
def runner():
    try:
        return CliRunner(mix_stderr=False)
    except TypeError:  # click >= 8.2 keeps stderr apart by default
        return CliRunner()


def run(runner, *args):
    return runner.invoke(app, ["plan", "assign", *args])


def test_kip36_example_json(runner):
    res = run(runner, "--brokers", "0,1,2,3,4,5", "--racks", KIP36, "--partitions", "12",
              "--replication-factor", "3", "--start-index", "0", "--topic", "orders", "--output", "json")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)  # exactly one JSON document on stdout
    assert doc["version"] == 1
    assert [p["replicas"] for p in doc["partitions"]][:7] == [
        [0, 3, 1], [3, 1, 5], [1, 5, 4], [5, 4, 2], [4, 2, 0], [2, 0, 3], [0, 4, 2],
    ]  # fmt: skip
    first = doc["partitions"][0]
    assert list(first) == ["topic", "partition", "replicas", "log_dirs"]
    assert first["topic"] == "orders" and first["log_dirs"] == ["any"] * 3
    assert res.stderr == ""


def test_global_output_option_and_topic_test2(runner):
    res = runner.invoke(app, ["--output", "json", "plan", "assign", "--brokers", "0,1,2", "--partitions", "6",
                              "--replication-factor", "3", "--start-index", "2"])  # fmt: skip
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert [p["replicas"] for p in doc["partitions"]] == [[2, 0, 1], [0, 1, 2], [1, 2, 0], [2, 1, 0], [0, 2, 1], [1, 0, 2]]


def test_human_mode_compact_json_on_stdout_summary_on_stderr(runner):
    res = run(runner, "--brokers", "0,1,2", "--racks", "0:rack1,1:rack2,2:rack2", "--partitions", "3",
              "--replication-factor", "2", "--start-index", "0")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    out = res.stdout.strip()
    assert "\n" not in out  # Kafka's one-line form
    assert [p["replicas"] for p in json.loads(out)["partitions"]] == [[0, 1], [1, 0], [2, 0]]
    assert "rack-aware (KIP-36)" in res.stderr
    assert "leaders" in res.stderr and "racks spanned per partition" in res.stderr


def test_start_partition_and_random_start(runner):
    res = run(runner, "--brokers", "0,1,2,3", "--partitions", "2", "--replication-factor", "2",
              "--start-partition", "5", "-o", "json")  # fmt: skip
    assert res.exit_code == 0
    assert [p["partition"] for p in json.loads(res.stdout)["partitions"]] == [5, 6]


def test_disable_rack_aware(runner):
    args = ["--brokers", "0,1,2", "--racks", "0:a,1:b", "--partitions", "3", "--replication-factor", "2"]
    res = run(runner, *args, "--start-index", "0")
    assert res.exit_code == 2
    assert "Not all brokers have rack information" in res.stderr
    assert "[2]" in res.stderr
    res = run(runner, *args, "--start-index", "0", "--disable-rack-aware", "-o", "json")
    assert res.exit_code == 0
    assert [p["replicas"] for p in json.loads(res.stdout)["partitions"]] == [[0, 1], [1, 2], [2, 0]]


def test_multi_level_racks_use_the_multi_level_algorithm(runner):
    racks = "0:/dc1/r1,1:/dc1/r2,2:/dc2/r1,3:/dc2/r2"
    res = run(runner, "--brokers", "0,1,2,3", "--racks", racks, "--partitions", "8", "--replication-factor", "2",
              "--start-index", "0")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    assert "multi-level" in res.stderr
    doc = json.loads(res.stdout)
    dc = {0: 1, 1: 1, 2: 2, 3: 2}
    assert all(dc[p["replicas"][0]] != dc[p["replicas"][1]] for p in doc["partitions"])
    assert "level 1 (2 domains): replicas 8..8, leaders 4..4" in res.stderr
    res = run(runner, "--brokers", "0,1,2,3", "--racks", racks, "--partitions", "8", "--replication-factor", "2",
              "--start-index", "0", "-o", "json")  # fmt: skip
    assert res.exit_code == 0 and "multi-level" in res.stderr  # said on stderr, JSON alone on stdout
    assert json.loads(res.stdout)["partitions"] == doc["partitions"]
    res = run(runner, "--brokers", "0,1,2,3", "--racks", racks, "--partitions", "8", "--replication-factor", "2",
              "--start-index", "0", "--disable-rack-aware", "-o", "json")  # fmt: skip
    assert res.exit_code == 0
    assert json.loads(res.stdout)["partitions"][0]["replicas"] == [0, 1]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--brokers", "0,1,2", "--partitions", "3", "--replication-factor", "4"],
         "Replication factor: 4 larger than available brokers: 3."),
        (["--brokers", "0,1,2", "--partitions", "0", "--replication-factor", "1"],
         "Number of partitions must be larger than 0."),
        (["--brokers", "0,1,2", "--partitions", "3", "--replication-factor", "0"],
         "Replication factor must be larger than 0."),
        (["--brokers", "0,1,x", "--partitions", "3", "--replication-factor", "1"], "'x' is not a broker id"),
        (["--brokers", "0,1,1", "--partitions", "3", "--replication-factor", "1"], "listed twice"),
        (["--brokers", "0,1", "--racks", "0:a,7:b", "--partitions", "3", "--replication-factor", "1"],
         "broker 7 is not in --brokers"),
        (["--brokers", "0,1", "--racks", "0:a,1", "--partitions", "3", "--replication-factor", "1"],
         "is not BROKER:RACK"),
        (["--brokers", "0,1", "--racks", "0:a,0:b", "--partitions", "3", "--replication-factor", "1"],
         "given a rack twice"),
        (["--brokers", "0,1", "--racks", "0:/dc1/r1,1:/dc2", "--partitions", "3", "--replication-factor", "1"],
         "same depth"),
        (["--brokers", "0,1", "--racks", "0:/dc1/r1,1:r2", "--partitions", "3", "--replication-factor", "1"],
         "must all be paths"),
    ],
)  # fmt: skip
def test_bad_input_exits_2_naming_the_problem(runner, args, needle):
    res = run(runner, *args)
    assert res.exit_code == 2, (res.stdout, res.stderr)
    assert needle in " ".join(res.stderr.split()), res.stderr
    assert res.stdout == ""


def test_missing_required_option_is_a_usage_error(runner):
    res = run(runner, "--brokers", "0,1")
    assert res.exit_code == 2


def test_plan_module_imports_stay_light():
    import subprocess
    import sys

    code = (
        "import sys, kops.cli.plan; "
        "heavy = [m for m in ('kops.placement.kafka_assign', 'kops.placement.multilevel', 'rich') if m in sys.modules]; "
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "kops.placement" not in out


@pytest.mark.parametrize("topic, warned", [("orders.eu", True), ("orders_eu", True), ("orders-eu", False)])
def test_a_topic_name_that_can_collide_is_warned_about_on_stderr(runner, topic, warned):
    """As kafka-topics.sh --create: '.' and '_' are one character in Kafka's metric names, so
    `a.b` and `a_b` collide (Kafka refuses the second); the plan on stdout is unchanged."""
    res = run(runner, "--brokers", "0,1,2", "--partitions", "3", "--replication-factor", "2", "--start-index", "0",
              "--topic", topic, "--output", "json")
    assert res.exit_code == 0, res.stderr
    assert {p["topic"] for p in json.loads(res.stdout)["partitions"]} == {topic}
    assert ("can collide with a topic named like it" in res.stderr) is warned
    assert (f"'{topic}'" in res.stderr) is warned
