"""Throttle rates that come from elsewhere than kops during an execution -- the class of fault that
hangs tools waiting for "their" throttle to go (Cruise Control): a rate in one broker's static
server.properties and a cluster-wide dynamic default (the ``<default>`` broker entity), on the
containerised cluster under the workload."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import ConfigResource, ResourceType

from kops.cluster.topology import config_source
from tests.faults.helpers import admin, throttles_set, wait_for, wait_fully_replicated
from tests.faults.test_reassign_faults import execute_through

pytestmark = pytest.mark.faults

LEADER = "leader.replication.throttled.rate"
FOLLOWER = "follower.replication.throttled.rate"
STATIC_RATE = "5000000"
DEFAULT_RATE = "7000000"


def _default(bootstrap: str, action: list[str]) -> None:
    """``kafka-configs.sh --entity-default`` (confluent-kafka and kafka-python refuse a broker
    resource with an empty name, which is how the protocol names the default)."""
    from kops.sandbox.dist import java_tool

    r = java_tool("kafka.admin.ConfigCommand", ["--bootstrap-server", bootstrap, "--entity-type", "brokers",
                                                "--entity-default", "--alter", *action])
    assert r.returncode == 0, r.stdout + r.stderr


def _rates(bootstrap: str, broker: int) -> dict[str, tuple[str, str | None]]:
    """The throttle rates ``broker`` applies: (value, where it comes from)."""
    res = ConfigResource(ResourceType.BROKER, str(broker))
    entries = admin(bootstrap).describe_configs([res], request_timeout=10)[res].result(15)
    return {k: (entries[k].value, config_source(entries[k])) for k in (LEADER, FOLLOWER)
            if k in entries and not entries[k].is_default}


def _restart_with(sb, broker: int, text: str) -> None:
    sb.broker_properties_file(broker).write_text(text)
    sb.stop(broker=broker)
    sb.start(broker=broker)
    wait_fully_replicated(sb.bootstrap_servers, 120, f"broker {broker} back in every ISR")


def test_static_and_default_throttle_rates_during_execute(dsandbox, dbootstrap, tmp_path, kops_home, record):
    """k. One broker has a leader rate in its static server.properties and the cluster has a
    default follower rate; `execute --wait` with its own --throttle runs while they are in force:
    kops overrides them per broker while its moves run (seen during the execution), completes
    (exit 0), leaves no per-broker entry, and never touches the operator's rates: the static
    rate and the default are in force again afterwards."""
    sb, bs = dsandbox, dbootstrap
    static = sb.broker_ids[0]
    props = sb.broker_properties_file(static)
    original = props.read_text()
    default_set = False
    try:
        _restart_with(sb, static, original.rstrip("\n") + f"\n{LEADER}={STATIC_RATE}\n")
        _default(bs, ["--add-config", f"{FOLLOWER}={DEFAULT_RATE}"])
        default_set = True
        other = sb.broker_ids[1]
        wait_for(lambda: _rates(bs, static).get(LEADER) == (STATIC_RATE, "STATIC_BROKER_CONFIG")
                 and _rates(bs, other).get(FOLLOWER) == (DEFAULT_RATE, "DYNAMIC_DEFAULT_BROKER_CONFIG"), 30, 0.5,
                 "the static and the default rates in force")
        assert throttles_set(bs) == {}  # inherited rates are the operator's, not a leftover

        def while_moving(moving) -> str:
            mine = {k: v for k, v in throttles_set(bs).items() if k.startswith("broker ")}  # kops' own rates
            left = moving()
            assert left > 0, "the moves had finished before the rates were read"
            assert mine and all(set(v.values()) == {"1000000"} for v in mine.values()), mine
            return (f"broker {static}: static leader rate {STATIC_RATE}, cluster default follower rate {DEFAULT_RATE}; "
                    f"kops' 1 MB/s set on {len(mine)} brokers with {left} moves in flight")

        execute_through(sb, tmp_path, record, while_moving,
                        scenario="k. static server.properties and cluster-default throttle rates during `execute`")
        assert _rates(bs, static).get(LEADER) == (STATIC_RATE, "STATIC_BROKER_CONFIG")
        assert _rates(bs, other).get(FOLLOWER) == (DEFAULT_RATE, "DYNAMIC_DEFAULT_BROKER_CONFIG")
    finally:  # what this test set, and only that: a failed set-up's error stays the one reported
        try:
            if default_set:
                _default(bs, ["--delete-config", FOLLOWER])
        finally:
            if props.read_text() != original:
                _restart_with(sb, static, original)
