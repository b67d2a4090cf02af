"""Replacing a broker that is lost for good (offline): the replace-broker plan when the old broker
is gone from the metadata (its rack unknown), and the health gate that tolerates what only the
dead broker causes (`tolerate_down`)."""

from __future__ import annotations

import pytest

from kops.errors import BadInput
from kops.model import Broker, Partition, Topic, Topology
from kops.placement.replace import replace_broker
from kops.playbook.library import find
from kops.playbook.spec import parse_playbook, resolve_fields
from kops.playbook.steps import evaluate

RACKS = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}


def _topo(dead: int | None = 3, new: dict[int, str] | None = None, extra_partitions=()) -> Topology:
    """6 brokers in racks a,a,b,b,c,c (``dead`` down: as kops reads a dead broker, no rack, not
    alive) plus ``new`` brokers; topic t: RF 3 over the racks, min.insync.replicas=2."""
    brokers = [Broker(b, None, alive=False) if b == dead else Broker(b, r) for b, r in RACKS.items()]
    brokers += [Broker(b, r) for b, r in (new or {}).items()]
    assign = {0: (0, 2, 4), 1: (3, 5, 1), 2: (4, 3, 0), 3: (1, 5, 2)}
    parts = []
    for p, reps in assign.items():
        isr = tuple(b for b in reps if b != dead)
        parts.append(Partition("t", p, reps, isr, isr[0]))
    parts += list(extra_partitions)
    return Topology(tuple(brokers), (Topic("t", tuple(parts), configs={"min.insync.replicas": "2"}),))


def test_replace_a_dead_broker_by_one_of_its_rack():
    changes = replace_broker(_topo(new={6: "b"}), 3, 6)
    assert changes == {("t", 1): (6, 5, 1), ("t", 2): (4, 6, 0)}


def test_replace_a_dead_broker_by_one_that_would_crowd_a_rack_is_refused():
    with pytest.raises(BadInput) as e:
        replace_broker(_topo(new={6: "c"}), 3, 6)
    d = " ".join(e.value.details)
    assert "broker 3 is down and gone from the cluster metadata, so its rack is unknown" in d
    assert "2 partitions rack-unsafe" in d and "t-1 [3, 5, 1]" in d


def test_replace_a_live_broker_still_needs_the_same_rack():
    with pytest.raises(BadInput) as e:
        replace_broker(_topo(dead=None, new={6: "c"}), 3, 6)
    assert "a 1:1 replacement stays in the same rack" in " ".join(e.value.details)


def _gate(topo: Topology, **fields) -> tuple[bool, str]:
    return evaluate("healthy", fields, topo, None)


def test_health_gate_tolerates_only_what_the_dead_broker_causes():
    topo = _topo(new={6: "b"})
    ok, why = _gate(topo)
    assert not ok  # under-replicated, at min ISR, broker down
    ok, why = _gate(topo, tolerate_down=[3])
    assert ok and "broker(s) [3] being down" in why
    # another broker's replica out of the ISR is not explained by broker 3
    lagging = Partition("t", 4, (0, 3, 5), (0,), 0)
    ok, why = _gate(_topo(new={6: "b"}, extra_partitions=[lagging]), tolerate_down=[3])
    assert not ok and "t-4" in why
    # an offline partition never passes
    offline = Partition("t", 4, (3,), (), None)
    ok, why = _gate(_topo(new={6: "b"}, extra_partitions=[offline]), tolerate_down=[3])
    assert not ok and "t-4" in why
    # a broker named but alive changes nothing: the gate is the plain one
    assert _gate(_topo(dead=None), tolerate_down=[3]) == (True, "healthy")


def test_replace_broker_playbook_gate_tolerates_the_old_broker():
    pb = find("replace-broker")
    gate = pb.steps[0]
    assert gate.type == "health_gate"
    assert resolve_fields(gate, {"old": 3, "new": 6})["tolerate_down"] == [3]
    with pytest.raises(BadInput) as e:
        parse_playbook("name: x\nsteps:\n  - {id: g, type: health_gate, tolerate_down: abc}\n")
    assert "field 'tolerate_down'" in " ".join(e.value.details)
