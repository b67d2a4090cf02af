"""Benchmark: throttled reassignment wall time vs the throttle's lower bound, kops side by side
with Kafka's own ``kafka-reassign-partitions.sh``; and data moved by ``kops reassign generate
--strategy minimal`` vs ``--strategy kafka`` for the same goal.

    .venv/bin/kops sandbox up --workdir /tmp/kops-bench --base-port 19692 --zookeeper-port 19681
    KOPS_HOME=/tmp/kops-bench-home .venv/bin/python bench/bench_reassign.py \\
        --bootstrap-server 127.0.0.1:19692 --partitions 6 --mb-per-partition 16 --throttle 2000000 --rounds 3
    .venv/bin/kops sandbox down --workdir /tmp/kops-bench --purge

1. Creates a topic (RF 3, rack-aware) and produces ``partitions x mb`` of random bytes.
2. Runs the same move (one replica of every partition to the other broker of its rack, then
   back again: every run copies the same bytes) with both tools, alternating in ABBA order
   (kops, Kafka, Kafka, kops, ...) so that machine noise hits both alike:

   - **kops**: ``kops reassign execute --throttle N --wait --yes --poll-interval P`` (the CLI, a
     subprocess: validation, lock, journal, throttles, moves, cleanup, Python start-up);
   - **Kafka**: ``kafka-reassign-partitions.sh --execute --throttle N``, then ``--verify`` every
     ``P`` seconds until it reports every partition complete (that ``--verify`` also removes the
     throttles), each a JVM from the sandbox's jars (:func:`kops.sandbox.dist.java_tool`);
   - **base** (``--kops-base EXE``): another kops, run as **kops** is (e.g. a worktree of an
     earlier commit with its own ``.venv``): ``--tools kops,base`` compares two versions of
     kops side by side (the summary's ``kops_vs_base``: ratios of the medians of wall time and
     of the kops process's CPU time).

   Wall time is from the start of the first command to the exit of the last one. A sampler
   thread (its own connection) watches the cluster meanwhile every ``--sample-interval`` s:
   ListPartitionReassignments (when the moves were submitted / finished) and DescribeLogDirs of
   the adding replicas (when the first and last byte arrived; per-destination copy rate; the
   highest rate over any ``--window`` seconds).
3. For each run: the lower bound ``max(bytes into a destination broker, bytes out of a leader)
   / throttle``, the ratio wall / bound, and the goal ``1.10 x bound + one poll interval``.
4. For "move the topic off broker B", compares the bytes ``generate --strategy minimal`` moves
   with ``--strategy kafka`` (Kafka's algorithm; mean over 20 random start indexes).

The topic is deleted at the end. Prints one JSON document on stdout, a summary table on stderr.
Set ``KOPS_HOME`` to keep this benchmark's local journals apart from other work.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


# ------------------------------------------------------------------------------------------
# the sampler: what the cluster does while a tool runs
# ------------------------------------------------------------------------------------------


class Sampler(threading.Thread):
    """Polls ListPartitionReassignments and DescribeLogDirs of the adding replicas."""

    def __init__(self, bootstrap: str, topic: str, moves: dict, interval_s: float):
        super().__init__(daemon=True)
        from kops.cluster.config import ClientConfig
        from kops.cluster.connection import Connection

        self.conn = Connection(bootstrap, ClientConfig.load(None), timeout_s=15)
        self.topic = topic
        self.moves = moves  # tp -> (original, target)
        self.adding = sorted({(t, p, b) for (t, p), (o, tg) in moves.items() for b in tg if b not in o})
        self.dests = sorted({b for _, _, b in self.adding})
        self.interval_s = interval_s
        self.stop_flag = threading.Event()
        self.t0 = time.monotonic()
        self.sizes: list[tuple[float, dict]] = []  # (t, {(t,p,b): bytes})
        self.reassigning: list[tuple[float, int]] = []  # (t, how many of ours are reassigning)
        self.errors = 0

    def run(self) -> None:
        from kops.cluster.topology import list_reassignments, replica_sizes

        while not self.stop_flag.is_set():
            t = time.monotonic() - self.t0
            try:
                ongoing = list_reassignments(self.conn)
                self.reassigning.append((t, sum(1 for tp in self.moves if tp in ongoing)))
                sizes = replica_sizes(self.conn, self.dests, [self.topic])
                self.sizes.append((time.monotonic() - self.t0, {k: sizes.get(k, 0) for k in self.adding}))
            except Exception:
                self.errors += 1
            self.stop_flag.wait(self.interval_s)

    def stop(self) -> None:
        self.stop_flag.set()
        self.join(30)
        self.conn.close()

    def report(self, final_sizes: dict, window_s: float) -> dict:
        """Times (s from the start of the run) and copy rates."""
        out: dict = {"samples": len(self.sizes), "sampler_errors": self.errors}
        seen = [t for t, n in self.reassigning if n > 0]
        out["submitted_seen_s"] = round(seen[0], 2) if seen else None
        out["finished_seen_s"] = None
        if seen:
            after = [t for t, n in self.reassigning if t > seen[0] and n == 0]
            out["finished_seen_s"] = round(after[0], 2) if after else None
        # per destination broker: bytes over time (sum of its adding replicas)
        per_broker: dict[int, list[tuple[float, int]]] = {}
        for t, sz in self.sizes:
            for b in self.dests:
                tot = sum(min(v, final_sizes.get(k, v)) for k, v in sz.items() if k[2] == b)
                per_broker.setdefault(b, []).append((t, tot))
        first_any, last_any, brokers = None, None, {}
        for b, series in per_broker.items():
            want = sum(final_sizes.get(k, 0) for k in self.adding if k[2] == b)
            # midpoints between the samples around the first growth and around "full"
            steps = list(zip(series[:-1], series[1:]))
            grow = [(ta + tb) / 2 for (ta, va), (tb, vb) in steps if vb > va]
            first = grow[0] if grow else None
            full = next(((ta + tb) / 2 for (ta, va), (tb, vb) in steps if want and vb >= want > va), None)
            last = full if full is not None else (grow[-1] if grow else None)
            peak = 0.0
            for i, (ta, va) in enumerate(series):
                for tb, vb in series[i + 1:]:
                    if tb - ta >= window_s:
                        peak = max(peak, (vb - va) / (tb - ta))
                        break
            # bytes landed within 1 s of the first byte: above the throttle means the move
            # started before the brokers had applied the throttle configs
            burst = max((v for t, v in series if first is not None and t <= first + 1.0), default=0)
            brokers[b] = {
                "bytes": want,
                "first_second_bytes": burst,
                "first_byte_s": round(first, 2) if first is not None else None,
                "last_byte_s": round(last, 2) if last is not None else None,
                "copy_rate_Bps": round(want / (last - first)) if first is not None and last and last > first else None,
                f"peak_{window_s:g}s_rate_Bps": round(peak),
            }
            if first is not None:
                first_any = first if first_any is None else min(first_any, first)
            if last is not None:
                last_any = last if last_any is None else max(last_any, last)
        out["first_byte_s"] = round(first_any, 2) if first_any is not None else None
        out["last_byte_s"] = round(last_any, 2) if last_any is not None else None
        out["destinations"] = {str(b): v for b, v in sorted(brokers.items())}
        out["max_first_second_bytes"] = max((v["first_second_bytes"] for v in brokers.values()), default=0)
        return out


# ------------------------------------------------------------------------------------------
# the two tools
# ------------------------------------------------------------------------------------------


def run_kops(bootstrap: str, plan_file: str, throttle: int, poll: float, timeout: float, *,
             exe: str | None = None) -> dict:
    """``exe``: another checkout's ``kops`` (``--kops-base``) instead of this one's."""
    cmd = [exe or str(ROOT / ".venv/bin/kops"), "reassign", "execute", "--reassignment-json-file", plan_file,
           "--throttle", str(throttle), "--wait", "--yes", "--poll-interval", str(poll),
           "--timeout", str(timeout), "--bootstrap-server", bootstrap, "--output", "json"]
    cpu0 = _children_cpu()
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 120)
    wall = time.monotonic() - t0
    cpu = _children_cpu() - cpu0
    doc = {}
    try:
        doc = json.loads(r.stdout)
    except ValueError:
        pass
    ok = r.returncode == 0 and doc.get("state") == "complete"
    return {"ok": ok, "wall_s": wall, "cpu_s": round(cpu, 2), "exit": r.returncode, "state": doc.get("state"),
            "kops_elapsed_s": doc.get("elapsed_s"), "throttles_left": doc.get("throttles_left"),
            "stderr_tail": r.stderr.strip().splitlines()[-8:]}


def _children_cpu() -> float:
    """User + system CPU seconds of the child processes that have ended (the kops process)."""
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_kafka(bootstrap: str, plan_file: str, throttle: int, poll: float, timeout: float) -> dict:
    from kops.sandbox.dist import DEFAULT_VERSION, java_tool, tool_class

    REASSIGN_TOOL = tool_class("reassign", DEFAULT_VERSION)

    t0 = time.monotonic()
    r = java_tool(REASSIGN_TOOL, ["--bootstrap-server", bootstrap, "--execute", "--reassignment-json-file",
                                  plan_file, "--throttle", str(throttle)], timeout=120)
    t_exec = time.monotonic() - t0
    if r.returncode != 0:
        return {"ok": False, "wall_s": time.monotonic() - t0, "exit": r.returncode,
                "stderr_tail": (r.stdout + r.stderr).strip().splitlines()[-8:]}
    verifies = 0
    while time.monotonic() - t0 < timeout:
        v = java_tool(REASSIGN_TOOL, ["--bootstrap-server", bootstrap, "--verify", "--reassignment-json-file",
                                      plan_file], timeout=120)
        verifies += 1
        if v.returncode == 0 and "still in progress" not in v.stdout:
            wall = time.monotonic() - t0
            return {"ok": "There is no active reassignment" not in v.stdout, "wall_s": wall, "exit": 0,
                    "execute_cmd_s": round(t_exec, 2), "verify_runs": verifies}
        time.sleep(poll)
    return {"ok": False, "wall_s": time.monotonic() - t0, "exit": None, "verify_runs": verifies,
            "stderr_tail": ["timed out"]}


# ------------------------------------------------------------------------------------------


def config_change_notifications(zookeeper: str) -> int:
    """Children of /config/changes. A ZooKeeper-mode broker reads every one of them (to purge
    those older than 15 min) after each batch of config changes it applies, before it looks
    for the next batch: with hundreds of them, a throttle set right after another config
    change reaches the brokers 1-2 s later (both tools' changes count)."""
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=zookeeper)
    zk.start(timeout=15)
    try:
        return len(zk.get_children("/config/changes"))
    finally:
        zk.stop()
        zk.close()


