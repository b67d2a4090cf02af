"""A ZooKeeper -> KRaft migration of the sandbox (kops.sandbox.migration): the pure parts — the
migration state read from ZooKeeper's znodes, each phase's properties, the order of the phases,
what the state file keeps and what another process takes over. No cluster, no JVM."""

from __future__ import annotations

import json

import pytest

from kops.errors import BadInput
from kops.sandbox.cluster import Sandbox
from kops.sandbox.config import SandboxConfig
from kops.sandbox.migration import (
    MIGRATION, NONE, POST_MIGRATION, PRE_MIGRATION, MigrationMode, classify, plain_restart_phase)
from kops.sandbox.modes import ZooKeeperMode


def _migrating(tmp_path, **kw) -> SandboxConfig:
    return SandboxConfig(workdir=tmp_path, brokers=3, migration="migrating", controllers=3,
                         controller_ports=[9300, 9301, 9302], **kw).validate()


# -- the state, from /controller and /migration ------------------------------------------------------
@pytest.mark.parametrize("controller, migration, finalized, want", [
    (None, None, False, NONE),
    ({"version": 2, "brokerid": 1, "timestamp": "1"}, None, False, NONE),                     # a ZooKeeper controller
    ({"version": 2, "brokerid": 1, "timestamp": "1", "kraftControllerEpoch": -1}, None, False, NONE),
    ({"version": 2, "brokerid": 1, "timestamp": "1"},                                         # quorum waits for brokers
     {"version": 0, "kraft_controller_id": 1000, "kraft_controller_epoch": 1, "kraft_metadata_offset": -1,
      "kraft_metadata_epoch": -1}, False, PRE_MIGRATION),
    ({"version": 2, "brokerid": 1000, "timestamp": "1", "kraftControllerEpoch": 1}, None, False, PRE_MIGRATION),
    ({"version": 2, "brokerid": 1000, "timestamp": "1", "kraftControllerEpoch": 1},           # dual write
     {"version": 0, "kraft_controller_id": 1000, "kraft_controller_epoch": 1, "kraft_metadata_offset": 32,
      "kraft_metadata_epoch": 1}, False, MIGRATION),
    (None, None, True, POST_MIGRATION),
])
def test_the_migration_state_is_read_as_kafka_names_it(controller, migration, finalized, want):
    assert classify(controller, migration, finalized=finalized) == want


# -- properties of each phase ------------------------------------------------------------------------
def test_the_controllers_of_a_migration_run_next_to_zookeeper(tmp_path):
    cfg = _migrating(tmp_path, zookeeper_port=12181)
    assert cfg.mode == "zookeeper" and cfg.controller_ids == [1000, 1001, 1002]
    assert cfg.all_ports()["zookeeper port"] == 12181 and cfg.all_ports()["controller 1001 port"] == 9301
    props = cfg.controller_properties(1000)
    assert props["process.roles"] == "controller" and props["node.id"] == "1000"
    assert props["zookeeper.metadata.migration.enable"] == "true"
    assert props["zookeeper.connect"] == "127.0.0.1:12181"
    assert props["controller.quorum.voters"] == "1000@127.0.0.1:9300,1001@127.0.0.1:9301,1002@127.0.0.1:9302"
    assert props["inter.broker.listener.name"] == "PLAINTEXT"
    # without a migration, a ZooKeeper sandbox has no controllers
    assert SandboxConfig(workdir=tmp_path).controller_ids == []


def test_each_broker_phase_has_kafkas_settings(tmp_path):
    cfg = _migrating(tmp_path).with_broker_phase(0, "migrate").with_broker_phase(1, "migrate")
    cfg = cfg.with_broker_phase(1, "kraft")
    zk, mig, kraft = (cfg.broker_properties(b) for b in (2, 0, 1))
    assert "zookeeper.metadata.migration.enable" not in zk and zk["broker.id"] == "2"
    assert mig["broker.id"] == "0" and mig["zookeeper.connect"] == cfg.zookeeper_connect
    assert mig["zookeeper.metadata.migration.enable"] == "true"
    assert mig["controller.quorum.voters"] == cfg.quorum_voters and mig["controller.listener.names"] == "CONTROLLER"
    assert mig["listener.security.protocol.map"] == "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
    assert mig["inter.broker.protocol.version"] == "3.9"
    assert kraft["process.roles"] == "broker" and kraft["node.id"] == "1"
    assert not {"zookeeper.connect", "zookeeper.metadata.migration.enable", "broker.id",
                "inter.broker.protocol.version"} & set(kraft)
    assert kraft["broker.rack"] == cfg.rack_map[1]
    # finalized: the same KRaft broker as in phase kraft, controllers without the migration
    done = cfg.with_broker_phase(0, "kraft").with_broker_phase(2, "migrate").with_broker_phase(2, "kraft")
    fin = done.with_(mode="kraft", migration="finalized", broker_phases={}).validate()
    assert fin.controller_ids == [1000, 1001, 1002] and "zookeeper port" not in fin.all_ports()
    assert fin.broker_properties(1) == kraft
    assert not {"zookeeper.connect", "zookeeper.metadata.migration.enable"} & set(fin.controller_properties(1000))


