"""The KRaft metadata quorum in a topology snapshot: its model, the snapshot format, the health
rules (a quorum that cannot lose one more voter) and how `cluster describe | health` show it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from kops.cli.main import app
from kops.cluster.snapshot import load_topology, parse_topology, topology_schema
from kops.health import CRITICAL, PROBLEM, QUORUM_BEHIND_S, WARNING, check_health, quorum_findings
from kops.model import Quorum, QuorumReplica

DATA = Path(__file__).parent / "data"
NOW = 1_795_922_182_000  # the leader's clock, ms


def _quorum(behind: dict[int, float] | None = None, voters=(1000, 1001, 1002), leader=1001, hw=5000) -> Quorum:
    """Voters caught up now, except ``behind`` (id -> seconds since last caught up, 10 records
    per second behind); brokers 0-2 observe."""
    behind = behind or {}

    def rep(i: int) -> QuorumReplica:
        late = behind.get(i, 0.0 if i == leader else 0.2)
        return QuorumReplica(i, hw - int(10 * late), NOW - int(late * 1000), NOW - int(late * 1000))

    return Quorum(leader, 7, hw, tuple(rep(v) for v in voters), tuple(rep(b) for b in (0, 1, 2)))


def test_the_quorum_measures_lag_and_age_on_the_leaders_clock():
    q = _quorum({1000: 62.0})
    v = {r.id: r for r in q.voters}
    assert q.majority == 2 and q.now_ms == NOW
    assert q.lag(v[1000]) == 620 and q.behind_s(v[1000]) == pytest.approx(62.0)
    assert q.lag(v[1001]) == 0 and q.behind_s(v[1001]) == 0.0
    unknown = QuorumReplica(1002)  # Kafka before 3.3: no times, no log end
    assert q.lag(unknown) is None and q.behind_s(unknown) is None
    assert Quorum(-1, 3, 10, (QuorumReplica(1000, 10),)).now_ms == -1


def test_a_snapshot_with_its_quorum_round_trips_and_is_schema_valid():
    topo = replace(load_topology(DATA / "topo6.json"), mode="kraft", controller=1001, quorum=_quorum({1000: 30.0}))
    doc = topo.to_dict()
    jsonschema.validate(doc, topology_schema())
    assert doc["quorum"]["voters"][0] == {"id": 1000, "log_end_offset": 4700, "lag": 300, "last_fetch_ms": NOW - 30000,
                                          "last_caught_up_ms": NOW - 30000, "behind_s": 30.0}
    again = parse_topology(json.loads(json.dumps(doc)))
    assert again.quorum == topo.quorum and again.to_dict() == doc


def test_a_bad_quorum_in_a_snapshot_is_named():
    doc = load_topology(DATA / "topo6.json").to_dict()
    doc["quorum"] = {"leader": 1001, "voters": [{"id": "x"}]}
    from kops.errors import BadInput

    with pytest.raises(BadInput) as e:
        parse_topology(doc)
    assert "quorum.voters[0].id" in str(e.value.details) + e.value.message


@pytest.mark.parametrize("voters, behind, check, severity", [
    ((1000, 1001, 1002), {}, None, None),
    ((1000, 1001, 1002), {1000: QUORUM_BEHIND_S - 1}, None, None),  # a slow follower is still in the majority
    ((1000, 1001, 1002), {1000: QUORUM_BEHIND_S + 5}, "quorum_at_risk", PROBLEM),
    ((1000, 1001, 1002), {1000: 60, 1002: 60}, "quorum_lost", CRITICAL),
    ((1000, 1001, 1002, 1003, 1004), {1000: 60}, None, None),  # 5 voters lose 2
    ((1000, 1001, 1002, 1003, 1004), {1000: 60, 1004: 60}, "quorum_at_risk", PROBLEM),
    ((1001,), {}, "quorum_small", WARNING),
    ((1000, 1001), {}, "quorum_small", WARNING),
    ((1000, 1001), {1000: 60}, "quorum_lost", CRITICAL),
])
def test_a_quorum_that_cannot_lose_one_more_voter_is_flagged(voters, behind, check, severity):
    found = quorum_findings(_quorum(behind, voters=voters))
    assert [(f.check, f.severity) for f in found] == ([(check, severity)] if check else [])
    for f in found:
        for v in behind:  # the voters behind are named, with how far
            if behind[v] > QUORUM_BEHIND_S:
                assert f"{v} (last caught up {behind[v]:.0f} s ago" in f.message


def test_a_quorum_without_a_leader_is_critical():
    q = replace(_quorum(), leader=-1)
    assert [(f.check, f.severity) for f in quorum_findings(q)] == [("quorum_no_leader", CRITICAL)]


def test_unknown_times_count_as_in_sync():  # nothing to go on (Kafka before 3.3): no alarm from a missing field
    q = Quorum(1001, 1, 50, tuple(QuorumReplica(i, 50) for i in (1000, 1001, 1002)))
    assert quorum_findings(q) == []


def test_a_voter_silent_since_the_election_is_behind():
    """The leader reports its fetch times but none for a voter: it has not fetched in this epoch
    (the previous leader, killed: DescribeQuorum answers -1 for it)."""
    q = _quorum()
    q = replace(q, voters=tuple(QuorumReplica(v.id) if v.id == 1000 else v for v in q.voters))
    (f,) = quorum_findings(q)
    assert (f.check, f.severity) == ("quorum_at_risk", PROBLEM)
    assert f.message.startswith("voter 1000 (has not fetched from leader 1001 in its epoch 7) is behind"), f.message


def test_health_and_the_rebalance_job_see_the_quorum():
    from kops.ops.replica_rebalance import unhealthy

    topo = replace(load_topology(DATA / "topo6.json"), mode="kraft", quorum=_quorum({1002: 40.0}))
    rep = check_health(topo)
    assert rep.count("quorum_at_risk") == 1 and not rep.healthy()
    assert any(s.startswith("KRaft quorum: voter 1002 (last caught up 40 s ago, 400 records behind) is behind")
               for s in unhealthy(topo))
    # a one-controller quorum is a warning: the job does not step aside for it
    small = replace(topo, quorum=_quorum(voters=(1001,)))
    assert check_health(small).count("quorum_small") == 1
    assert not [s for s in unhealthy(small) if "quorum" in s]


def test_describe_and_health_show_the_quorum(tmp_path):
    topo = replace(load_topology(DATA / "topo6.json"), mode="kraft", controller=1001, quorum=_quorum({1000: 75.0}))
    f = tmp_path / "topo.json"
    f.write_text(topo.to_json())
    runner = CliRunner()
    r = runner.invoke(app, ["cluster", "describe", "--topology", str(f)], env={"COLUMNS": "160"})
    assert r.exit_code == 0, r.output
    assert "KRaft metadata quorum: leader 1001, epoch 7" in r.output and "majority 2" in r.output
    row = next(line for line in r.output.splitlines() if "│ 1000 │" in line)
    assert "voter" in row and "750" in row and "4250" in row and "75 s ago" in row
    assert any("│ 1001 │ leader" in line for line in r.output.splitlines())
    r = runner.invoke(app, ["cluster", "health", "--topology", str(f), "--output", "json"])
    assert r.exit_code == 3, r.output
    doc = json.loads(r.output)
    assert doc["summary"]["quorum_at_risk"] == 1