def throttles_present(conn, topic: str) -> list[str]:
    from kops.ops import reassign as R
    from kops.ops import throttle as T

    return T.throttles_in(R.read(conn, topics=[topic]), [topic])


def wait_quiet(conn, topic: str, want: dict, timeout: float = 120) -> None:
    """Until nothing of ours is reassigning, every partition has its full ISR, and the
    assignment is ``want``."""
    from kops.cluster.topology import list_reassignments
    from kops.ops import reassign as R

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        topo = R.read(conn, topics=[topic])
        ongoing = list_reassignments(conn)
        t = topo.topic(topic)
        if (not any(tp in ongoing for tp in want)
                and all(tuple(p.replicas) == want[p.tp] and set(p.isr) == set(p.replicas) for p in t.partitions)):
            return
        time.sleep(0.5)
    raise SystemExit(f"cluster not quiet after {timeout}s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap-server", required=True)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--mb-per-partition", type=int, default=16)
    ap.add_argument("--throttle", type=int, default=2_000_000)
    ap.add_argument("--record-bytes", type=int, default=1000, help="size of each record produced")
    ap.add_argument("--batch-bytes", type=int, default=16384,
                    help="producer batch.size (16384, the producer's default); big batches (e.g. 100 KB "
                         "records in 1 MB batches) make Kafka's quota deliver less, see docs/benchmarks.md")
    ap.add_argument("--poll-interval", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3, help="ABBA rounds; each runs both tools once")
    ap.add_argument("--tools", default="kops,kafka", help="comma-separated: kops, kafka, base")
    ap.add_argument("--kops-base", metavar="EXE",
                    help="tool 'base': this kops executable (another checkout's .venv/bin/kops, e.g. a "
                         "worktree of an earlier commit) run exactly as 'kops', to compare two versions "
                         "side by side (--tools kops,base)")
    ap.add_argument("--sample-interval", type=float, default=0.25)
    ap.add_argument("--window", type=float, default=5.0, help="seconds for the peak-rate figure")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--gap", type=float, default=15.0,
                    help="idle seconds before each run: longer than Kafka's quota window (11 x 1 s), so "
                         "that no run inherits the previous run's quota samples")
    ap.add_argument("--topic", default=f"bench-reassign-{os.getpid()}")
    ap.add_argument("--no-generate", action="store_true", help="skip the minimal-vs-kafka data comparison")
    ap.add_argument("--series", help="append each run's raw samples (time, bytes of each adding replica) to "
                    "this JSON-lines file, for a closer look at the copy's pace")
    ap.add_argument("--zookeeper", help="ZooKeeper-mode clusters: record how many config change notifications "
                    "(/config/changes, the last 15 min) the brokers scan per change, before each run")
    args = ap.parse_args()

    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from kops.cluster.config import ClientConfig
    from kops.cluster.connection import Connection
    from kops.model import ReassignmentPlan
    from kops.ops import reassign as R
    from kops.ops.generate import generate
    from kops.ops.validate import validate_plan

    bs = args.bootstrap_server
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    if "base" in tools and not args.kops_base:
        ap.error("--tools base needs --kops-base EXE")
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(args.topic, args.partitions, 3)])[args.topic].result(30)
    time.sleep(2)
    prod = Producer({"bootstrap.servers": bs, "linger.ms": 20, "batch.size": args.batch_bytes, "acks": "all",
                     "queue.buffering.max.kbytes": 1_048_576})
    value = os.urandom(args.record_bytes)
    for i in range(args.partitions * args.mb_per_partition * (1_000_000 // args.record_bytes)):
        while True:
            try:
                prod.produce(args.topic, value=value, partition=i % args.partitions)
                break
            except BufferError:
                prod.poll(0.05)
        if i % 100 == 0:
            prod.poll(0)
    prod.flush(120)
    result: dict = {"partitions": args.partitions, "mb_per_partition": args.mb_per_partition,
                    "record_bytes": args.record_bytes, "batch_bytes": args.batch_bytes,
                    "throttle": args.throttle, "poll_interval_s": args.poll_interval,
                    "cpus": os.cpu_count(), "runs": []}
    conn = Connection(bs, ClientConfig.load(None), timeout_s=15)
    tmp = Path(tempfile.mkdtemp(prefix="bench-reassign-"))
    try:
        topo = R.read(conn, sizes=True)
        racks = {b.id: b.rack for b in topo.brokers}
        original, there = {}, {}
        for p in topo.topic(args.topic).partitions:
            old = p.replicas[1]
            new = next(b for b, r in sorted(racks.items()) if r == racks[old] and b not in p.replicas)
            original[p.tp] = tuple(p.replicas)
            there[p.tp] = tuple(new if b == old else b for b in p.replicas)
        plans = []
        for name, src, dst in (("out", original, there), ("back", there, original)):
            f = tmp / f"plan-{name}.json"
            f.write_text(ReassignmentPlan.from_assignment(dst).to_json())
            plans.append((name, src, dst, str(f)))
        order = []
        for r in range(args.rounds):
            order += tools if r % 2 == 0 else list(reversed(tools))
        wait_quiet(conn, args.topic, original)
        for n, tool in enumerate(order):
            name, src, dst, plan_file = plans[n % 2]
            time.sleep(args.gap)
            topo = R.read(conn, topics=[args.topic], sizes=True)
            moves = validate_plan(ReassignmentPlan.from_assignment(dst), topo, in_progress={})
            prepared = R.Prepared(topo, moves)
            bound = prepared.estimated_seconds(args.throttle)
            final_sizes = {(m.topic, m.partition, b): m.size_bytes or 0 for m in moves for b in m.adding}
            sampler = Sampler(bs, args.topic, {m.tp: (m.original, m.target) for m in moves}, args.sample_interval)
            load0 = os.getloadavg()[0]
            notifications = config_change_notifications(args.zookeeper) if args.zookeeper else None
            sampler.start()
            t0 = time.monotonic()
            sampler.t0 = t0
            if tool == "kafka":
                res = run_kafka(bs, plan_file, args.throttle, args.poll_interval, args.timeout)
            else:
                res = run_kops(bs, plan_file, args.throttle, args.poll_interval, args.timeout,
                               exe=args.kops_base if tool == "base" else None)
            time.sleep(max(0.0, 2 * args.sample_interval))
            sampler.stop()
            res.update(sampler.report(final_sizes, args.window))
            if args.series:
                with open(args.series, "a") as f:
                    f.write(json.dumps({"run": n, "tool": tool, "plan": name, "sizes": [
                        [round(t, 3), {f"{k[0]}-{k[1]}@{k[2]}": v for k, v in sz.items()}]
                        for t, sz in sampler.sizes]}) + "\n")
            res.update({
                "tool": tool, "plan": name, "bytes_moved": prepared.bytes_to_move,
                "lower_bound_s": round(bound, 2) if bound else None,
                "load_avg_1m": [round(load0, 1), round(os.getloadavg()[0], 1)],
                "config_change_notifications": notifications,
            })
            res["wall_s"] = round(res["wall_s"], 2)
            if bound:
                res["ratio"] = round(res["wall_s"] / bound, 3)
                res["goal_s"] = round(1.10 * bound + args.poll_interval, 2)
                res["within_goal"] = res["wall_s"] <= res["goal_s"]
                if res.get("first_byte_s") is not None and res.get("last_byte_s") is not None:
                    res["copy_s"] = round(res["last_byte_s"] - res["first_byte_s"], 2)
                    res["copy_ratio"] = round(res["copy_s"] / bound, 3)
            # brokers apply config changes asynchronously: give the removal time to show
            end = time.monotonic() + 20
            while (left := throttles_present(conn, args.topic)) and time.monotonic() < end:
                time.sleep(0.5)
            res["throttles_after"] = left
            result["runs"].append(res)
            print(_line(res), file=sys.stderr, flush=True)
            wait_quiet(conn, args.topic, dst)
            if left:  # never let one run's leftovers slow the next one down
                raise SystemExit(f"throttles left after {tool}: {left}")
        result["summary"] = _summary(result["runs"])
        if not args.no_generate:
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


def _line(r: dict) -> str:
    return (f"{r['tool']:5s} {r['plan']:4s} wall {r['wall_s']:6.2f}s  cpu {r.get('cpu_s')}s  "
            f"bound {r.get('lower_bound_s')}s  "
            f"ratio {r.get('ratio')}  copy {r.get('copy_s')}s ({r.get('copy_ratio')}x)  "
            f"submit@{r.get('submitted_seen_s')} first@{r.get('first_byte_s')} last@{r.get('last_byte_s')} "
            f"done@{r.get('finished_seen_s')}  1st-s max {r.get('max_first_second_bytes', 0) / 1e6:.1f} MB  "
            f"load {r['load_avg_1m']}  zk-notifications {r.get('config_change_notifications')}  ok={r.get('ok')}")


def _summary(runs: list[dict]) -> dict:
    out = {}
    for tool in sorted({r["tool"] for r in runs}):
        rs = [r for r in runs if r["tool"] == tool and r.get("ok")]
        if not rs:
            continue

        def med(key, rs=rs):
            vals = [r[key] for r in rs if r.get(key) is not None]
            return round(statistics.median(vals), 3) if vals else None

        out[tool] = {"runs": len(rs), "median_wall_s": med("wall_s"), "median_ratio": med("ratio"),
                     "median_copy_s": med("copy_s"), "median_copy_ratio": med("copy_ratio"),
                     "median_cpu_s": med("cpu_s"), "within_goal": sum(1 for r in rs if r.get("within_goal"))}
    if "kops" in out and "base" in out:  # this checkout against --kops-base, side by side
        out["kops_vs_base"] = {k: round(out["kops"][f"median_{k}"] / out["base"][f"median_{k}"], 3)
                               for k in ("wall_s", "cpu_s")
                               if out["kops"][f"median_{k}"] and out["base"][f"median_{k}"]}
    return out


if __name__ == "__main__":
    raise SystemExit(main())