def test_a_secured_migration_secures_every_listener_and_authorizes_with_the_same_super_user(tmp_path):
    """A secured sandbox (SASL/SCRAM, ACLs) migrates too: the controllers' listener is SASL with
    PLAIN as admin (a controller cannot check SCRAM logins), every node that calls the controllers
    logs in so; the controllers in migration mode reach the ZooKeeper brokers' SASL listener with
    SCRAM and write znodes with ACLs; KRaft nodes authorize with StandardAuthorizer, ZooKeeper
    brokers (migration mode included) with AclAuthorizer, the same super user everywhere."""
    from kops.sandbox.security import Secrets

    s = Secrets("adm-pw", "user-pw", "zk-pw")
    cfg = _migrating(tmp_path, security="sasl_plaintext").with_broker_phase(0, "migrate").with_broker_phase(1, "migrate")
    cfg = cfg.with_broker_phase(1, "kraft")
    zk, mig, kraft = (cfg.broker_properties(b, s) for b in (2, 0, 1))
    ctrl = cfg.controller_properties(1000, s)
    plain = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="adm-pw" '
             'user_admin="adm-pw";')
    assert ctrl["listeners"] == "CONTROLLER://127.0.0.1:9300"
    assert ctrl["listener.security.protocol.map"] == "CONTROLLER:SASL_PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT"
    assert ctrl["listener.name.controller.sasl.enabled.mechanisms"] == "PLAIN"
    assert ctrl["sasl.mechanism.controller.protocol"] == "PLAIN"
    assert ctrl["listener.name.controller.plain.sasl.jaas.config"] == plain
    assert ctrl["inter.broker.listener.name"] == "SASL_PLAINTEXT"
    assert ctrl["sasl.mechanism.inter.broker.protocol"] == "SCRAM-SHA-512"
    assert 'username="admin" password="adm-pw"' in ctrl["listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config"]
    assert ctrl["zookeeper.set.acl"] == "true"
    assert ctrl["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    for props in (zk, mig, kraft, ctrl):
        assert props["super.users"] == "User:admin" and props["allow.everyone.if.no.acl.found"] == "false"
    assert zk["authorizer.class.name"] == mig["authorizer.class.name"] == "kafka.security.authorizer.AclAuthorizer"
    assert "sasl.mechanism.controller.protocol" not in zk and zk["listeners"].startswith("SASL_PLAINTEXT://")
    assert mig["listener.security.protocol.map"] == ctrl["listener.security.protocol.map"]
    assert mig["sasl.mechanism.controller.protocol"] == "PLAIN"
    assert mig["listener.name.controller.plain.sasl.jaas.config"] == plain
    assert mig["security.inter.broker.protocol"] == "SASL_PLAINTEXT" and mig["zookeeper.set.acl"] == "true"
    assert kraft["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert kraft["listeners"] == f"SASL_PLAINTEXT://127.0.0.1:{cfg.broker_port(1)}"
    assert kraft["inter.broker.listener.name"] == "SASL_PLAINTEXT"
    assert not {"security.inter.broker.protocol", "zookeeper.set.acl"} & set(kraft)  # (Kafka refuses both names)
    assert kraft["sasl.mechanism.controller.protocol"] == "PLAIN"
    assert kraft["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    # finalized: a secured KRaft sandbox (its credentials and ACLs came with the metadata)
    done = cfg.with_broker_phase(0, "kraft").with_broker_phase(2, "migrate").with_broker_phase(2, "kraft")
    fin = done.with_(mode="kraft", migration="finalized", broker_phases={}).validate()
    assert fin.broker_properties(1, s) == kraft
    after = fin.controller_properties(1000, s)
    assert not {"zookeeper.connect", "zookeeper.set.acl", "sasl.mechanism.inter.broker.protocol"} & set(after)
    assert after["listener.name.controller.plain.sasl.jaas.config"] == plain
    # SASL_SSL: the controllers' listener too, with the broker certificate
    ssl = _migrating(tmp_path, security="sasl_ssl").controller_properties(1001, s)
    assert ssl["listener.security.protocol.map"] == "CONTROLLER:SASL_SSL,SASL_SSL:SASL_SSL"
    assert ssl["ssl.keystore.location"].endswith("broker.pem") and ssl["ssl.truststore.location"].endswith("ca.pem")
    # a KRaft sandbox is secured only as a migrated one
    with pytest.raises(BadInput, match="ZooKeeper mode only"):
        SandboxConfig(workdir=tmp_path, mode="kraft", security="sasl_plaintext").validate()


def test_a_secured_migrations_controller_files_are_private(tmp_path):
    """The controllers' properties hold the PLAIN password: written 0600, as the brokers' are."""
    from kops.sandbox.cluster import Sandbox
    from kops.sandbox.configs import write_node_configs

    sb = Sandbox(_migrating(tmp_path, security="sasl_plaintext"))
    write_node_configs(sb.state, sb.nodes, sb.meta)
    for n in (1000, 1001, 1002, 0):
        f = sb.config.properties_file(n)
        assert f.stat().st_mode & 0o777 == 0o600, f
        assert "<generated>" not in f.read_text()
    assert sb.config.properties_file("zookeeper").stat().st_mode & 0o077 != 0  # no secret in it


def test_the_phases_go_in_kafkas_order_only(tmp_path):
    plain = SandboxConfig(workdir=tmp_path, brokers=3)
    with pytest.raises(BadInput, match="not migrating: start the KRaft controllers first"):
        plain.with_broker_phase(0, "migrate")
    assert plain.with_broker_phase(0, "zookeeper") is plain  # a plain restart
    cfg = _migrating(tmp_path)
    with pytest.raises(BadInput, match="restart it with --phase migrate first"):
        cfg.with_broker_phase(0, "kraft")
    m = cfg.with_broker_phase(0, "migrate")
    assert m.with_broker_phase(0, "migrate") is m
    with pytest.raises(BadInput, match="stop the controllers first .`kops sandbox migration controllers-down`"):
        m.with_broker_phase(0, "zookeeper")
    k = m.with_broker_phase(0, "kraft")
    with pytest.raises(BadInput, match="cannot go to zookeeper"):
        k.with_broker_phase(0, "zookeeper")
    assert k.with_broker_phase(0, "migrate").broker_phases == {0: "migrate"}  # Kafka's revert of the KRaft roll
    with pytest.raises(BadInput, match="--phase 'broker'"):
        cfg.with_broker_phase(0, "broker")
    with pytest.raises(BadInput, match="no broker 7"):
        cfg.with_broker_phase(7, "migrate")


@pytest.mark.parametrize("kw, why", [
    ({"kafka_version": "3.6.2"}, "needs Kafka 3.7 - 3.9"),
    ({"engine": "docker"}, "migrates local JVMs only"),
])
def test_a_migration_is_refused_where_the_sandbox_cannot_run_it(tmp_path, kw, why):
    with pytest.raises(BadInput, match=why):
        SandboxConfig(workdir=tmp_path, migration="migrating", **kw).validate()


def test_bad_migration_settings_are_refused(tmp_path):
    with pytest.raises(BadInput, match="expected one of"):
        SandboxConfig(workdir=tmp_path, migration="half").validate()
    with pytest.raises(BadInput, match="only while KRaft controllers migrate"):
        SandboxConfig(workdir=tmp_path, broker_phases={0: "migrate"}).validate()
    with pytest.raises(BadInput, match="starts from a ZooKeeper-mode sandbox"):
        SandboxConfig(workdir=tmp_path, mode="kraft", migration="migrating").validate()
    with pytest.raises(BadInput, match="2 controller ports for 3 controllers"):
        SandboxConfig(workdir=tmp_path, migration="migrating", controllers=3, controller_ports=[1, 2]).validate()


# -- the state file, and another process ---------------------------------------------------------------
def test_phases_survive_the_state_file_and_another_process_takes_them_over(tmp_path):
    stale = Sandbox(SandboxConfig(workdir=tmp_path, brokers=3))  # e.g. a test's fixture, made before
    assert isinstance(stale.meta, ZooKeeperMode) and not isinstance(stale.meta, MigrationMode)
    stale.state.save()
    other = Sandbox(SandboxConfig(workdir=tmp_path, brokers=3))  # the CLI, in another process
    other.config = _migrating(tmp_path).with_broker_phase(1, "migrate")
    other.state.save()
    doc = json.loads((tmp_path / "sandbox.json").read_text())
    assert doc["config"]["migration"] == "migrating" and doc["config"]["broker_phases"] == {"1": "migrate"}
    again = SandboxConfig.from_dict({**doc["config"], "workdir": str(tmp_path)})
    assert again.broker_phases == {1: "migrate"} and again.controller_ids == [1000, 1001, 1002]
    stale.state.load()
    assert stale.config.migration == "migrating" and stale.config.broker_phase(1) == "migrate"
    assert isinstance(stale.meta, MigrationMode)
    assert stale.state.base_nodes() == ["zookeeper", 1000, 1001, 1002]
    # finalized in another process: the stale object becomes a KRaft sandbox
    fin = other.config.with_(mode="kraft", migration="finalized", broker_phases={}).validate()
    other.config = fin
    other.state.save()
    stale.state.load()
    assert stale.mode == "kraft" and stale.meta.name == "kraft"
    assert stale.state.base_nodes() == [1000, 1001, 1002]


def test_another_mode_or_version_is_not_taken_over(tmp_path):
    sb = Sandbox(SandboxConfig(workdir=tmp_path, brokers=3))
    sb.config = _migrating(tmp_path)
    sb.state.save()
    mine = Sandbox(SandboxConfig(workdir=tmp_path, brokers=3, kafka_version="3.8.1"))
    assert mine.config.migration is None and mine.config.kafka_version == "3.8.1"


def test_a_rollback_in_another_process_is_taken_over(tmp_path):
    mine = Sandbox(SandboxConfig(workdir=tmp_path, brokers=3))
    mine.config = _migrating(tmp_path).with_broker_phase(0, "migrate")
    mine.state.save()
    other = Sandbox(SandboxConfig(workdir=tmp_path, brokers=3))
    assert other.config.migration == "migrating"  # the work dir's migration, taken over at once
    other.config = other.config.with_(migration=None, broker_phases={}, controller_ports=None).validate()
    other.state.save()
    mine.state.load()
    assert mine.config.migration is None and mine.config.controller_ids == [] and type(mine.meta) is ZooKeeperMode


def test_a_revert_rolls_brokers_back_once_the_controllers_are_gone(tmp_path):
    """``reverting`` (the controllers deprovisioned): the brokers still in migration mode are
    written as plain ZooKeeper brokers (their next start is without the migration settings), go
    back one by one with --phase zookeeper, and the last one ends the migration."""
    m = _migrating(tmp_path).with_broker_phase(0, "migrate").with_broker_phase(2, "migrate")
    rev = m.with_(migration="reverting", controller_ports=None).validate()
    assert rev.controller_ids == [] and rev.broker_phase(0) == "migrate" and rev.broker_phase(1) == "zookeeper"
    props = rev.broker_properties(0)
    assert props["broker.id"] == "0" and not {"zookeeper.metadata.migration.enable", "controller.quorum.voters",
                                              "controller.listener.names"} & set(props)
    with pytest.raises(BadInput, match="goes back with --phase zookeeper"):
        rev.with_broker_phase(1, "migrate")
    with pytest.raises(BadInput, match="goes back with --phase zookeeper"):
        rev.with_broker_phase(0, "kraft")
    # a plain restart (no --phase) of a broker in migration mode is its step back, recorded
    assert [plain_restart_phase(rev, b) for b in (0, 1, 2)] == ["zookeeper", None, "zookeeper"]
    assert plain_restart_phase(m, 0) is None  # while migrating a plain restart keeps the phase
    one = rev.with_broker_phase(0, plain_restart_phase(rev, 0))
    assert one.migration == "reverting" and one.broker_phases == {2: "migrate"}
    done = one.with_broker_phase(2, "zookeeper")
    assert done.migration is None and done.broker_phases == {} and done.controller_ids == []
    with pytest.raises(BadInput, match="no broker runs as a KRaft broker"):
        m.with_broker_phase(2, "kraft").with_(migration="reverting").validate()
