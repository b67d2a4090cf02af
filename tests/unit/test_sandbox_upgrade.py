"""A rolling upgrade of the sandbox's Kafka (kops.sandbox.upgrade): the pure parts -- which node
runs which Kafka, what is refused, each node's command line and logging, what the state file
keeps and what another process (a playbook's hook) takes over. No cluster, no JVM."""

from __future__ import annotations

import json

import pytest

from kops.errors import BadInput
from kops.sandbox.cluster import Sandbox
from kops.sandbox.config import SandboxConfig


def _kraft(tmp_path, **kw) -> SandboxConfig:
    return SandboxConfig(workdir=tmp_path, brokers=3, mode="kraft", kafka_version="3.9.2", controllers=3,
                         **kw).validate()


def test_each_node_runs_its_own_kafka_with_its_own_logging(tmp_path):
    cfg = _kraft(tmp_path, node_versions={1: "4.4.0", 1001: "4.4.0"})
    assert [cfg.version_of(n) for n in (0, 1, 2, 1000, 1001)] == ["3.9.2", "4.4.0", "3.9.2", "3.9.2", "4.4.0"]
    assert cfg.versions == ["3.9.2", "4.4.0"]
    old = cfg.jvm_command(0, java="java", classpath="cp")
    new = cfg.jvm_command(1, java="java", classpath="cp")
    # Kafka 4 logs through log4j2 (its own file next to the log4j 1 one of 3.9)
    assert f"-Dlog4j.configuration=file:{cfg.config_dir / 'log4j.properties'}" in old
    assert f"-Dlog4j2.configurationFile={cfg.config_dir / 'log4j2.yaml'}" in new
    assert cfg.broker_properties(1) == cfg.with_(node_versions={}).broker_properties(1)  # only the jars change


@pytest.mark.parametrize("kw, why", [
    ({"node_versions": {1: "3.6.2"}}, "--mode kraft needs Kafka 3.7 or later"),
    ({"node_versions": {7: "4.4.0"}}, "name nodes [7] that the sandbox does not have"),
    ({"node_versions": {1: "4.4.0"}, "engine": "docker"}, "runs local JVMs only"),
    ({"node_versions": {1: "x.y"}}, "x.y"),
])
def test_what_a_node_cannot_run_is_refused(tmp_path, kw, why):
    with pytest.raises(BadInput, match=why.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        _kraft(tmp_path, **kw)


def test_a_zookeeper_broker_is_not_upgraded_past_39_nor_during_a_migration(tmp_path):
    with pytest.raises(BadInput, match="no ZooKeeper mode"):
        SandboxConfig(workdir=tmp_path, brokers=3, kafka_version="3.8.1", node_versions={0: "4.0.0"}).validate()
    ok = SandboxConfig(workdir=tmp_path, brokers=3, kafka_version="3.8.1", node_versions={0: "3.9.2"}).validate()
    assert ok.version_of(0) == "3.9.2"
    with pytest.raises(BadInput, match="not during it"):
        SandboxConfig(workdir=tmp_path, brokers=3, kafka_version="3.9.2", migration="migrating", controllers=1,
                      node_versions={0: "3.9.2"}).validate()


def test_versions_survive_the_state_file_and_another_process_takes_them_over(tmp_path):
    mine = Sandbox(_kraft(tmp_path))  # e.g. a test's fixture
    mine.state.save()
    hook = Sandbox(_kraft(tmp_path))  # `kops sandbox upgrade`, in a playbook hook's process
    hook.config = hook.upgrade._with_version([1000, 1], "4.4.0")
    hook.state.save()
    doc = json.loads((tmp_path / "sandbox.json").read_text())
    assert doc["config"]["node_versions"] == {"1": "4.4.0", "1000": "4.4.0"}
    assert doc["kafka_version"] == "3.9.2"  # the sandbox's own Kafka: what it was made with
    mine.state.load()
    assert mine.config.version_of(1) == mine.config.version_of(1000) == "4.4.0"
    assert {b["id"]: b["kafka_version"] for b in mine.to_dict()["brokers"]} == {0: "3.9.2", 1: "4.4.0", 2: "3.9.2"}
    # back to the sandbox's own version: no longer recorded as another
    hook.config = hook.upgrade._with_version([1, 1000], "3.9.2")
    hook.state.save()
    mine.state.load()
    assert mine.config.node_versions == {}
