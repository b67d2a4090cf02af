"""kops reassign generate on a topology snapshot (no cluster): Kafka's output shape, both strategies."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kops.cli.reassign import app
from kops.cluster.snapshot import load_topology
from kops.errors import BadInput
from kops.ops.generate import generate

DATA = Path(__file__).parent / "data" / "topo6.json"


@pytest.fixture
def topo():
    return load_topology(str(DATA))


def _topics(tmp_path, *names):
    f = tmp_path / "topics.json"
    f.write_text(json.dumps({"topics": [{"topic": n} for n in names], "version": 1}))
    return str(f)


def test_minimal_moves_less_than_kafka_and_is_rack_safe(topo):
    t = topo.topics[0].name
    drop = [b.id for b in topo.brokers if b.id != 5]
    g = generate(topo, [t], drop)
    on5 = sum(1 for p in topo.topic(t).partitions if 5 in p.replicas)
    assert g.report["replicas_moved"] >= on5
    for e in g.proposed.entries:
        assert 5 not in e.replicas
        assert len({topo.rack_of(b) for b in e.replicas}) == len(e.replicas)  # rack-safe
    kafka = [generate(topo, [t], drop, strategy="kafka", rng=random.Random(s)).report["replicas_moved"]
             for s in range(20)]
    assert g.report["replicas_moved"] <= sum(kafka) / len(kafka)  # Kafka moves more on average
    # the same input gives the same output, byte for byte
    assert generate(topo, [t], drop).proposed.to_json() == g.proposed.to_json()


def test_kafka_strategy_is_kafkas_algorithm(topo):
    t = topo.topics[0].name
    g = generate(topo, [t], [0, 1, 2, 3, 4, 5], strategy="kafka", rng=random.Random(1))
    parts = topo.topic(t).partitions
    assert len(g.proposed.entries) == len(parts)
    for e in g.proposed.entries:
        assert len(e.replicas) == len(parts[0].replicas)
        assert len({topo.rack_of(b) for b in e.replicas}) == len(e.replicas)


def test_bad_topics_and_brokers_named(topo):
    with pytest.raises(BadInput) as ei:
        generate(topo, ["nope"], [0, 99])
    assert any("nope" in d for d in ei.value.details) and any("99" in d for d in ei.value.details)
    with pytest.raises(BadInput):
        generate(topo, [topo.topics[0].name], [0, 1], strategy="minimal", rack_aware=False)


def test_cli_prints_kafka_format(tmp_path, topo):
    t = topo.topics[0].name
    r = CliRunner().invoke(app, ["generate", "--topics-to-move-json-file", _topics(tmp_path, t),
                                 "--broker-list", "0,1,2,3,4", "--topology", str(DATA)])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert lines[3] == "Proposed partition reassignment configuration"
    cur, prop = json.loads(lines[1]), json.loads(lines[4])
    assert cur["version"] == 1 and prop["partitions"][0]["log_dirs"] == ["any"] * len(prop["partitions"][0]["replicas"])
    r = CliRunner().invoke(app, ["generate", "--topics-to-move-json-file", _topics(tmp_path, t),
                                 "--broker-list", "0,1,x", "--topology", str(DATA)])
    assert r.exit_code == 2
