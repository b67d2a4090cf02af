"""Cluster mode in the snapshot, and ZooKeeper-only behaviour refused on a KRaft cluster (no
cluster needed: the mode is given; tests/cluster/kraft/ does it against a real one)."""

from __future__ import annotations

import jsonschema
import pytest

from kops.cluster.config import ClientConfig
from kops.cluster.connection import Connection
from kops.cluster.snapshot import topology_schema
from kops.errors import EXIT_BAD_INPUT, BadInput
from kops.model import Broker, Partition, Topic, Topology


def _conn(mode: str | None, zookeeper: str | None = "127.0.0.1:1") -> Connection:
    c = Connection("127.0.0.1:1", ClientConfig.load(None), zookeeper, timeout_s=1)
    c.note_mode(mode)
    return c


def test_snapshot_carries_the_mode_and_stays_schema_valid():
    for mode in ("kraft", "zookeeper", None):
        topo = Topology(brokers=(Broker(0, "a"),), topics=(Topic("t", (Partition("t", 0, (0,), (0,), 0),)),),
                        controller=1000, mode=mode)
        doc = topo.to_dict()
        jsonschema.validate(doc, topology_schema())
        assert doc["mode"] == mode and Topology.from_dict(doc).mode == mode


def test_zookeeper_access_refused_on_kraft_before_connecting():
    c = _conn("kraft")
    with pytest.raises(BadInput) as e:
        c.zk()  # nothing listens on 127.0.0.1:1: the refusal must come first
    assert e.value.exit_code == EXIT_BAD_INPUT
    assert e.value.message.startswith("--zookeeper: the cluster at 127.0.0.1:1 runs in KRaft mode")
    assert "Nothing was changed" in e.value.message and c._zk is None
    with pytest.raises(BadInput, match=r"^--via zookeeper: .* KRaft mode"):
        _conn("kraft", zookeeper=None).require_zookeeper_mode("--via zookeeper")


def test_zookeeper_mode_and_unknown_mode_pass():
    _conn("zookeeper").require_zookeeper_mode("--via zookeeper")
    c = _conn(None)
    c.note_mode("something else")  # ignored
    assert c._mode is None
    # no bootstrap server: the mode cannot be asked; nothing is refused
    Connection(None, ClientConfig.load(None), "127.0.0.1:1").require_zookeeper_mode("--zookeeper")


def test_a_config_entrys_source_is_named_whatever_confluent_kafka_gives():
    """confluent-kafka's DescribeConfigs answers ``ConfigEntry.source`` as the protocol's number
    (4), though its own ConfigEntry type documents a ConfigSource; kops reads both the same way
    (its source decides whether a throttle rate is the broker's own or inherited)."""
    from types import SimpleNamespace

    from confluent_kafka.admin import ConfigEntry, ConfigSource

    from kops.cluster.topology import config_source

    assert config_source(SimpleNamespace(source=4)) == "STATIC_BROKER_CONFIG"
    assert config_source(SimpleNamespace(source=3)) == "DYNAMIC_DEFAULT_BROKER_CONFIG"
    assert config_source(ConfigEntry("x", "1", source=ConfigSource.DYNAMIC_BROKER_CONFIG)) == "DYNAMIC_BROKER_CONFIG"
    assert config_source(SimpleNamespace(source=99)) is None and config_source(object()) is None
