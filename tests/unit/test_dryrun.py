"""The dry run of an execution (pure): waves by the engine's own next_wave, the throttles it
would write, bytes per destination, disk before / peak / after."""

from __future__ import annotations

from kops.model import Broker, LogDir, Partition, Topic, Topology
from kops.ops.dryrun import simulate
from kops.ops.reassign import ExecuteOptions, Prepared
from kops.ops.move import Move

MIB = 1024 * 1024


def _prepared() -> Prepared:
    # brokers 0-2 hold the three 100 MiB partitions; broker 3 is empty
    brokers = tuple(Broker(b, rack="abc"[b % 3], alive=True,
                           log_dirs=(LogDir("/d", total_bytes=1000 * MIB,
                                            usable_bytes=(700 if b < 3 else 1000) * MIB),)) for b in range(4))
    parts = tuple(Partition("t", i, (0, 1, 2), isr=(0, 1, 2), leader=0, size_bytes=100 * MIB) for i in range(3))
    topo = Topology(brokers=brokers, topics=(Topic("t", parts),))
    moves = [Move("t", i, (0, 1, 2), (3, 1, 2), size_bytes=100 * MIB) for i in range(3)]
    moves.append(Move("t", 9, (0, 1, 2), (1, 0, 2), size_bytes=100 * MIB))  # reorder only
    return Prepared(topo, moves)


def test_waves_throttles_bytes_and_disk():
    doc = simulate(_prepared(), ExecuteOptions(throttle=10 * MIB, max_moves_per_broker=1))
    assert doc["data_moves"] == 3 and doc["reorders"] == 1
    # one move per broker at a time: broker 3 receives them one after the other
    assert [len(w["partitions"]) for w in doc["waves"]] == [2, 1, 1]
    assert [w["starts_after_s"] for w in doc["waves"]] == [0.0, 10.0, 20.0]
    assert doc["estimated_seconds"] == 30.0 and doc["estimated_seconds_lower_bound"] == 30.0
    first = doc["waves"][0]["throttles"]
    assert first["brokers"]["3"] == {"follower.replication.throttled.rate": str(10 * MIB)}
    assert first["brokers"]["0"] == {"leader.replication.throttled.rate": str(10 * MIB)}
    assert first["topics"]["t"] == {"follower.replication.throttled.replicas": "0:3",
                                    "leader.replication.throttled.replicas": "0:0,0:1,0:2"}
    assert doc["bytes_by_destination"] == {"3": 300 * MIB}
    disk = {d["broker"]: d for d in doc["disk"]}
    assert (disk[3]["used_before"], disk[3]["used_peak"], disk[3]["used_after"]) == (0, 300 * MIB, 300 * MIB)
    assert disk[3]["peak_pct"] == 30.0
    # broker 0 gives its replicas away as their moves finish: its peak is where it started
    assert (disk[0]["used_before"], disk[0]["used_peak"], disk[0]["used_after"]) == (300 * MIB, 300 * MIB, 0)
    assert 1 not in disk  # neither gains nor loses


def test_without_limits_everything_starts_at_once_and_shares_the_throttle():
    doc = simulate(_prepared(), ExecuteOptions(throttle=10 * MIB))
    assert len(doc["waves"]) == 1 and len(doc["waves"][0]["partitions"]) == 4
    assert doc["estimated_seconds"] == 30.0  # three moves share broker 3's 10 MiB/s


def test_unknown_sizes_give_no_estimate():
    p = _prepared()
    p.moves[0] = Move("t", 0, (0, 1, 2), (3, 1, 2), size_bytes=None)
    doc = simulate(p, ExecuteOptions(throttle=10 * MIB))
    assert doc["estimated_seconds"] is None and doc["waves"][0]["starts_after_s"] is None
