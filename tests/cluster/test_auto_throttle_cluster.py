"""``--throttle auto`` on a real cluster: the rate rises on the brokers while the copy is held back,
halves when a partition kops is not moving loses an in-sync replica (a broker stopped), and every
throttle is lifted at the end; a ``--probe-topic`` that does not exist is refused, nothing changed.

Four brokers of the test's own (Kafka 3.9, ZooKeeper): ``big`` (60 MiB) moves from broker 0 to
brokers 0 and 1; ``bystander`` lives on brokers 2 and 3, which the move never touches: stopping
broker 3 shrinks its ISR, which is the harm the adaptive throttle must see.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

from tests.cluster import kafka_helpers
from tests.cluster.sandboxes import own_sandbox

pytestmark = pytest.mark.cluster

MiB = 1024 * 1024
FOLLOWER = "follower.replication.throttled.rate"
LEADER = "leader.replication.throttled.rate"


@pytest.fixture(scope="module")
def four(tmp_path_factory, request):
    from kops.sandbox import Sandbox

    yield from own_sandbox(Sandbox, tmp_path_factory, request, "kops-auto-throttle", "auto-throttle sandbox",
                           brokers=4, racks="a,b,c,d")


@pytest.fixture
def kops_home(tmp_path, monkeypatch):
    monkeypatch.setenv("KOPS_HOME", str(tmp_path / "kops-home"))
    return tmp_path / "kops-home"


def _rates(bootstrap: str, brokers) -> dict[int, dict[str, int]]:
    """Per broker, the throttle rates in its own dynamic config."""
    a = AdminClient({"bootstrap.servers": bootstrap})
    out = {}
    for b in brokers:
        res = ConfigResource(ResourceType.BROKER, str(b))
        entries = a.describe_configs([res], request_timeout=10)[res].result(15)
        out[b] = {k: int(entries[k].value) for k in (LEADER, FOLLOWER)
                  if k in entries and entries[k].value and entries[k].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value}
    return out


def _execution(bootstrap: str) -> dict | None:
    r = kafka_helpers.kops("reassign", "list", "--bootstrap-server", bootstrap, "--output", "json", timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    runs = json.loads(r.stdout)["kops_executions"]
    return runs[-1] if runs else None


def test_a_probe_topic_that_does_not_exist_is_refused_before_anything_changes(four, tmp_path, kops_home):
    bootstrap = four.bootstrap_servers
    kafka_helpers.create_topic(bootstrap, "probe-refused", partitions=1, rf=1, min_isr=1, assignment={0: [0]})
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "probe-refused", "partition": 0,
                                                              "replicas": [1]}]}))
    r = kafka_helpers.kops("reassign", "execute", "--reassignment-json-file", str(plan), "--bootstrap-server",
                           bootstrap, "--throttle", "auto", "--probe-topic", "no-such-canary", "-y", timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--probe-topic no-such-canary: no such topic" in r.stderr
    assert kafka_helpers.replicas(bootstrap, "probe-refused") == {0: [0]}
    assert _execution(bootstrap) is None and not kafka_helpers.ongoing(bootstrap)
    r = kafka_helpers.kops("reassign", "execute", "--reassignment-json-file", str(plan), "--bootstrap-server",
                           bootstrap, "--throttle", "5M", "--probe-topic", "canary", "-y", timeout=120)
    assert r.returncode == 2 and "give --throttle auto" in r.stderr, r.stdout + r.stderr


def test_the_rate_rises_halves_on_harm_and_is_lifted_at_the_end(four, tmp_path, kops_home):
    sb = four
    bootstrap = sb.bootstrap_servers
    kafka_helpers.create_topic(bootstrap, "big", partitions=1, rf=1, min_isr=1, mb_per_partition=60,
                               assignment={0: [0]})
    kafka_helpers.create_topic(bootstrap, "bystander", partitions=2, rf=2, min_isr=1,
                               assignment={0: [2, 3], 1: [3, 2]})
    kafka_helpers.create_topic(bootstrap, "canary", partitions=1, rf=2, min_isr=1, assignment={0: [2, 0]})
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "big", "partition": 0, "replicas": [0, 1]}]}))
    run = subprocess.Popen(
        [sys.executable, "-m", "kops", "reassign", "execute", "--reassignment-json-file", str(plan),
         "--bootstrap-server", bootstrap, "--throttle", "auto:1M-4M", "--probe-topic", "canary", "--wait",
         "--progress", "lines", "--poll-interval", "1", "-y"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    stopped = False
    try:
        # it starts at the minimum on the brokers of the move, and rises while nothing suffers
        kafka_helpers.wait_for(lambda: _rates(bootstrap, [0, 1]) == {0: {LEADER: MiB}, 1: {FOLLOWER: MiB}},
                               60, 0.5, "the minimum rate on brokers 0 (leader) and 1 (follower)")
        kafka_helpers.wait_for(lambda: _rates(bootstrap, [1])[1].get(FOLLOWER) == int(1.5 * MiB), 60, 0.5,
                               "the rate raised to 1.5 MiB/s on broker 1")
        first = _execution(bootstrap)
        assert first["throttle"] == int(1.5 * MiB) and first["throttle_auto"] == {"min": MiB, "max": 4 * MiB}
        assert "throttle auto: 1.0 MiB/s -> 1.5 MiB/s (no harm seen, the copy held back by the throttle)" \
            in first["throttle_last_change"]
        assert kafka_helpers.ongoing(bootstrap), "the move ended before the harm could be shown: more data needed"

        # harm: a broker the move never touches stops; bystander's partitions lose a replica
        sb.stop(3)
        stopped = True
        kafka_helpers.wait_for(lambda: _rates(bootstrap, [1])[1].get(FOLLOWER) == MiB, 60, 0.5,
                               "the rate halved (to the minimum) on broker 1")
        cut = _execution(bootstrap)["throttle_last_change"]
        assert "throttle auto: 1.5 MiB/s -> 1.0 MiB/s (harm: " in cut
        # the first look after the stop names what had shrunk by then: bystander-1 (led by 3, a new leader
        # at once) or bystander-0 (3 its follower), maybe kops' journal too -- never the partition it moves
        assert ("bystander-0 lost an in-sync replica (ISR [2] of [2, 3])" in cut
                or "bystander-1 lost an in-sync replica (ISR [2] of [3, 2])" in cut), cut
        assert "big-0" not in cut, cut
        assert kafka_helpers.ongoing(bootstrap), "the fault must land while the move runs"
        sb.start(3)
        stopped = False
        out, err = run.communicate(timeout=400)
    finally:
        if stopped:
            sb.start(3)
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 0, out + err
    assert "throttle auto: 1.0 MiB/s -> 1.5 MiB/s" in err and "-> 1.0 MiB/s (harm: " in err  # shown as they happened
    assert "throttle auto: " in err and "change(s) between 1.0 MiB/s and" in err
    assert kafka_helpers.replicas(bootstrap, "big") == {0: [0, 1]}
    assert _rates(bootstrap, sb.broker_ids) == {b: {} for b in sb.broker_ids}  # every throttle lifted
    kafka_helpers.assert_lock_released(bootstrap)
