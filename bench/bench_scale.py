"""Benchmark: how kops' own cost grows with the cluster (issue 19 item 1).

For each size, a fresh sandbox (ZooKeeper + ``--brokers`` brokers over ``--racks`` racks, Kafka
3.9, free ports, a temporary work dir) gets ``size`` partitions (RF ``--rf``, in ``--topics``
topics, ``--kb-per-partition`` of data each), then each kops command runs as a fresh process
(Python start-up included) and its wall time is taken:

- ``cluster describe`` (Admin API), ``cluster describe --zookeeper`` (checked against ZooKeeper),
  ``cluster health``
- ``plan rebalance`` and ``plan decommission --brokers <last>`` (live reads + planning)
- ``reassign execute --wait`` of that decommission (throttled; all moves at once, or in waves of
  ``--max-moves-in-flight``), then ``reassign verify``
- ``leader rebalance --imbalance-threshold 0`` (after the decommission moved leaders), and once
  more with nothing to do (the cron path)
- ``leader demote --rack a`` and ``leader restore --rack a``
- ``heal step`` on the healthy cluster (the cron path: first run, then the next run) and
  ``heal status``

``--reads-only`` keeps the reads, the plans and the cron paths (no execution, no demote/restore).

    .venv/bin/python bench/bench_scale.py [--brokers 9] [--racks 3] [--sizes 2500,10000] [--rf 3]
                                          [--topics 50] [--kb-per-partition 16] [--heap 512m]
                                          [--max-moves-in-flight N] [--profile DIR] [--reads-only]

Prints one table per command: seconds at each size, and the growth from the smallest size to
each larger one against the growth of the partition count (1.0 = linear in partitions).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


#: ``--profile DIR``: kops under cProfile, its stats written when it exits (kops ends with
#: ``os._exit`` after the atexit handlers, so ``python -m cProfile`` would never write them)
PROFILED = ("import atexit, cProfile, sys; out = sys.argv.pop(1); p = cProfile.Profile(); "
            "atexit.register(lambda: (p.disable(), p.dump_stats(out))); sys.argv[0] = 'kops'; p.enable(); "
            "from kops.cli.main import main; main()")


def kops(*args: str, env: dict[str, str], timeout: float = 3600, ok=(0,),
         profile: Path | None = None) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.monotonic()
    head = ["-c", PROFILED, str(profile)] if profile else ["-m", "kops"]
    r = subprocess.run([sys.executable, *head, *args], capture_output=True, text=True, env=env,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    dt = time.monotonic() - t0
    if r.returncode not in ok:
        raise SystemExit(f"kops {' '.join(args)}: exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return dt, r


def create_topics(bootstrap: str, topics: int, partitions: int, rf: int, kb: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    per = partitions // topics
    names = [f"scale-{i:03d}" for i in range(topics)]
    for i in range(0, topics, 10):  # ten topics per request: gentle on a 2-core machine
        batch = [NewTopic(n, per, rf, config={"min.insync.replicas": str(max(1, rf - 1))}) for n in names[i:i + 10]]
        for f in admin.create_topics(batch, operation_timeout=120).values():
            f.result(180)
    deadline = time.time() + 900
    while time.time() < deadline:
        md = admin.list_topics(timeout=60)
        parts = [pm for t, tm in md.topics.items() if t.startswith("scale-") for pm in tm.partitions.values()]
        ready = sum(1 for pm in parts if pm.leader >= 0 and len(pm.isrs) == rf)
        if len(parts) == per * topics and ready == len(parts):
            break
        log(f"waiting for {per * topics - ready} partitions to be ready")
        time.sleep(3)
    else:
        raise SystemExit("topics not ready in 15 minutes")
    if kb:
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "acks": "1", "batch.size": 1_000_000})
        value = os.urandom(1024)
        for n in names:
            for part in range(per):
                for _ in range(kb):
                    while True:
                        try:
                            p.produce(n, value=value, partition=part)
                            break
                        except BufferError:  # the local queue is full: let deliveries drain it
                            p.poll(0.5)
                p.poll(0)
        assert p.flush(300) == 0


def run_size(a, size: int) -> dict[str, float]:
    from kops.sandbox import Sandbox, SandboxConfig
    from kops.sandbox.procs import free_ports

    racks = ",".join("abcdefghij"[i % a.racks] for i in sorted(range(a.brokers), key=lambda i: i % a.racks))
    work = Path(tempfile.mkdtemp(prefix=f"kops-bench-scale-{size}-"))
    home = Path(tempfile.mkdtemp(prefix="kops-bench-scale-home-"))
    ports = free_ports(a.brokers + 1)
    sb = Sandbox(SandboxConfig(workdir=work / "cluster", brokers=a.brokers, racks=racks, zookeeper_port=ports[0],
                               broker_ports=ports[1:], heap=a.heap), log=log)
    out: dict[str, float] = {}
    try:
        sb.up(timeout_s=600)
        bs, zk = sb.bootstrap_servers, sb.zookeeper_connect
        env = dict(os.environ, KOPS_HOME=str(home), KOPS_BOOTSTRAP_SERVER=bs)
        t0 = time.monotonic()
        create_topics(bs, a.topics, size, a.rf, a.kb_per_partition)
        log(f"{size} partitions (RF {a.rf}) created and filled in {time.monotonic() - t0:.0f} s")
        last = max(sb.config.broker_ids)
        plan = work / "decommission.json"

        def timed(name: str, *args: str, ok=(0,)) -> subprocess.CompletedProcess:
            prof = Path(a.profile) / f"{size}-{name.replace(' ', '_').replace('/', '_')}.prof" if a.profile else None
            dt, r = kops(*args, env=env, ok=ok, profile=prof)
            out[name] = round(dt, 2)
            tail = (r.stderr.strip().splitlines() or [""])[-1][:200]
            log(f"{size}: {name}: {dt:.2f} s (exit {r.returncode}) {tail}")
            if r.returncode:
                out[f"{name} exit"] = r.returncode
                for line in (r.stdout.strip().splitlines() + r.stderr.strip().splitlines())[-12:]:
                    log(f"{size}: {name}: | {line[:200]}")  # why: the report's last lines
            return r

        timed("cluster describe", "cluster", "describe", "--output", "json")
        timed("cluster describe --zookeeper", "cluster", "describe", "--zookeeper", zk, "--output", "json")
        timed("cluster health", "cluster", "health", ok=(0, 3))
        timed("plan rebalance", "plan", "rebalance", "--output", "json")
        r = timed("plan decommission", "plan", "decommission", "--brokers", str(last), "--output", "json")
        doc = json.loads(r.stdout)
        plan.write_text(json.dumps(doc["plan"]))
        moves = doc["report"]["replicas_moved"]
        out["decommission replicas moved"] = moves
        # the cron paths on a healthy cluster: heal's first run (its memory starts empty), the next
        # run (the memory read back from the cluster), then its status
        timed("heal step (first run)", "heal", "step")
        timed("heal step", "heal", "step")
        timed("heal status", "heal", "status", "--output", "json")
        if a.reads_only:
            return out
        waves = ["--max-moves-in-flight", str(a.max_moves_in_flight)] if a.max_moves_in_flight else []
        timed("reassign execute --wait", "reassign", "execute", "--reassignment-json-file", str(plan),
              "--throttle", str(200 * 1024 * 1024), "--wait", "--yes", "--request-timeout", "120", *waves)
        timed("reassign verify", "reassign", "verify", "--reassignment-json-file", str(plan))
        # exit 3 (balance not reached) is recorded, not fatal: under load a broker's metadata can lag
        # the controller's just after the execution (a preferred replica not yet in the ISR it shows)
        timed("leader rebalance --imbalance-threshold 0", "leader", "rebalance", "--imbalance-threshold", "0",
              "--request-timeout", "120", ok=(0, 3))
        timed("leader rebalance (nothing to do)", "leader", "rebalance")
        # --wait: the ZooKeeper controller applies reorder-only reassignments at ~10-45 partitions
        # a second under this load; the default 60 s is less than a third of the cluster needs
        for action in ("demote", "restore"):
            timed(f"leader {action} --rack a", "leader", action, "--rack", "a", "--request-timeout", "120",
                  "--wait", "900", ok=(0, 3))
    finally:
        sb.down()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)
    return out


def main() -> None:
    import signal

    # a benchmark stopped with SIGTERM (kill, timeout) stops its sandbox too (the finally above)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brokers", type=int, default=9)
    ap.add_argument("--racks", type=int, default=3)
    ap.add_argument("--sizes", default="2500,10000", help="partition counts, comma-separated")
    ap.add_argument("--rf", type=int, default=3)
    ap.add_argument("--topics", type=int, default=50)
    ap.add_argument("--kb-per-partition", type=int, default=16)
    ap.add_argument("--heap", default="512m")
    ap.add_argument("--profile", metavar="DIR", help="run each kops command under cProfile; stats in DIR/<size>-<step>.prof")
    ap.add_argument("--max-moves-in-flight", type=int, default=0,
                    help="execute the decommission in waves of at most N moves (0: all at once)")
    ap.add_argument("--reads-only", action="store_true",
                    help="reads, plans and cron paths only: no execution, no leader demote/restore")
    a = ap.parse_args()
    if a.profile:
        Path(a.profile).mkdir(parents=True, exist_ok=True)
    sizes = [int(x) for x in a.sizes.split(",")]
    results = {}
    for size in sizes:
        log(f"size {size}: {a.brokers} brokers in {a.racks} racks")
        results[size] = run_size(a, size)
    base = sizes[0]
    names = list(results[base])
    head = f"{'command':36}" + "".join(f"{s:>10,}" for s in sizes) + "".join(
        f"{'growth ' + str(s // base) + 'x':>14}" for s in sizes[1:])
    print("\n" + head)
    for n in names:
        row = f"{n:36}" + "".join(f"{results[s].get(n, float('nan')):>10}" for s in sizes)
        for s in sizes[1:]:
            v0, v = results[base].get(n), results[s].get(n)
            # growth of the time relative to the growth of the partitions: 1.0 = linear
            row += f"{(v / v0) / (s / base):>14.2f}" if v0 and v else f"{'-':>14}"
        print(row)
    print(json.dumps({"brokers": a.brokers, "racks": a.racks, "rf": a.rf,
                      "max_moves_in_flight": a.max_moves_in_flight, "results": results}))


if __name__ == "__main__":
    main()
