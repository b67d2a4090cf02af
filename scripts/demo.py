"""The kops demo: a real 6-broker, 3-rack Kafka cluster on 127.0.0.1 and kops at work on it.

Run through ./scripts/demo.sh (which installs everything first). Every step is a real `kops`
command, printed before it runs; the demo ends with a summary table.

    ./scripts/demo.sh [--keep]     # --keep leaves the cluster running afterwards
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

WORKDIR = Path(os.environ.get("KOPS_DEMO_DIR", Path.home() / ".kops" / "demo"))
BASE_PORT, ZK_PORT = 19092, 12181
con = Console(stderr=True, highlight=False)
results: list[tuple[str, int, float, str]] = []
KOPS = str(Path(sys.executable).parent / "kops")


def kops(title: str, *args: str, expect: tuple[int, ...] = (0,), capture: bool = False, note: str = "") -> str:
    cmd = [KOPS, *args]
    con.rule(f"[bold]{title}")
    con.print(f"[cyan]$ kops {' '.join(shlex.quote(a) for a in args)}[/cyan]")
    t0 = time.monotonic()
    r = subprocess.run(cmd, stdout=subprocess.PIPE if capture else None, text=True, stdin=subprocess.DEVNULL)
    dt = time.monotonic() - t0
    results.append((title, r.returncode, dt, note))
    if r.returncode not in expect:
        con.print(f"[red]unexpected exit {r.returncode} (expected {expect})[/red]")
        summary()
        sys.exit(1)
    con.print(f"[dim]exit {r.returncode} in {dt:.1f} s[/dim]")
    return r.stdout if capture else ""


def make_topics(bootstrap: str) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    con.rule("[bold]Create topics and data")
    a = AdminClient({"bootstrap.servers": bootstrap})
    existing = a.list_topics(timeout=10).topics
    new = []
    if "orders" not in existing:
        new.append(NewTopic("orders", 12, 3, config={"min.insync.replicas": "2"}))
    if "payments" not in existing:
        # hand-placed the way a careless script would: every partition on brokers 0-3 only,
        # two replicas in rack a -> rack-unsafe, and brokers 4 and 5 empty
        skew = [[0, 1, 2], [1, 0, 3], [2, 3, 0], [3, 2, 1], [0, 1, 3], [1, 0, 2]]
        new.append(NewTopic("payments", num_partitions=len(skew), replica_assignment=skew, config={"min.insync.replicas": "2"}))
    for t, f in a.create_topics(new).items() if new else []:
        f.result(30)
        con.print(f"created topic {t}")
    time.sleep(2)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, "compression.type": "none"})
    value = os.urandom(100_000)
    for i in range(300):  # 30 MB into payments
        p.produce("payments", value=value, partition=i % 6)
        p.produce("orders", value=value[:1000], partition=i % 12)
        p.poll(0)
    p.flush(60)
    con.print("produced 30 MB into payments and 300 KB into orders (acks=all)")


def summary() -> None:
    t = Table(title="kops demo summary", title_justify="left")
    for c in ("step", "exit", "seconds", "what it showed"):
        t.add_column(c)
    for title, code, dt, note in results:
        t.add_row(title, str(code), f"{dt:.1f}", note)
    Console().print(t)


def main() -> None:
    keep = "--keep" in sys.argv
    os.environ["KOPS_HOME"] = str(WORKDIR / "home")
    # every demo starts from an empty cluster: stop and wipe what an earlier run (--keep) left
    subprocess.run([KOPS, "sandbox", "down", "--workdir", str(WORKDIR / "cluster"), "--purge"],
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    shutil.rmtree(WORKDIR / "home", ignore_errors=True)
    out = kops("Start a real cluster: ZooKeeper + 6 brokers in racks a,a,b,b,c,c", "sandbox", "up",
               "--workdir", str(WORKDIR / "cluster"), "--base-port", str(BASE_PORT),
               "--zookeeper-port", str(ZK_PORT), "--output", "json", capture=True,
               note="Kafka 3.9 from Maven Central jars, local JVMs")
    info = json.loads(out)
    bootstrap = info["bootstrap_servers"]
    os.environ["KOPS_BOOTSTRAP_SERVER"] = bootstrap
    os.environ["KOPS_ZOOKEEPER"] = info["zookeeper_connect"]
    try:
        make_topics(bootstrap)
        kops("Live topology (Admin API, checked against ZooKeeper)", "cluster", "describe", "--topic", "payments",
             note="brokers, racks, controller, replicas/ISR/leaders; no disagreement with ZooKeeper")
        kops("Health: payments is rack-unsafe", "cluster", "health", expect=(3,),
             note="exit 3: two replicas of each payments partition share rack a")
        plan_out = kops("Plan a minimal-movement rack-safe rebalance", "plan", "rebalance", "--output", "json",
                        "--throttle", "20000000", capture=True)
        doc = json.loads(plan_out)
        rep = doc["report"]
        plan_file = WORKDIR / "rebalance.json"
        plan_file.write_text(json.dumps(doc["plan"]))
        results[-1] = (results[-1][0], results[-1][1], results[-1][2],
                       f"{rep['replicas_moved']} replicas move (lower bound {rep['lower_bound']['moves']}); "
                       f"Kafka's --generate would move {rep['kafka_generate'].get('replicas_moved')}")
        con.print_json(json.dumps({k: rep[k] for k in ("replicas_moved", "partitions_changed", "rack_violations_before",
                                                        "rack_violations_after", "balance")}))
        kops("Execute it under a 20 MB/s throttle, in waves, with progress", "reassign", "execute",
             "--reassignment-json-file", str(plan_file), "--throttle", "20000000", "--max-moves-per-broker", "4",
             "--wait", "--yes", note="throttles scoped to the moving replicas, removed at the end")
        kops("Verify", "reassign", "verify", "--reassignment-json-file", str(plan_file), note="every partition complete")
        kops("Health again", "cluster", "health", note="rack-safe now")
        out = kops("Rack maintenance playbook: demote rack b, then pause for the operator", "playbook", "run",
                   "rack-maintenance", "--param", "rack=b", "--output", "json", expect=(3,), capture=True,
                   note="zero leaders on rack b; the run waits (exit 3, resumable)")
        run_id = json.loads(out)["run_id"]
        kops("The operator takes rack b down", "sandbox", "stop", "--rack", "b", "--workdir", str(WORKDIR / "cluster"))
        kops("Health with rack b down", "cluster", "health", expect=(3,),
             note="no offline partition: every partition keeps an in-sync leader")
        kops("Rack b comes back", "sandbox", "start", "--rack", "b", "--workdir", str(WORKDIR / "cluster"))
        kops("Resume the playbook: wait for the ISR, restore leadership, check health", "playbook", "run",
             "rack-maintenance", "--resume", run_id, note="leadership back on rack b")
        kops("Cron leader rebalance (idempotent, one line)", "leader", "rebalance", note="balanced")
        kops("Broker 5 (rack c) is lost", "sandbox", "stop", "--broker", "5", "--kill",
             "--workdir", str(WORKDIR / "cluster"), note="SIGKILL; its replicas are one failure from offline")
        kops("Health with broker 5 gone", "cluster", "health", expect=(3,), note="under-replicated partitions")
        # the cron job, run here with no grace (the default waits 30 min for the broker to come
        # back) until it has nothing left to do; each run is bounded (--max-moves 50)
        for run in range(1, 11):
            out = kops(f"Cron heal step #{run} (grace 0 for the demo)", "heal", "step", "--broker-grace", "0s",
                       "--throttle", "20M", "--output", "json", expect=(0,), capture=True)
            doc = json.loads(out)
            results[-1] = (*results[-1][:3], doc["summary"][:90])
            con.print(doc["summary"])
            if doc["status"] in ("nothing_to_do", "watching"):  # (watching: reported, nothing left to mend)
                break
        kops("Heal's memory, in the cluster", "heal", "status", note="the fix's history, seen from any host")
        kops("Health after healing", "cluster", "health",
             note="every partition fully replicated on live brokers, rack-safe")
    finally:
        if not keep:
            subprocess.run([KOPS, "sandbox", "down", "--workdir", str(WORKDIR / "cluster"), "--purge"],
                           stdin=subprocess.DEVNULL)
        else:
            con.print(f"cluster left running: export KOPS_BOOTSTRAP_SERVER={bootstrap}")
    summary()


if __name__ == "__main__":
    main()
