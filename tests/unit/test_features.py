"""Feature levels (pure): metadata.version names and levels, what an upgrade asks for, and which
raises are refused before anything is sent (the cluster test runs the raise itself)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kops.cli.main import app
from kops.cluster.features import (
    METADATA_LEVELS,
    FeatureState,
    Features,
    Raise,
    metadata_level,
    metadata_name,
    plan_raises,
    wanted_levels,
)
from kops.errors import BadInput, ClusterError


def _features(mv_finalized=21, mv_max=33) -> Features:
    return Features((FeatureState("group.version", 0, 1, None), FeatureState("metadata.version", 7, mv_max, mv_finalized),
                     FeatureState("kraft.version", 0, 1, 0)), epoch=5)


def test_metadata_levels_follow_kafkas_enum():
    levels = list(METADATA_LEVELS.values())
    assert levels == sorted(levels) == list(range(1, 34))  # one level per step, in release order
    assert metadata_level("3.9") == 21 and metadata_level("3.9-IV0") == 21 and metadata_level("21") == 21
    assert metadata_level("3.7") == 19  # a release names its newest level (3.7-IV4)
    assert metadata_level("4.4") == 33 and metadata_level(" 4.0 ") == 25
    assert metadata_name(21) == "3.9-IV0" and metadata_name(40) == "level 40" and metadata_name(None) == "-"
    with pytest.raises(BadInput, match="'3.10': not a Kafka release kops knows"):
        metadata_level("3.10")


def test_what_an_upgrade_asks_for():
    assert wanted_levels("4.0", []) == {"metadata.version": 25}
    assert wanted_levels(None, ["group.version=1", "metadata.version=3.9"]) == {"group.version": 1,
                                                                                "metadata.version": 21}
    for release, feats, why in ((None, [], "nothing to upgrade"), (None, ["group.version"], "expected NAME=LEVEL"),
                                (None, ["group.version=one"], "the level must be a number"),
                                ("4.0", ["metadata.version=4.0"], "asked for twice")):
        with pytest.raises(BadInput, match=why):
            wanted_levels(release, feats)


def test_raises_are_planned_and_refused_before_anything_is_sent():
    f = _features()
    assert plan_raises(f, {"metadata.version": 25}, mode="kraft") == [Raise("metadata.version", 21, 25)]
    assert plan_raises(f, {"metadata.version": 21}, mode="kraft") == []  # already there: nothing to do
    assert plan_raises(f, {"group.version": 1}, mode="kraft") == [Raise("group.version", None, 1)]
    refused = [
        ({"metadata.version": 20}, "kraft", "lower than the finalized 3.9-IV0 (21): kops only raises"),
        ({"metadata.version": 34}, "kraft", "the brokers support up to 4.4-IV2 (33)"),
        ({"metadata.version": 5}, "kraft", "below the lowest level the brokers support (3.3-IV3 (7))"),
        ({"share.version": 1}, "kraft", "'share.version': the brokers do not support it"),
        ({"metadata.version": 25}, "zookeeper", "a ZooKeeper-mode cluster takes its version from each broker's "
                                                "inter.broker.protocol.version"),
    ]
    for wanted, mode, why in refused:
        with pytest.raises(BadInput) as e:
            plan_raises(f, wanted, mode=mode)
        assert why in e.value.message and "Nothing was changed" in e.value.message, e.value.message


def test_a_raise_says_what_it_does():
    r = Raise("metadata.version", 21, 25)
    assert r.describe() == "metadata.version 3.9-IV0 (21) -> 4.0-IV3 (25)"
    assert r.to_dict() == {"feature": "metadata.version", "from": 21, "to": 25, "from_release": "3.9-IV0",
                           "to_release": "4.0-IV3"}
    assert Raise("group.version", None, 1).describe() == "group.version unset -> 1"


def test_the_cli_refuses_bad_requests_before_connecting():
    runner = CliRunner()
    for args, why in ((["--release-version", "4.0", "--metadata", "4.0"], "not both"),
                      ([], "nothing to upgrade"), (["--feature", "x"], "expected NAME=LEVEL")):
        r = runner.invoke(app, ["cluster", "features", "upgrade", *args, "--bootstrap-server", "127.0.0.1:1"])
        assert r.exit_code == 2 and why in r.output, (args, r.output)


def test_the_upgrade_playbook_validates_and_dry_runs_on_a_snapshot(tmp_path):
    """Its release and the cluster's mode are checked before the first broker is upgraded."""
    import json
    from pathlib import Path

    zk = Path(__file__).parent / "data" / "topo6.json"
    kraft = tmp_path / "kraft.json"
    kraft.write_text(json.dumps({**json.loads(zk.read_text()), "mode": "kraft"}))
    runner = CliRunner()

    def run(topo, release):
        return runner.invoke(app, ["playbook", "run", "upgrade", "--dry-run", "--topology", str(topo), "-p",
                                   f"release_version={release}", "-p", "upgrade_command=true"],
                             env={"KOPS_HOME": str(tmp_path), "COLUMNS": "200"})

    r = run(kraft, "4.0")
    assert r.exit_code == 0, r.output
    assert "[preflight] health_gate" in r.output
    assert "would raise metadata.version to 25 (not validated: a dry run on a snapshot)" in r.output
    r = run(kraft, "9.9")
    assert r.exit_code == 2 and "step 'validate' (line" in r.output and "not a Kafka release kops knows" in r.output
    r = run(zk, "4.0")
    assert r.exit_code == 2 and "a ZooKeeper-mode cluster takes its version from each broker's" in r.output
    assert "[preflight] health_gate" not in r.output  # refused before the first step


def test_the_raise_waits_until_the_cluster_answers_the_new_level(monkeypatch):
    """The broker applies the controller's record a moment later: read until it shows; a level
    that never shows is named with what the cluster still answers."""
    from kops.ops import features as ops_features

    answers = [_features(21), _features(21), _features(25)]
    monkeypatch.setattr(ops_features, "read_features", lambda conn: answers.pop(0) if len(answers) > 1 else answers[0])
    r = Raise("metadata.version", 21, 25)
    assert ops_features._wait_for_levels(None, [r], 5.0).get("metadata.version").finalized == 25
    assert len(answers) == 1  # read three times

    monkeypatch.setattr(ops_features, "read_features", lambda conn: _features(21))
    with pytest.raises(ClusterError, match=r"after 1 s the cluster still answers metadata.version at 21"):
        ops_features._wait_for_levels(None, [r], 1.0)
