"""Benchmark: ``kops leader rebalance`` end to end against ``kafka-leader-election.sh
--election-type preferred --all-topic-partitions`` (same Kafka jars), on the sandbox with
>= 10,000 partitions.

    .venv/bin/python bench/bench_leader.py [--partitions 10000] [--topics 20] [--rf 2] [--rounds 1]
                                           [--attach SANDBOX_DIR] [--heap 768m] [--idle-runs 5] [--elect]

Without ``--attach`` it starts its own sandbox (ZooKeeper + 6 brokers in 3 racks, free ports,
a temporary work dir) and always stops it at the end.

Each round, for each tool: every partition's first two replicas are swapped with one
reorder-only reassignment (no data moves), so no partition is led by its preferred replica any
more (100 % imbalance on every broker); then the tool runs as a fresh process (Python start-up
or JVM start-up included) and the wall time is measured until it exits. Afterwards the bench
counts the partitions led by their preferred replica.

kops runs with ``--imbalance-threshold 0`` so it elects everything Kafka's tool elects; it also
reads the topology before (to plan) and after (to report) -- both included in its time. With
``--elect``, ``kops leader elect --election-type preferred --all-topic-partitions`` (Kafka's
tool's flags) runs beside them.

Then the cron path with nothing to do: ``kops leader rebalance`` at its default threshold on
the now balanced cluster, ``--idle-runs`` times as fresh processes (median, min, max).
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

KOPS_LEADER = [sys.executable, "-c", "import sys; from kops.cli.leader import app; sys.argv[0] = 'kops leader'; app()"]


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def metadata(bootstrap: str, prefix: str) -> dict[tuple[str, int], tuple[list[int], int]]:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=60)
    return {(t, p): (list(pm.replicas), pm.leader)
            for t, tm in md.topics.items() if t.startswith(prefix) for p, pm in tm.partitions.items()}


def create_topics(bootstrap: str, prefix: str, topics: int, partitions: int, rf: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    per = partitions // topics
    names = [f"{prefix}{i:03d}" for i in range(topics)]
    for n in names:  # one at a time: gentle on a 2-core machine
        admin.create_topics([NewTopic(n, per, rf)], operation_timeout=120)[n].result(180)
    want = per * topics
    deadline = time.time() + 600
    while time.time() < deadline:
        md = metadata(bootstrap, prefix)
        ok = sum(1 for r, l in md.values() if l >= 0)
        if len(md) == want and ok == want:
            return
        log(f"waiting for leaders: {ok}/{want}")
        time.sleep(3)
    raise SystemExit("topics not ready in 10 minutes")


def skew(bootstrap: str, prefix: str) -> int:
    """Swap replicas[0] and replicas[1] everywhere (reorder only) and wait until it shows."""
    from kafka import TopicPartition as KTP
    from kafka.admin import KafkaAdminClient

    md = metadata(bootstrap, prefix)
    target = {tp: [r[1], r[0], *r[2:]] for tp, (r, _) in md.items()}
    kp = KafkaAdminClient(bootstrap_servers=bootstrap.split(","), request_timeout_ms=120_000)
    try:
        items = sorted(target.items())
        for i in range(0, len(items), 2000):
            kp.alter_partition_reassignments({KTP(t, p): r for (t, p), r in items[i:i + 2000]}, timeout_ms=120_000)
        deadline = time.time() + 600
        while time.time() < deadline:
            now = metadata(bootstrap, prefix)
            done = sum(1 for tp, (r, _) in now.items() if r == target[tp])
            if done == len(target) and not kp.list_partition_reassignments():
                break
            time.sleep(2)
    finally:
        kp.close()
    now = metadata(bootstrap, prefix)
    return sum(1 for r, l in now.values() if l != r[0])


def skew_restart(sb, bootstrap: str, prefix: str, rack: str = "a") -> int:
    """Stop the brokers of one rack (controlled shutdown moves their leaders away), start them
    again and wait until they are back in every ISR: their partitions are then led by others."""
    sb.stop(rack=rack)
    sb.start(rack=rack)
    deadline = time.time() + 900
    while time.time() < deadline:
        md = metadata(bootstrap, prefix)
        from confluent_kafka.admin import AdminClient

        full = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=60)
        lagging = sum(1 for t, tm in full.topics.items() if t.startswith(prefix)
                      for pm in tm.partitions.values() if len(pm.isrs) != len(pm.replicas))
        if not lagging:
            return sum(1 for r, l in md.values() if l != r[0])
        log(f"waiting for ISR: {lagging} partitions lagging")
        time.sleep(5)
    raise SystemExit("brokers did not rejoin the ISR in 15 minutes")


def preferred_led(bootstrap: str, prefix: str) -> tuple[int, int]:
    md = metadata(bootstrap, prefix)
    return sum(1 for r, l in md.values() if l == r[0]), len(md)


def run_kops(bootstrap: str, state_dir: str, batch_size: int = 1000) -> tuple[float, dict]:
    env = dict(os.environ, KOPS_STATE_DIR=state_dir)
    t0 = time.monotonic()
    r = subprocess.run([*KOPS_LEADER, "rebalance", "--bootstrap-server", bootstrap, "--imbalance-threshold", "0",
                        "--request-timeout", "120", "--batch-size", str(batch_size), "--output", "json"],
                       capture_output=True, text=True, env=env, timeout=1800)
    dt = time.monotonic() - t0
    if r.returncode not in (0, 3):
        raise SystemExit(f"kops failed ({r.returncode}): {r.stderr[-2000:]}")
    doc = json.loads(r.stdout)
    return dt, {"exit_code": r.returncode, "status": doc["status"], "kops_s": doc.get("duration_s"),
                "elections": doc.get("elections", {}).get("counts"),
                "batches": doc.get("elections", {}).get("batches"),
                "election_s": doc.get("elections", {}).get("duration_s")}


def run_kops_elect(bootstrap: str) -> tuple[float, dict]:
    """``kops leader elect --election-type preferred --all-topic-partitions``: Kafka's tool's own
    flags, the same request (one ElectLeaders for the partitions that need it)."""
    t0 = time.monotonic()
    r = subprocess.run([*KOPS_LEADER, "elect", "--bootstrap-server", bootstrap, "--election-type", "preferred",
                        "--all-topic-partitions", "--request-timeout", "120", "--output", "json"],
                       capture_output=True, text=True, timeout=1800)
    dt = time.monotonic() - t0
    if r.returncode != 0:
        raise SystemExit(f"kops leader elect failed ({r.returncode}): {r.stderr[-2000:]}")
    doc = json.loads(r.stdout)
    return dt, {"exit_code": r.returncode, "elections": doc.get("counts"), "election_s": doc.get("duration_s")}


def settle_everywhere(bootstrap: str, prefix: str, timeout: float = 120) -> float:
    """Until every broker's own metadata shows every partition led by its preferred replica (a
    broker restarted by the skew lags the others by seconds): the seconds it took."""
    from confluent_kafka.admin import AdminClient

    t0 = time.monotonic()
    pending = set(bootstrap.split(","))
    while pending and time.monotonic() - t0 < timeout:
        for addr in sorted(pending):
            md = AdminClient({"bootstrap.servers": addr}).list_topics(timeout=30)
            if all(pm.leader == pm.replicas[0] for t, tm in md.topics.items() if t.startswith(prefix)
                   for pm in tm.partitions.values()):
                pending.discard(addr)
        if pending:
            time.sleep(0.5)
    if pending:
        raise SystemExit(f"brokers {sorted(pending)} still show non-preferred leaders after {timeout:.0f} s")
    return time.monotonic() - t0


def run_kops_idle(bootstrap: str, state_dir: str, runs: int) -> list[float]:
    """The cron path with nothing to do: ``kops leader rebalance`` (default threshold) on a
    balanced cluster, as a fresh process each time; wall seconds of each run."""
    env = dict(os.environ, KOPS_STATE_DIR=state_dir)
    out = []
    for _ in range(runs):
        t0 = time.monotonic()
        r = subprocess.run([*KOPS_LEADER, "rebalance", "--bootstrap-server", bootstrap],
                           capture_output=True, text=True, env=env, timeout=600)
        out.append(round(time.monotonic() - t0, 3))
        if r.returncode != 0 or "balanced" not in r.stderr:
            raise SystemExit(f"kops idle run: exit {r.returncode}: {r.stderr[-2000:]}")
    return out


def run_kafka(bootstrap: str) -> tuple[float, dict]:
    from kops.sandbox.dist import DEFAULT_VERSION, java_tool, tool_class

    LEADER_ELECTION_TOOL = tool_class("leader-election", DEFAULT_VERSION)

    t0 = time.monotonic()
    r = java_tool(LEADER_ELECTION_TOOL, ["--bootstrap-server", bootstrap, "--election-type", "preferred",
                                         "--all-topic-partitions"], timeout=1800)
    dt = time.monotonic() - t0
    ok = r.stdout.count(",") + 1 if "Successfully completed" in r.stdout else 0
    return dt, {"exit_code": r.returncode, "elected_reported": ok, "stderr_tail": r.stderr.strip()[-300:]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--topics", type=int, default=20)
    ap.add_argument("--rf", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--attach", help="use the running sandbox in this dir (kops sandbox up); leave it running")
    ap.add_argument("--heap", default="768m")
    ap.add_argument("--skew", choices=["restart", "reorder"], default="restart",
                    help="restart: stop+start rack a (its ~1/3 of the partitions end up led elsewhere; "
                         "default); reorder: swap replicas[0] and [1] everywhere (100%%, but the ZooKeeper "
                         "controller takes minutes for 10k reorders on 2 cores)")
    ap.add_argument("--batch-size", default="1000",
                    help="kops --batch-size; several, comma-separated (e.g. 1000,10000), run side by side")
    ap.add_argument("--elect", action="store_true",
                    help="also run `kops leader elect --election-type preferred --all-topic-partitions` "
                         "(Kafka's tool's flags) side by side")
    ap.add_argument("--prefix", help="reuse existing topics with this name prefix instead of creating them")
    ap.add_argument("--idle-runs", type=int, default=5,
                    help="then time the cron path with nothing to do (a balanced cluster) this many times")
    a = ap.parse_args()

    from kops.sandbox import Sandbox, SandboxConfig, attach
    from kops.sandbox.procs import free_ports

    work = None
    if a.attach:
        sb = attach(a.attach)
    else:
        work = tempfile.mkdtemp(prefix="kops-bench-leader-")
        ports = free_ports(7)
        sb = Sandbox(SandboxConfig(workdir=Path(work), zookeeper_port=ports[0], broker_ports=ports[1:], heap=a.heap),
                     log=log)
    state = tempfile.mkdtemp(prefix="kops-bench-state-")
    results = []
    idle: list[float] = []
    try:
        if not a.attach:
            sb.up()
        bs = sb.bootstrap_servers
        if a.prefix:
            prefix = a.prefix
        else:
            prefix = f"bl{int(time.time()) % 100000}-"
            t0 = time.monotonic()
            create_topics(bs, prefix, a.topics, a.partitions, a.rf)
            log(f"created {a.partitions} partitions (RF {a.rf}) in {time.monotonic() - t0:.0f} s")
        for rnd in range(a.rounds):
            sizes = [int(x) for x in str(a.batch_size).split(",")]
            tools = ["kafka-leader-election.sh", *(["kops leader elect --all-topic-partitions"] if a.elect else []),
                     *(f"kops leader rebalance --batch-size {b}" for b in sizes)]
            for tool in tools:
                t1 = time.monotonic()
                n = skew(bs, prefix) if a.skew == "reorder" else skew_restart(sb, bs, prefix)
                log(f"round {rnd + 1}: skewed {n} partitions in {time.monotonic() - t1:.0f} s; running {tool}")
                if tool.startswith("kops leader elect"):
                    dt, info = run_kops_elect(bs)
                elif tool.startswith("kops"):
                    dt, info = run_kops(bs, state, int(tool.rsplit(" ", 1)[1]))
                else:
                    dt, info = run_kafka(bs)
                # every broker's metadata catches up with the elections a little later (a broker
                # just restarted lags by seconds, whichever tool elected): poll, a random broker
                # each time, until every partition shows its preferred leader (at most 60 s)
                t2 = time.monotonic()
                while True:
                    led, total = preferred_led(bs, prefix)
                    if led == total or time.monotonic() - t2 > 60:
                        break
                    time.sleep(0.5)
                row = {"round": rnd + 1, "tool": tool, "seconds": round(dt, 2), "not_preferred_before": n,
                       "preferred_led_after": led, "partitions": total,
                       "metadata_settled_s": round(time.monotonic() - t2, 1), **info}
                log(json.dumps(row))
                results.append(row)
        if a.idle_runs:
            log(f"every broker's metadata settled in {settle_everywhere(bs, prefix):.1f} s")
            idle = run_kops_idle(bs, state, a.idle_runs)
        if idle:
            log(f"kops leader rebalance, nothing to do: {idle} s")
    finally:
        if not a.attach:
            sb.down()
            shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(state, ignore_errors=True)
    print(f"\n{'tool':44} {'round':>5} {'seconds':>8} {'skewed':>7} {'preferred-led after':>20}")
    for r in results:
        print(f"{r['tool']:44} {r['round']:>5} {r['seconds']:>8.2f} {r['not_preferred_before']:>7} "
              f"{r['preferred_led_after']:>9}/{r['partitions']}")
    if idle:
        print(f"kops leader rebalance with nothing to do ({len(idle)} runs): median "
              f"{sorted(idle)[len(idle) // 2]:.2f} s, min {min(idle):.2f} s, max {max(idle):.2f} s")
    print(json.dumps({"rounds": results, "idle_s": idle}))


if __name__ == "__main__":
    main()
