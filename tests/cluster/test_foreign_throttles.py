"""Throttle rates a broker applies from elsewhere than its own dynamic config: a rate in its
static ``server.properties`` and the cluster-wide dynamic default (the ``<default>`` broker
entity). kops reports them (``cluster describe``), overrides them with its own per-broker rate
while its moves run, and afterwards leaves no per-broker entry behind: the broker applies the
inherited rates again, as it did before, and an operator's later change of the default still
reaches it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

from tests.cluster import kafka_helpers
from tests.cluster.sandboxes import own_sandbox

pytestmark = pytest.mark.cluster

LEADER = "leader.replication.throttled.rate"
FOLLOWER = "follower.replication.throttled.rate"
STATIC_RATE = "5000000"  # every broker's server.properties
DEFAULT_RATE = "7000000"  # the <default> entity


def _set_default(bootstrap: str, key: str, value: str) -> None:
    """Set a config of the ``<default>`` broker entity with Kafka's own ``kafka-configs.sh
    --entity-default`` (confluent-kafka and kafka-python both refuse a broker resource with an
    empty name, which is how the protocol names it)."""
    from kops.sandbox.dist import java_tool

    r = java_tool("kafka.admin.ConfigCommand", ["--bootstrap-server", bootstrap, "--entity-type", "brokers",
                                                "--entity-default", "--alter", "--add-config", f"{key}={value}"])
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.fixture(scope="module")
def inheriting_cluster(tmp_path_factory, request):
    """Three brokers (Kafka 3.9, ZooKeeper, racks a, b, c) with a static leader rate and a
    cluster-wide default follower rate."""
    from kops.sandbox import Sandbox

    yield from own_sandbox(Sandbox, tmp_path_factory, request, "kops-foreign-throttles", "foreign-throttles sandbox",
                           brokers=3, racks="a,b,c", extra_properties={LEADER: STATIC_RATE},
                           setup=lambda sb: _set_default(sb.bootstrap_servers, FOLLOWER, DEFAULT_RATE))


def _throttle_sources(bootstrap: str, brokers) -> dict[int, dict[str, tuple[str, str]]]:
    """Per broker, each throttle rate it applies: (value, where it comes from)."""
    a = AdminClient({"bootstrap.servers": bootstrap})
    out = {}
    for b in brokers:
        res = ConfigResource(ResourceType.BROKER, str(b))
        entries = a.describe_configs([res], request_timeout=10)[res].result(15)
        out[b] = {k: (entries[k].value, ConfigSource(entries[k].source).name) for k in (LEADER, FOLLOWER)
                  if k in entries and not entries[k].is_default}
    return out


@pytest.fixture
def kops_home(tmp_path, monkeypatch):
    monkeypatch.setenv("KOPS_HOME", str(tmp_path / "kops-home"))
    return tmp_path / "kops-home"


def _kops(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kops", *args], capture_output=True, text=True, timeout=180)


def test_inherited_rates_are_reported_overridden_then_apply_again(inheriting_cluster, tmp_path, kops_home):
    sb = inheriting_cluster
    bootstrap = sb.bootstrap_servers
    inherited = {b: {LEADER: (STATIC_RATE, "STATIC_BROKER_CONFIG"), FOLLOWER: (DEFAULT_RATE, "DYNAMIC_DEFAULT_BROKER_CONFIG")}
                 for b in sb.broker_ids}
    kafka_helpers.wait_for(lambda: _throttle_sources(bootstrap, sb.broker_ids) == inherited, 30, 0.3,
                           "every broker to apply the static and the default rate")

    r = _kops("cluster", "describe", "--bootstrap-server", bootstrap, "--output", "json")
    assert r.returncode == 0, r.stderr
    notes = json.loads(r.stdout)["notes"]
    for b in sb.broker_ids:
        assert f"broker {b}: {LEADER}={STATIC_RATE} from its server.properties; it throttles" in "\n".join(notes)
        assert f"broker {b}: {FOLLOWER}={DEFAULT_RATE} from the cluster-wide dynamic default (entity <default>)" \
            in "\n".join(notes)

    before = kafka_helpers.create_topic(bootstrap, "inherits", 2, 2, min_isr=1, mb_per_partition=3)
    target = {p: [r[0], next(b for b in sb.broker_ids if b not in r)] for p, r in before.items()}
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "inherits", "partition": p, "replicas": reps} for p, reps in sorted(target.items())]}))
    r = _kops("reassign", "execute", "--reassignment-json-file", str(plan), "--throttle", "2000000", "--wait", "--yes",
              "--poll-interval", "1", "--bootstrap-server", bootstrap, "--output", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["state"] == "complete" and doc["throttles_left"] == []
    assert kafka_helpers.replicas(bootstrap, "inherits") == target

    # no per-broker entry left: each broker applies the inherited rates again, from their sources
    kafka_helpers.wait_for(lambda: _throttle_sources(bootstrap, sb.broker_ids) == inherited, 30, 0.3,
                           "the brokers to apply the inherited rates again")
    # and the operator's later change of the default reaches every broker
    _set_default(bootstrap, FOLLOWER, "9000000")
    kafka_helpers.wait_for(
        lambda: {b: s[FOLLOWER] for b, s in _throttle_sources(bootstrap, sb.broker_ids).items()}
        == dict.fromkeys(sb.broker_ids, ("9000000", "DYNAMIC_DEFAULT_BROKER_CONFIG")),
        30, 0.3, "the new default on every broker")
