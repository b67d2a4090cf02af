"""Benchmark: minimal-movement decommission plan on a synthetic 1M-replica cluster.

1,000 brokers in 50 racks (20 each), 333,334 partitions x RF 3 (1,000,002 replicas) in 1,000
topics, rack-safe but mildly unbalanced (a seeded ~10% skew of broker popularity), partition
sizes 1 MiB - 10 GiB (log-uniform) unless --no-sizes; one broker (id 0) is decommissioned.

    .venv/bin/python bench/bench_plan.py [--no-sizes] [--brokers 1000 --racks 50 --partitions 333334]
    .venv/bin/python bench/bench_plan.py --no-sizes --hot 10 --hot-weight 20     # skewed onto hot brokers
    .venv/bin/python bench/bench_plan.py --rates --capacities --goals all        # issue 21: every goal

``--hot N --hot-weight W``: N brokers (spread over the racks) are W times as popular as the others
when the synthetic cluster is placed (a cluster skewed onto a few hot brokers). ``--rates``: each
partition gets a bytes-in rate (log-uniform 100 B/s - 1 MiB/s). ``--capacities``: heterogeneous
brokers (every fourth one has twice the disk and network; disks sized so the mean use is ~50 %).
``--goals``: as ``kops plan --goals``.

Side by side with other code (a worktree of an earlier commit, say), in one run:

    git worktree add /tmp/kops-base <commit>
    .venv/bin/python bench/bench_plan.py --rates --capacities --goals all --against /tmp/kops-base --rounds 2

runs the same plan with this checkout's kops and with the one at ``--against`` (each run a process
of its own, alternating, so that both see the same machine), and prints each one's figures and
whether their plans and reports are byte-identical (a digest of the target and the report).

Prints wall time of the plan (Topology in memory -> plan + report), peak RSS of the process
(resource.getrusage, includes building the synthetic topology), replicas/bytes moved against
the lower bound, and what Kafka's --generate would move for the same goal.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

# the kops to measure: this checkout's, or another tree's (--tree, for --against's runs)
sys.path.insert(0, sys.argv[sys.argv.index("--tree") + 1] if "--tree" in sys.argv else str(Path(__file__).resolve().parents[1]))

from kops.model import Broker, Partition, Topic, Topology  # noqa: E402


def synthetic(n_brokers: int, n_racks: int, n_partitions: int, rf: int, sizes: bool, seed: int = 42, *,
              hot: int = 0, hot_weight: float = 1.0, rates: bool = False, capacities: bool = False) -> Topology:
    rng = random.Random(seed)
    brokers = tuple(Broker(b, rack=f"rack-{b % n_racks:02d}") for b in range(n_brokers))
    by_rack: list[list[int]] = [[] for _ in range(n_racks)]
    for b in range(n_brokers):
        by_rack[b % n_racks].append(b)
    # mild imbalance: each broker's popularity in its rack is 1 +- 10%
    weight = [1.0 + rng.uniform(-0.1, 0.1) for _ in range(n_brokers)]
    for b in range(0, n_brokers, max(1, n_brokers // hot) if hot else n_brokers + 1)[:hot]:
        weight[b] *= hot_weight
    cum = []
    for members in by_rack:
        acc, c = 0.0, []
        for b in members:
            acc += weight[b]
            c.append(acc)
        cum.append(c)
    import bisect

    n_topics = 1000
    per_topic = -(-n_partitions // n_topics)
    topics = []
    made = 0
    racks = list(range(n_racks))
    for t in range(n_topics):
        k = min(per_topic, n_partitions - made)
        if k <= 0:
            break
        parts = []
        for i in range(k):
            chosen = rng.sample(racks, rf) if rf <= n_racks else [rng.choice(racks) for _ in range(rf)]
            reps = []
            for r in chosen:
                c = cum[r]
                reps.append(by_rack[r][bisect.bisect_left(c, rng.random() * c[-1])])
            size = int(2 ** rng.uniform(20, 33.2)) if sizes else None
            rate = 2 ** rng.uniform(6.6, 20) if rates else None
            parts.append(Partition(f"topic-{t:04d}", i, tuple(reps), size_bytes=size, bytes_in_per_s=rate))
        made += k
        topics.append(Topic(f"topic-{t:04d}", tuple(parts)))
    topo = Topology(brokers=brokers, topics=tuple(topics))
    if capacities:
        from dataclasses import replace

        from kops.model import Capacity

        disk = sum((p.size_bytes or 2**30) * len(p.replicas) for p in topo.partitions())
        nw = sum((p.bytes_in_per_s or 0.0) * len(p.replicas) for p in topo.partitions())
        unit = sum(2 if b % 4 == 0 else 1 for b in range(n_brokers))
        topo = replace(topo, brokers=tuple(replace(b, capacity=Capacity(
            disk_bytes=int(2 * disk / unit * (2 if b.id % 4 == 0 else 1)),
            nw_in_bytes_per_s=(4 * nw / unit * (2 if b.id % 4 == 0 else 1)) or None,
            nw_out_bytes_per_s=(8 * nw / unit * (2 if b.id % 4 == 0 else 1)) or None)) for b in topo.brokers))
    return topo


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--brokers", type=int, default=1000)
    ap.add_argument("--racks", type=int, default=50)
    ap.add_argument("--partitions", type=int, default=333_334)
    ap.add_argument("--rf", type=int, default=3)
    ap.add_argument("--decommission", type=int, default=0)
    ap.add_argument("--no-sizes", action="store_true")
    ap.add_argument("--throttle", type=int, default=100 * 1024 * 1024)
    ap.add_argument("--hot", type=int, default=0, help="brokers the synthetic cluster is skewed onto")
    ap.add_argument("--hot-weight", type=float, default=10.0)
    ap.add_argument("--rates", action="store_true")
    ap.add_argument("--capacities", action="store_true")
    ap.add_argument("--goals", default=None)
    ap.add_argument("--against", metavar="DIR", help="also run the kops of this tree, side by side")
    ap.add_argument("--rounds", type=int, default=1, help="with --against: runs of each, alternating")
    ap.add_argument("--tree", metavar="DIR", help=argparse.SUPPRESS)  # (read before the imports)
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # (one run's figures, for --against)
    args = ap.parse_args()
    if args.against:
        side_by_side(args)
        return

    t0 = time.perf_counter()
    topo = synthetic(args.brokers, args.racks, args.partitions, args.rf, not args.no_sizes, hot=args.hot,
                     hot_weight=args.hot_weight, rates=args.rates, capacities=args.capacities)
    t1 = time.perf_counter()
    from kops.placement import metrics
    from kops.placement.balancer import plan_decommission

    kafka_time = [0.0, 0.0]
    real_kafka = metrics.kafka_generate

    def timed_kafka(*a, **kw):
        w, c = time.perf_counter(), time.process_time()
        try:
            return real_kafka(*a, **kw)
        finally:
            kafka_time[0] += time.perf_counter() - w
            kafka_time[1] += time.process_time() - c

    metrics.kafka_generate = timed_kafka
    c1 = time.process_time()
    t1 = time.perf_counter()
    res = plan_decommission(topo, [args.decommission], throttle=args.throttle, goals=args.goals)
    t2 = time.perf_counter()
    c2 = time.process_time()
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rep = res.report
    digest = hashlib.sha256(json.dumps([sorted([list(k), list(v)] for k, v in res.target.items()), rep],
                                       sort_keys=True).encode()).hexdigest()[:16]
    if args.json:
        print(json.dumps({"cpu": round(c2 - c1, 1), "wall": round(t2 - t1, 1), "rss_mib": round(peak_kib / 1024),
                          "moved": rep["replicas_moved"], "bytes_moved": rep["bytes_moved"], "digest": digest,
                          "goals": {g: [v.get("before"), v.get("after"), v.get("status")] for g, v in rep["goals"].items()}}))
        return
    lb = rep["lower_bound"]
    kg = rep["kafka_generate"] or {}
    gib = 1024**3
    print(f"cluster: {args.brokers} brokers / {args.racks} racks, {args.partitions} partitions x RF {args.rf} "
          f"= {args.partitions * args.rf} replicas; decommission broker {args.decommission}; balance by {rep['balance_by']}")
    print(f"generate synthetic topology: {t1 - t0:.1f} s")
    print(f"plan (incl. report and Kafka --generate comparison): {t2 - t1:.1f} s wall, {c2 - c1:.1f} s CPU "
          f"(of which the Kafka --generate comparison: {kafka_time[0]:.1f} s wall, {kafka_time[1]:.1f} s CPU)")
    print(f"peak RSS: {peak_kib / 1024:.0f} MiB")
    print(f"replicas moved: {rep['replicas_moved']}  lower bound: {lb['moves']} (mandatory {lb['moves_mandatory']})")
    if rep["bytes_moved"] is not None:
        to_mean = lb.get("bytes_to_reach_mean")
        print(f"bytes moved: {rep['bytes_moved'] / gib:.1f} GiB  lower bound (mandatory): {lb['bytes_mandatory'] / gib:.1f} GiB"
              + (f", bringing every broker exactly to the mean needs >= {to_mean / gib:.1f} GiB" if to_mean is not None else ""))
    print(f"partitions changed: {rep['partitions_changed']} (reorder only: {rep['reorder_only_partitions']}), "
          f"preferred-leader changes: {rep['preferred_leader_changes']}")
    if kg.get("available"):
        extra = f", {kg['bytes_moved'] / gib:.1f} GiB" if kg.get("bytes_moved") is not None else ""
        print(f"Kafka --generate (seeded): {kg['replicas_moved']} replicas moved{extra}, "
              f"{kg['partitions_changed']} partitions changed, rack violations {kg['rack_violations']}")
    else:
        print(f"Kafka --generate: n/a ({kg.get('reason')})")
    b = rep["balance"]
    print(f"rack violations: {rep['rack_violations_before']} -> {rep['rack_violations_after']}")
    print(f"spread (max-min over {b['brokers']} brokers): replicas {b['replica_spread_before']} -> {b['replica_spread_after']}, "
          f"leaders {b['leader_spread_before']} -> {b['leader_spread_after']}, "
          f"first followers {b['first_follower_spread_before']} -> {b['first_follower_spread_after']}")
    if "bytes_spread_before" in b:
        print(f"bytes spread: {b['bytes_spread_before'] / gib:.1f} GiB -> {b['bytes_spread_after'] / gib:.1f} GiB")
    go = rep.get("goals_optimised") or {}
    print(f"goals optimised: {','.join(go.get('order', []))}; phase 2 by {go.get('phase2')}"
          f"{' (capacity shares)' if go.get('capacity_shares') else ''}; refine moves {go.get('moves_per_goal')}")
    for g, v in rep["goals"].items():
        if v.get("status") != "unknown":
            off = (f"; replicas and leaders off their topic's band {v['off_band_before']} -> {v['off_band_after']}"
                   if "off_band_before" in v else "")
            print(f"  {g:16} {v['before']} -> {v['after']} (bound {v.get('bound')}, {v['status']}{off})")
    print(f"plan digest (target and report): {digest}")
    d = rep["duration"]
    if d and d["seconds"] is not None:
        print(f"estimated duration at {args.throttle / 2**20:.0f} MiB/s: {d['seconds'] / 3600:.1f} h serial, "
              f"{d['seconds_parallel'] / 60:.1f} min parallel (per-broker throttle)")


def side_by_side(args: argparse.Namespace) -> None:
    """This tree's kops and the one at ``--against``, each in a process of its own, alternating."""
    here = str(Path(__file__).resolve().parents[1])
    passed = [a for i, a in enumerate(sys.argv[1:]) if a not in ("--against", "--rounds")
              and sys.argv[i] not in ("--against", "--rounds")]
    runs: dict[str, list[dict]] = {here: [], args.against: []}
    for _round in range(args.rounds):
        for tree in runs:
            out = subprocess.run([sys.executable, __file__, *passed, "--tree", tree, "--json"], check=True,
                                 capture_output=True, text=True).stdout
            runs[tree].append(json.loads(out.strip().splitlines()[-1]))
    a, b = runs[here], runs[args.against]
    print(f"side by side, {args.rounds} run(s) each, alternating: {' '.join(passed) or '(defaults)'}")
    print(f"{'':22}{'this tree':>28}{'against ' + args.against:>40}")
    for key, name in (("cpu", "plan CPU s"), ("wall", "plan wall s"), ("rss_mib", "peak RSS MiB"),
                      ("moved", "replicas moved")):
        print(f"{name:22}{' / '.join(str(r[key]) for r in a):>28}{' / '.join(str(r[key]) for r in b):>40}")
    same = {r["digest"] for r in a} == {r["digest"] for r in b} and len({r["digest"] for r in a}) == 1
    print(f"{'plans and reports':22}{'byte-identical' if same else 'different':>28}")
    if not same:
        for g, (bb, ba, st) in a[0]["goals"].items():
            ob = b[0]["goals"].get(g)
            print(f"  {g:18}{f'{bb} -> {ba} ({st})':>38}{(f'{ob[0]} -> {ob[1]} ({ob[2]})' if ob else '-'):>40}")


if __name__ == "__main__":
    main()
