"""Snapshot parsing/validation and the pure health checks (no cluster)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from kops.cluster.snapshot import load_topology, parse_topology, topology_schema
from kops.errors import BadInput
from kops.health import check_health

DATA = Path(__file__).parent / "data"


def _raw():
    return json.loads((DATA / "topo6.json").read_text())


def test_roundtrip_is_schema_valid():
    topo = load_topology(DATA / "topo6.json")
    doc = topo.to_dict()
    jsonschema.validate(doc, topology_schema())
    again = parse_topology(json.loads(json.dumps(doc)))
    assert again.to_dict() == doc
    assert topo.racks == ["a", "b", "c"]
    assert topo.topic("orders").min_insync_replicas() == 2


def test_the_brokers_kafka_releases_round_trip_and_read_mid_upgrade():
    from dataclasses import replace

    from rich.console import Console

    from kops.cli.render import render_topology

    topo = load_topology(DATA / "topo6.json")
    assert topo.kafka_versions() is None  # not read: nothing said
    runs = {0: "3.5", 1: "3.6", 2: "3.10", 3: "3.6", 4: "4.3+", 5: "3.6"}
    topo = replace(topo, brokers=tuple(replace(b, kafka_version=runs[b.id]) for b in topo.brokers))
    assert topo.kafka_versions() == "3.5 - 4.3+"  # ordered as releases, not as text
    doc = topo.to_dict()
    jsonschema.validate(doc, topology_schema())
    assert parse_topology(json.loads(json.dumps(doc))).to_dict() == doc
    con = Console(width=200, record=True)
    render_topology(con, topo)
    text = con.export_text()
    assert "kafka 3.5 - 4.3+" in text.splitlines()[0] and "┃ kafka ┃" in text  # a column per broker mid-upgrade
    one = replace(topo, brokers=tuple(replace(b, kafka_version="3.6") for b in topo.brokers))
    con = Console(width=200, record=True)
    render_topology(con, one)
    text = con.export_text()
    assert "kafka 3.6  controller" in text.splitlines()[0] and "┃ kafka ┃" not in text


def test_healthy_snapshot():
    rep = check_health(load_topology(DATA / "topo6.json"))
    assert rep.healthy()
    # logs: RF 2, min.insync=1 -> an acks=all write may reach a single rack
    assert [f.subject for f in rep.findings if f.check == "durability"] == ["topic logs"]


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.pop("brokers"), "'brokers' is a required property"),
        (lambda d: d["brokers"][0].__setitem__("id", "x"), "brokers[0].id"),
        (lambda d: d["topics"][0]["partitions"][0].__setitem__("replicas", [0, 0, 2]), "appears twice"),
        (lambda d: d["brokers"].append({"id": 0}), "listed more than once"),
    ],
)
def test_bad_snapshots_name_the_problem(mutate, message):
    d = _raw()
    mutate(d)
    with pytest.raises(BadInput) as e:
        parse_topology(d)
    assert message in e.value.message + " ".join(e.value.details)


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(BadInput, match="does not exist"):
        load_topology(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(BadInput, match="not valid JSON"):
        load_topology(bad)


def test_findings_for_a_broken_cluster():
    d = _raw()
    d["brokers"] = [b for b in d["brokers"] if b["id"] != 4]  # broker 4 down: not registered
    p = d["topics"][0]["partitions"]
    p[0]["isr"] = [0, 2]                       # under-replicated, at min ISR
    p[2].update(leader=0, isr=[0])             # leader moved, ISR below min.insync=2
    p[3].update(replicas=[1, 0, 3], isr=[1, 0, 3])  # two replicas in rack a, none in c
    d["topics"][1]["partitions"][1].update(leader=-1, isr=[])  # offline
    rep = check_health(parse_topology(d))
    assert not rep.healthy()
    s = rep.summary()
    assert s["offline"] == 1 and s["under_min_isr"] == 1 and s["at_min_isr"] == 1
    assert s["broker_down"] == 1
    assert [f.subject for f in rep.findings if f.check == "rack_unsafe"] == ["orders-3"]
    assert {f.subject for f in rep.findings if f.check == "non_preferred_leader"} == {"orders-2"}
    down = [f for f in rep.findings if f.check == "broker_down"][0]
    assert down.broker == 4 and "holds 3 replicas" in down.message
