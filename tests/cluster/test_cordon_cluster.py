"""``kops broker cordon | uncordon | cordons`` on the live sandbox (ZooKeeper, Kafka 3.9: no
cordon of Kafka's own, so kops' record is the whole cordon): the record is in the cluster and
seen by ``cluster describe`` and every planner; a cordoned broker keeps what it holds and gets
no new replica; an unknown broker is refused (exit 2) with nothing written. Kafka's own cordon
(KIP-1066, 4.3+) is exercised by the version matrix (tests/compat/test_workflow.py)."""

from __future__ import annotations

import json

import pytest

from tests.cluster.kafka_helpers import create_topic, delete_topic, kops

pytestmark = pytest.mark.cluster


def _json(*args: str, bootstrap: str) -> tuple[int, dict]:
    r = kops(*args, "--bootstrap-server", bootstrap, "--output", "json", timeout=180)
    return r.returncode, (json.loads(r.stdout) if r.stdout.strip() else {})


def _gained(topic_before: dict[int, list[int]], plan: dict) -> dict[int, int]:
    """Per broker, the replicas the plan gives it that it did not hold."""
    out: dict[int, int] = {}
    for e in plan["partitions"]:
        for b in set(e["replicas"]) - set(topic_before[e["partition"]]):
            out[b] = out.get(b, 0) + 1
    return out


def test_a_cordoned_broker_gets_no_new_replica_from_a_plan(sandbox, bootstrap, unique_topic):
    topic = unique_topic("cordon")
    # stacked on brokers 0, 2 and 4 (one per rack): a rebalance spreads it onto 1, 3 and 5
    before = create_topic(bootstrap, topic, assignment={p: [(0, 2, 4)[p % 3], (2, 4, 0)[p % 3]] for p in range(12)})
    try:
        rc, free = _json("plan", "rebalance", "--topics", topic, bootstrap=bootstrap)
        assert rc == 0, free
        assert {1, 3} <= set(_gained(before, free["plan"])), "uncordoned, the plan fills 1 and 3 (the premise)"

        rc, out = _json("broker", "cordon", "1", "3", "--reason", "suspect disks", bootstrap=bootstrap)
        assert rc == 0, out
        assert out["changed"] == [1, 3]
        assert "needs Kafka 4.3" in out["kafka_cordon"]["1"], out  # 3.9 has no cordon of its own
        rc, again = _json("broker", "cordon", "3", bootstrap=bootstrap)
        assert (rc, again["changed"], again["unchanged"]) == (0, [], [3])

        rc, listed = _json("broker", "cordons", bootstrap=bootstrap)
        assert rc == 0
        rows = {r["broker"]: r for r in listed["cordoned"]}
        assert sorted(rows) == [1, 3] and rows[1]["reason"] == "suspect disks" and rows[1]["since"]
        rc, snap = _json("cluster", "describe", "--topic", topic, bootstrap=bootstrap)
        assert sorted(b["id"] for b in snap["brokers"] if b.get("cordoned")) == [1, 3]

        rc, cordoned = _json("plan", "rebalance", "--topics", topic, bootstrap=bootstrap)
        assert rc == 0, cordoned
        gained = _gained(before, cordoned["plan"])
        assert not {1, 3} & set(gained), gained
        assert gained.get(5), "the broker not cordoned still gets its share"
        assert cordoned["report"]["cordoned"] == [1, 3]

        # a broker that is not in the cluster: refused, nothing written
        rc, err = _json("broker", "cordon", "5", "77", bootstrap=bootstrap)
        assert rc == 2 and "77" in json.dumps(err)
        rc, listed = _json("broker", "cordons", bootstrap=bootstrap)
        assert sorted(r["broker"] for r in listed["cordoned"]) == [1, 3]
    finally:
        rc, out = _json("broker", "uncordon", "1", "3", bootstrap=bootstrap)
        delete_topic(bootstrap, topic)
    assert (rc, out["changed"]) == (0, [1, 3]), out
    rc, listed = _json("broker", "cordons", bootstrap=bootstrap)
    assert listed["cordoned"] == []
    rc, snap = _json("cluster", "describe", bootstrap=bootstrap)
    assert not [b["id"] for b in snap["brokers"] if b.get("cordoned")]
