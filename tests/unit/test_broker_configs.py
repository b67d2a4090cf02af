"""The one reader of brokers' configs (kops.cluster.broker_configs): a DescribeConfigs per broker
(librdkafka takes one BROKER resource per call), each answer waited for with ``conn.wait``."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kops.cluster import broker_configs
from kops.errors import ClusterError


def entry(value):
    return SimpleNamespace(value=value, source=4, is_sensitive=False, is_default=False)


ANSWERS = {"0": {"process.roles": entry("broker")}, "1": {"zookeeper.connect": entry("zk:2181")}}


class Admin:
    def __init__(self, log, refuse=()):
        self.log, self.refuse = log, refuse

    def describe_configs(self, resources, request_timeout):
        assert len(resources) == 1, "one BROKER resource per call"
        assert request_timeout == 5.0
        if resources[0].name in self.refuse:
            raise ClusterError(f"broker {resources[0].name}: cannot send")
        self.log.append(("sent", resources[0].name))
        return {resources[0]: resources[0].name}


class Conn:
    timeout_s = 5.0

    def __init__(self, refuse=()):
        self.log: list[tuple[str, str]] = []
        self._admin = Admin(self.log, refuse)

    def admin(self):
        return self._admin

    def wait(self, fut, what):
        self.log.append(("waited", fut))
        if fut not in ANSWERS:
            raise ClusterError(f"{what}: timed out")
        return ANSWERS[fut]


def test_each_broker_is_asked_in_its_own_call_all_sent_before_any_wait():
    conn = Conn()
    got = broker_configs.read(conn, [0, 1])
    assert got == {0: ANSWERS["0"], 1: ANSWERS["1"]}
    assert conn.log == [("sent", "0"), ("sent", "1"), ("waited", "0"), ("waited", "1")]


def test_a_broker_that_does_not_answer_raises_when_strict_and_reads_none_otherwise():
    with pytest.raises(ClusterError, match="describe configs of broker 2: timed out"):
        broker_configs.read(Conn(), [0, 1, 2])
    assert broker_configs.read(Conn(), [0, 1, 2], strict=False) == {0: ANSWERS["0"], 1: ANSWERS["1"], 2: None}
    # a request that cannot even be sent: the same choice
    with pytest.raises(ClusterError, match="cannot send"):
        broker_configs.read(Conn(refuse={"1"}), [0, 1])
    assert broker_configs.read(Conn(refuse={"1"}), [0, 1], strict=False) == {0: ANSWERS["0"], 1: None}


def test_topology_and_cluster_mode_read_through_it(monkeypatch):
    from kops.cluster import topology
    from kops.cluster.config import ClientConfig
    from kops.cluster.connection import Connection

    throttled = {"leader.replication.throttled.rate": SimpleNamespace(value="100", source=2, is_default=False)}
    seen = []
    monkeypatch.setattr(broker_configs, "read",
                        lambda conn, ids, strict=True: seen.append((list(ids), strict)) or {b: throttled for b in ids})
    assert topology.broker_throttle_configs(object(), [3]) == {3: {"leader.replication.throttled.rate": "100"}}
    c = Connection("127.0.0.1:1", ClientConfig.load(None), None, timeout_s=1)
    monkeypatch.setattr(c, "describe_cluster", lambda: SimpleNamespace(nodes=[SimpleNamespace(id=7)]))
    monkeypatch.setattr(broker_configs, "read", lambda conn, ids, strict=True: seen.append((list(ids), strict))
                        or {b: {"process.roles": entry("broker,controller")} for b in ids})
    assert c.cluster_mode() == "kraft"
    assert seen == [([3], True), ([7], True)]
