"""Benchmark: throttled reassignment wall time vs the throttle's lower bound, and data moved by
``kops reassign generate --strategy minimal`` vs ``--strategy kafka`` for the same goal.

    .venv/bin/kops sandbox up --workdir /tmp/kops-bench --base-port 19692 --zookeeper-port 19681
    .venv/bin/python bench/bench_reassign.py --bootstrap-server 127.0.0.1:19692 \\
        --partitions 6 --mb-per-partition 16 --throttle 2000000
    .venv/bin/kops sandbox down --workdir /tmp/kops-bench

1. Creates a topic (RF 3, rack-aware), produces ``partitions x mb`` of random bytes, and builds a
   plan that moves one replica of every partition to the other broker of the same rack.
2. Runs ``execute --wait`` in this process (kops.ops.reassign.prepare/start) with ``--throttle``;
   reports wall time, bytes moved, the lower bound ``max(bytes into a destination broker, bytes
   out of a leader) / throttle`` and the ratio (goal: <= 1.10 x bound + one poll interval).
3. For "move the topic off broker B", compares the bytes ``generate --strategy minimal`` moves
   with ``--strategy kafka`` (Kafka's algorithm; mean over 20 random start indexes).

The topic is deleted at the end. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap-server", required=True)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--mb-per-partition", type=int, default=16)
    ap.add_argument("--throttle", type=int, default=2_000_000)
    ap.add_argument("--poll-interval", type=float, default=1.0)
    ap.add_argument("--topic", default=f"bench-reassign-{os.getpid()}")
    args = ap.parse_args()

    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from kops.cluster.config import ClientConfig
    from kops.cluster.connection import Connection
    from kops.model import ReassignmentPlan
    from kops.ops import reassign as R
    from kops.ops.generate import generate
    from kops.ops.progress import LineReporter

    bs = args.bootstrap_server
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(args.topic, args.partitions, 3)])[args.topic].result(30)
    time.sleep(2)
    prod = Producer({"bootstrap.servers": bs, "linger.ms": 20, "batch.size": 1_000_000, "acks": "all"})
    value = os.urandom(100_000)
    for i in range(args.partitions * args.mb_per_partition * 10):
        prod.produce(args.topic, value=value, partition=i % args.partitions)
        if i % 20 == 0:
            prod.poll(0)
    prod.flush(120)
    result: dict = {"partitions": args.partitions, "mb_per_partition": args.mb_per_partition,
                    "throttle": args.throttle}
    conn = Connection(bs, ClientConfig.load(None), timeout_s=15)
    try:
        topo = R.read(conn, sizes=True)
        racks = {b.id: b.rack for b in topo.brokers}
        target = {}
        for p in topo.topic(args.topic).partitions:
            old = p.replicas[1]
            new = next(b for b, r in sorted(racks.items()) if r == racks[old] and b not in p.replicas)
            target[p.tp] = tuple(new if b == old else b for b in p.replicas)
        plan = ReassignmentPlan.from_assignment(target)
        opts = R.ExecuteOptions(throttle=args.throttle, wait=True, poll_interval_s=args.poll_interval,
                                timeout_s=1800)
        prepared = R.prepare(conn, plan, opts)
        bound = prepared.estimated_seconds(args.throttle)
        t0 = time.monotonic()
        outcome = R.start(conn, prepared, opts, reporter=LineReporter(every_s=30))
        wall = time.monotonic() - t0
        result["execute"] = {
            "state": outcome.journal.state,
            "bytes_moved": prepared.bytes_to_move,
            "wall_s": round(wall, 1),
            "lower_bound_s": round(bound, 1) if bound else None,
            "ratio": round(wall / bound, 3) if bound else None,
            "goal_s": round(1.10 * bound + args.poll_interval, 1) if bound else None,
            "within_goal": bool(bound and wall <= 1.10 * bound + args.poll_interval),
            "waves": outcome.journal.waves,
        }
        # data moved: minimal vs Kafka for "move the topic off one broker"
        topo = R.read(conn, sizes=True)
        off = topo.topic(args.topic).partitions[0].replicas[0]
        brokers = [b.id for b in topo.brokers if b.id != off]
        minimal = generate(topo, [args.topic], brokers, strategy="minimal").report
        kafka = [generate(topo, [args.topic], brokers, strategy="kafka", rng=random.Random(s)).report
                 for s in range(20)]
        kb = [k["bytes_moved"] for k in kafka]
        result["generate_off_broker"] = {
            "broker": off,
            "minimal_bytes": minimal["bytes_moved"],
            "minimal_replicas": minimal["replicas_moved"],
            "kafka_bytes_mean": round(sum(kb) / len(kb)) if all(x is not None for x in kb) else None,
            "kafka_replicas_mean": sum(k["replicas_moved"] for k in kafka) / len(kafka),
        }
    finally:
        conn.close()
        admin.delete_topics([args.topic])[args.topic].result(30)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
