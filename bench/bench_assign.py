"""Benchmark: Kafka-exact assignment of 1,000,000 partitions, kops vs Kafka's own AdminUtils.

    .venv/bin/python bench/bench_assign.py                      # 1,000 brokers / 50 racks, 1M partitions, RF 3
    .venv/bin/python bench/bench_assign.py --partitions 100000 --repeat 1

kops: ``kops.placement.kafka_assign.assign_replicas_to_brokers`` in this process (rack-aware and
rack-unaware), fixed start index, timed with ``time.perf_counter``. Kafka:
``org.apache.kafka.admin.AdminUtils.assignReplicasToBrokers`` from the Kafka 3.9.1 jars
(``kops.sandbox.dist.kafka_classpath``), called by tests/java/AssignDriver.java; the driver times
each call inside the JVM (``System.nanoTime``, JVM start excluded) and the wall time of the whole
``java`` process (JVM start, class loading, all calls) is reported too. Both sides print a digest
of the full assignment; the benchmark checks that they are equal.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kops.placement.kafka_assign import assign_replicas_to_brokers  # noqa: E402

DRIVER = ROOT / "tests" / "java" / "AssignDriver.java"


def digest(assignment: dict[int, list[int]]) -> int:
    """The driver's digest: over partitions ascending and their replicas, h = h * 31 + v (Java long)."""
    h = 0
    mask = (1 << 64) - 1
    for p in sorted(assignment):
        h = (h * 31 + p) & mask
        for b in assignment[p]:
            h = (h * 31 + b) & mask
    return h - (1 << 64) if h >= 1 << 63 else h


def time_kops(brokers, partitions, rf, start, repeat):
    """[(wall s, CPU s)] per call, and the last result."""
    times = []
    result = None
    for _ in range(repeat):
        result = None
        c0, t0 = time.process_time(), time.perf_counter()
        result = assign_replicas_to_brokers(brokers, partitions, rf, start, 0)
        times.append((time.perf_counter() - t0, time.process_time() - c0))
    return times, result


def time_kafka(n_brokers, n_racks, partitions, rf, start, repeat, heap):
    from kops.sandbox.dist import kafka_classpath

    javac, java = shutil.which("javac"), shutil.which("java")
    if not javac or not java:
        raise SystemExit("javac/java not on PATH: the Kafka side needs a JDK 17")
    cp = kafka_classpath("3.9.1")
    with tempfile.TemporaryDirectory(prefix="kops-bench-") as out:
        t0 = time.perf_counter()
        subprocess.run([javac, "-nowarn", "-cp", cp, "-d", out, str(DRIVER)], check=True, capture_output=True)
        compile_s = time.perf_counter() - t0
        cmd = [java, f"-Xmx{heap}", "-cp", f"{cp}:{out}", "AssignDriver", "bench",
               str(n_brokers), str(n_racks), str(partitions), str(rf), str(start), str(repeat)]  # fmt: skip
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, check=True, capture_output=True, text=True)
        wall = time.perf_counter() - t0
    calls = [line.split() for line in proc.stdout.splitlines() if line.startswith("bench ")]
    times = [(float(c[1]) / 1000, float(c[2]) / 1000) for c in calls]
    digests = {int(c[3]) for c in calls}
    return times, digests, wall, compile_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--brokers", type=int, default=1000)
    ap.add_argument("--racks", type=int, default=50)
    ap.add_argument("--partitions", type=int, default=1_000_000)
    ap.add_argument("--replication-factor", type=int, default=3)
    ap.add_argument("--start-index", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=3, help="calls per side (first = cold, best reported)")
    ap.add_argument("--java-heap", default="2g")
    ap.add_argument("--no-kafka", action="store_true", help="time kops only")
    a = ap.parse_args()

    racked = [(b, f"rack{b % a.racks}") for b in range(a.brokers)]
    plain = [(b, None) for b in range(a.brokers)]
    rows = []
    print(
        f"{a.partitions:,} partitions x RF {a.replication_factor} over {a.brokers:,} brokers in {a.racks} racks "
        f"(start index {a.start_index}); {a.repeat} call(s) per side",
        file=sys.stderr,
    )
    load_start = os.getloadavg()[0]
    t_aware, res_aware = time_kops(racked, a.partitions, a.replication_factor, a.start_index, a.repeat)
    kops_digest = digest(res_aware)
    del res_aware
    t_unaware, res_unaware = time_kops(plain, a.partitions, a.replication_factor, a.start_index, a.repeat)
    del res_unaware
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows.append(("kops (Python), rack-aware KIP-36", t_aware[0], t_aware, ""))
    rows.append(("kops (Python), rack-unaware", t_unaware[0], t_unaware, ""))
    same = None
    if not a.no_kafka:
        times, digests, wall, compile_s = time_kafka(
            a.brokers, a.racks, a.partitions, a.replication_factor, a.start_index, a.repeat, a.java_heap
        )
        same = digests == {kops_digest}
        rows.append(("Kafka 3.9.1 AdminUtils (in JVM), rack-aware", times[0], times, ""))
        rows.append(
            ("Kafka 3.9.1, whole java process", wall, wall, f"JVM start + {len(times)} call(s); javac {compile_s:.1f}s")
        )
    print(f"{'':44} {'first call':>17} {'best call':>17}")
    print(f"{'':44} {'wall':>8} {'CPU':>8} {'wall':>8} {'CPU':>8}")
    for name, first, best, note in rows:
        if isinstance(first, tuple):
            b = min(best, key=lambda x: x[0]) if isinstance(best, list) else best
            print(f"{name:44} {first[0]:7.2f}s {first[1]:7.2f}s {b[0]:7.2f}s {b[1]:7.2f}s  {note}")
        else:
            print(f"{name:44} {first:7.2f}s {'':8} {'':8} {'':8}  {note}")
    load = os.getloadavg()[0]
    print(f"load average (1 min): {load_start:.1f} at the start, {load:.1f} at the end, on {os.cpu_count()} CPUs")
    print(f"kops peak RSS {peak_mb:,.0f} MB (this process)")
    if same is not None:
        print(f"same assignment as Kafka (digest {kops_digest}): {'yes' if same else 'NO'}")
        if not same:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
