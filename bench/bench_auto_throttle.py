"""Benchmark: ``kops reassign execute --throttle auto[:MIN-MAX]`` against a fixed safe rate and a
fixed fast rate, moving data into a slow rack while a producer writes with ``acks=all``.

    W=/tmp/kops-bench-auto
    .venv/bin/kops sandbox up --engine docker --workdir $W --base-port 23092 --zookeeper-port 23081 \\
        --racks a,a,b,b,c,c
    .venv/bin/kops sandbox slow --rack c --delay 25ms --workdir $W
    KOPS_HOME=/tmp/kops-bench-auto-home .venv/bin/python bench/bench_auto_throttle.py --workdir $W \\
        --bootstrap-server 127.0.0.1:23092 --mb-per-partition 100 --rounds 2 --variants safe,fast,auto,probe \\
        > auto-throttle.json
    .venv/bin/kops sandbox down --workdir $W --purge

(run with ``PYTHONDONTWRITEBYTECODE`` unset, as an installed kops runs). The sandbox: 6 brokers
in racks a, a, b, b, c, c, docker engine (``slow`` needs containers), rack c slowed: everything
its brokers send is delayed by 25 ms (netem, or NFQUEUE where the kernel has no netem).

1. Creates ``bulk`` (``--partitions`` partitions, RF 2, an explicit assignment on racks a and b
   only, leaders spread over the four brokers) and fills it with ``--mb-per-partition`` MiB of
   random bytes each; creates ``traffic`` (6 partitions, RF 3, one replica in each of racks a, b
   and c, leaders rotated over the racks, ``min.insync.replicas=2``).
2. Each timed run moves the follower of every ``bulk`` partition into rack c (the slow rack;
   each of its two brokers gets half, each from a different leader where it can: a follower
   fetches from each leader over one connection, whose window over the slow link caps its pace
   whatever the throttle) with the kops CLI::

       kops reassign execute --reassignment-json-file F --bootstrap-server B --throttle RATE \\
           --wait --yes --poll-interval 1 --progress none --output json

   then an untimed reset moves them back without a throttle (it copies between racks a and b
   only), so that every run copies the same bytes. Variants (``--variants``): **safe**
   (``--safe``, default 5M), **fast** (``--fast``, default 200M), **auto** (``--auto``, default
   auto:5M-200M) and, when asked for, **probe** (the auto rate with ``--probe-topic traffic``).
   ``--rounds`` rounds, the order reversed in every other round (safe, fast, auto / auto, fast,
   safe), ``--gap`` idle seconds before each run (longer than Kafka's 11 s quota window) and
   before the first (the producer's baseline latency, no move running).
3. During the runs (the whole benchmark, sliced per run by time):

   - a producer thread writes ``--record-bytes`` records to ``traffic`` with ``acks=all`` at
     ``--rate`` records/s (round robin over the partitions; idempotent, ``linger.ms`` 5) and
     records each record's delivery latency (produce call to delivery report) or error;
   - a sampler thread (its own AdminClient and connection), every ``--sample-interval`` s:
     the ISR of every ``traffic`` partition (metadata): a sample is *under min ISR* when some
     partition's ISR is below its ``min.insync.replicas`` (must stay 0), *URP* when some
     partition's ISR is below its replica count; the follower throttle rate set on the
     destination brokers (DescribeConfigs: the rate the brokers were given); and the bytes the
     new replicas hold (DescribeLogDirs: the copy's pace).

4. Per run: wall seconds (the CLI's start to its exit), bytes moved (the execution's
   ``bytes_to_move``), under-min-ISR and URP samples, the producer's p50 / p99 / max latency and
   errors, the copy rate into rack c (bytes / first to last byte landed), and for the auto runs
   the throttle changes (the execution's journal events, ``$KOPS_HOME/journal``: when, from,
   to, why; ``--progress none`` shows none of them on stderr) and the highest rate reached
   (journal and brokers); throttles left on the brokers or topics afterwards (must be none);
   this script's own CPU seconds during the run (its producer shares the cores: librdkafka's
   idempotent producer spins while its requests wait seconds for their acks) and the ZooKeeper
   config-change backlog before it. ``--progress json`` keeps each run's polls (bytes done,
   throttle) as well. Summary: medians per variant, and the ratios auto/safe and auto/fast of
   the median wall time (and per round).

The topics are deleted at the end (``--keep-topics`` keeps them). One JSON document on stdout,
a line per run and a summary table on stderr. ``KOPS_HOME`` keeps this benchmark's journals
apart from other work; unset, a temporary one is used.
"""

from __future__ import annotations

import argparse
import functools
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FOLLOWER = "follower.replication.throttled.rate"
LEADER = "leader.replication.throttled.rate"
BULK, TRAFFIC = "bulk", "traffic"
MiB = 1024 * 1024


def _env(kops_home: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["KOPS_HOME"] = kops_home
    return env


# ------------------------------------------------------------------------------------------
# the producer: acks=all latency of the traffic topic
# ------------------------------------------------------------------------------------------


class TrafficProducer(threading.Thread):
    """Writes ``rate`` records/s to ``topic`` (acks=all) and keeps ``(sent_at, latency_s, error)``
    per record; times are ``time.monotonic()``."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float, record_bytes: int):
        super().__init__(daemon=True)
        from confluent_kafka import Producer

        # idempotent, as Java producers are by default since Kafka 3.0: a request that times out
        # and is retried is not appended twice (without it the retries to the slow rack's
        # leaders piled up duplicates, which slowed their followers further)
        # linger.ms 5 (librdkafka's default): with 0, the client threads of the brokers whose
        # requests waited seconds for the slow rack used ~35 % of a core each
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                                  "message.timeout.ms": 60000, "enable.idempotence": True})
        self.topic, self.partitions, self.rate = topic, partitions, rate
        self.value = os.urandom(record_bytes)
        self.records: list[list] = []  # [sent_at, latency_s | None, error | None, partition]
        self.stop_flag = threading.Event()

    def _done(self, rec: list, err, _msg) -> None:
        rec[1] = time.monotonic() - rec[0]
        if err is not None:
            rec[2] = str(err)

    def run(self) -> None:
        i = 0
        t0 = time.monotonic()
        while not self.stop_flag.is_set():
            due = t0 + i / self.rate
            while (wait := due - time.monotonic()) > 0:
                self.producer.poll(min(wait, 0.01))
            rec = [time.monotonic(), None, None, i % self.partitions]
            try:
                self.producer.produce(self.topic, value=self.value, partition=rec[3],
                                      on_delivery=functools.partial(self._done, rec))
                self.records.append(rec)
            except BufferError:
                rec[1], rec[2] = 0.0, "local queue full"
                self.records.append(rec)
            self.producer.poll(0)
            i += 1

    def stop(self) -> None:
        self.stop_flag.set()
        self.join(10)
        self.producer.flush(60)

    def window(self, t0: float, t1: float, settle_s: float = 65.0) -> dict:
        """Latency figures of the records sent in ``[t0, t1]``, once each has its answer."""
        end = time.monotonic() + settle_s
        while time.monotonic() < end and any(r[1] is None for r in self.records if t0 <= r[0] <= t1):
            time.sleep(0.2)
        rs = [r for r in self.records if t0 <= r[0] <= t1]
        lat = sorted(r[1] * 1000 for r in rs if r[1] is not None and r[2] is None)
        errors = [r[2] for r in rs if r[2] is not None]
        out = {"records": len(rs), "errors": len(errors), "unanswered": sum(1 for r in rs if r[1] is None),
               "error_kinds": sorted(set(errors))[:5],
               "p50_ms": round(_pct(lat, 50), 1) if lat else None,
               "p99_ms": round(_pct(lat, 99), 1) if lat else None,
               "max_ms": round(lat[-1], 1) if lat else None}
        # where and when: p99 per partition, and the highest latency of each 5 s of the window
        out["p99_ms_by_partition"] = {}
        for part in sorted({r[3] for r in rs}):
            pl = sorted(r[1] * 1000 for r in rs if r[3] == part and r[1] is not None and r[2] is None)
            out["p99_ms_by_partition"][part] = round(_pct(pl, 99), 1) if pl else None
        buckets: dict[int, float] = {}
        for r in rs:
            if r[1] is not None and r[2] is None:
                k = int((r[0] - t0) // 5)
                buckets[k] = max(buckets.get(k, 0.0), r[1] * 1000)
        out["max_ms_per_5s"] = [round(buckets.get(k, 0.0)) for k in range(int((t1 - t0) // 5) + 1)]
        return out


def _pct(sorted_vals: list[float], p: float) -> float:
    k = (len(sorted_vals) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (k - lo)


# ------------------------------------------------------------------------------------------
# the sampler: ISR of traffic, the rate on the brokers, the copy's pace
# ------------------------------------------------------------------------------------------


class Sampler(threading.Thread):
    def __init__(self, bootstrap: str, min_isr: int, dests: list[int], interval_s: float):
        super().__init__(daemon=True)
        from confluent_kafka.admin import AdminClient

        from kops.cluster.config import ClientConfig
        from kops.cluster.connection import Connection

        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.conn = Connection(bootstrap, ClientConfig.load(None), timeout_s=15)
        self.min_isr, self.dests, self.interval_s = min_isr, dests, interval_s
        # (t, under_min: bool, urp: bool, worst ISR text | None)
        self.isr: list[tuple[float, bool, bool, str | None]] = []
        self.rates: list[tuple[float, int | None]] = []  # (t, highest follower rate on the destinations)
        self.sizes: list[tuple[float, int]] = []  # (t, bytes of bulk on the destinations)
        self.errors = 0
        self.last_errors: dict[str, str] = {}
        self.stop_flag = threading.Event()

    def _error(self, kind: str, e: Exception) -> None:
        self.errors += 1
        self.last_errors[kind] = f"{type(e).__name__}: {e}"

    def run(self) -> None:
        from confluent_kafka.admin import ConfigResource, ResourceType

        from kops.cluster.topology import replica_sizes

        while not self.stop_flag.is_set():
            t = time.monotonic()
            try:
                md = self.admin.list_topics(TRAFFIC, timeout=5).topics[TRAFFIC]
                under = [p for p in md.partitions.values() if len(p.isrs) < self.min_isr]
                short = [p for p in md.partitions.values() if len(p.isrs) < len(p.replicas)]
                worst = ", ".join(f"{TRAFFIC}-{p.id} ISR {sorted(p.isrs)} of {p.replicas}" for p in short) or None
                self.isr.append((t, bool(under), bool(short), worst))
            except Exception as e:  # noqa: BLE001 - counted and kept, the sampling goes on
                self._error("isr", e)
            try:
                rates = []
                for b in self.dests:  # one broker per DescribeConfigs call (librdkafka's rule)
                    res = ConfigResource(ResourceType.BROKER, str(b))
                    e = self.admin.describe_configs([res], request_timeout=5)[res].result(5).get(FOLLOWER)
                    if e is not None and e.value:
                        rates.append(int(e.value))
                self.rates.append((t, max(rates) if rates else None))
            except Exception as e:  # noqa: BLE001 - counted and kept, the sampling goes on
                self._error("rates", e)
            try:
                sizes = replica_sizes(self.conn, self.dests, [BULK])
                self.sizes.append((t, sum(v for (tp, _p, b), v in sizes.items() if tp == BULK and b in self.dests)))
            except Exception as e:  # noqa: BLE001 - counted and kept, the sampling goes on
                self._error("sizes", e)
            self.stop_flag.wait(max(0.0, self.interval_s - (time.monotonic() - t)))

    def stop(self) -> None:
        self.stop_flag.set()
        self.join(30)
        self.conn.close()

    def window(self, t0: float, t1: float, base_bytes: int) -> dict:
        isr = [s for s in self.isr if t0 <= s[0] <= t1]
        rates = [r for t, r in self.rates if t0 <= t <= t1 and r is not None]
        sizes = [(t, v - base_bytes) for t, v in self.sizes if t0 <= t <= t1]
        first = next((t for t, v in sizes if v > 0), None)
        top = max((v for _, v in sizes), default=0)
        last = next((t for t, v in sizes if v >= top), None) if top else None
        out = {"samples": len(isr), "under_min_isr_samples": sum(1 for s in isr if s[1]),
               "urp_samples": sum(1 for s in isr if s[2]),
               "urp_first_s": next((round(s[0] - t0, 1) for s in isr if s[2]), None),
               "urp_examples": sorted({s[3] for s in isr if s[3]})[:3],
               "highest_rate_on_brokers": max(rates) if rates else None,
               "copy_rate_MiBps": round(top / (last - first) / MiB, 2) if first and last and last > first else None,
               "first_byte_s": round(first - t0, 1) if first else None,
               "last_byte_s": round(last - t0, 1) if last else None}
        # the rate on the brokers over the run, as it changed (s from the run's start, MiB/s)
        steps, prev = [], object()
        for t, r in self.rates:
            if t0 <= t <= t1 and r != prev:
                steps.append([round(t - t0, 1), round(r / MiB, 2) if r else None])
                prev = r
        out["rate_steps_on_brokers"] = steps
        return out


# ------------------------------------------------------------------------------------------
# topics, plans, runs
# ------------------------------------------------------------------------------------------


def targets(bulk: dict, dests: list[int]) -> dict:
    """The follower of each ``bulk`` partition replaced by a broker of the slow rack: the
    destinations get equal shares, and each destination fetches each of its partitions from a
    different leader where it can. A follower fetches from each leader over one connection (one
    replica fetcher per source broker): on the slow link that connection's window, not the
    throttle, caps the pace (64 KiB of ``replica.socket.receive.buffer.bytes`` per 25 ms round
    trip), so two partitions sharing it would take twice as long whatever the rate."""
    load = {b: [] for b in dests}  # destination -> leaders it fetches from
    out = {}
    for p, (lead, _follower) in sorted(bulk.items()):
        b = min(dests, key=lambda d: (len(load[d]), lead in load[d], d))
        load[b].append(lead)
        out[p] = [lead, b]
    return out


def config_change_notifications(zookeeper: str | None) -> int | None:
    """Children of ``/config/changes`` (ZooKeeper mode): each broker scans every one of the
    last 15 minutes after applying a config change, so a long benchmark makes the brokers apply
    the throttles later (docs/benchmarks.md, "Reassignment execution")."""
    if not zookeeper:
        return None
    from bench_reassign import config_change_notifications as count  # (bench/ is the script's path)

    try:
        return count(zookeeper)
    except Exception:  # noqa: BLE001 - a figure for the record, not needed
        return None


def create_topics(bootstrap: str, racks: dict[int, str], partitions: int, min_isr: int) -> tuple[dict, dict]:
    """``bulk`` on racks a and b (RF 2), ``traffic`` across a, b and c (RF 3): the assignments."""
    from confluent_kafka.admin import AdminClient, NewTopic

    by_rack: dict[str, list[int]] = {}
    for b, r in sorted(racks.items()):
        by_rack.setdefault(r, []).append(b)
    ra, rb, rc = (by_rack[r] for r in sorted(by_rack)[:3])
    # bulk: leaders over a0, b0, a1, b1, ...; the follower in the other rack
    leaders = [x for pair in zip(ra, rb) for x in pair]
    bulk = {}
    for i in range(partitions):
        lead = leaders[i % len(leaders)]
        other = rb if lead in ra else ra
        bulk[i] = [lead, other[(i // len(leaders) + leaders.index(lead) // 2 + 1) % len(other)]]
    # traffic: one replica per rack, leaders on every broker once (rack i % 3, its broker i // 3),
    # the next rack's other broker and the third rack's same-index broker as followers
    traffic = {}
    trio = (ra, rb, rc)
    for i in range(6):
        k, j = i % 3, (i // 3) % 2
        traffic[i] = [trio[k][j % len(trio[k])], trio[(k + 1) % 3][(j + 1) % len(trio[(k + 1) % 3])],
                      trio[(k + 2) % 3][j % len(trio[(k + 2) % 3])]]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = set(admin.list_topics(timeout=10).topics)
    gone = [t for t in (BULK, TRAFFIC) if t in existing]
    if gone:
        for f in admin.delete_topics(gone).values():
            f.result(30)
        _wait(lambda: not (set(admin.list_topics(timeout=10).topics) & set(gone)), 60, "old topics deleted")
        time.sleep(6)  # log.segment.delete.delay.ms=5000: let the brokers drop the old logs
    new = [NewTopic(BULK, num_partitions=len(bulk), replica_assignment=[bulk[p] for p in sorted(bulk)]),
           NewTopic(TRAFFIC, num_partitions=len(traffic), replica_assignment=[traffic[p] for p in sorted(traffic)],
                    config={"min.insync.replicas": str(min_isr)})]
    for f in admin.create_topics(new).values():
        f.result(30)
    for name, want in ((BULK, bulk), (TRAFFIC, traffic)):
        _wait(lambda name=name, want=want: _ready(admin, name, want), 60, f"topic {name} ready")
    return bulk, traffic


def _ready(admin, name: str, want: dict) -> bool:
    md = admin.list_topics(name, timeout=10).topics.get(name)
    return (md is not None and md.error is None and len(md.partitions) == len(want)
            and all(p.leader >= 0 and len(p.isrs) == len(want[p.id]) for p in md.partitions.values()))


def _wait(cond, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if cond():
                return
        except Exception:
            pass
        time.sleep(0.5)
    raise SystemExit(f"timed out waiting for: {what}")


def fill(bootstrap: str, partitions: int, mb: int, record_bytes: int) -> float:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, "batch.size": 65536,
                  "compression.type": "none", "queue.buffering.max.kbytes": 262144})
    pool = os.urandom(record_bytes * 64)
    t0 = time.monotonic()
    n = partitions * mb * MiB // record_bytes
    for i in range(n):
        off = (i * 4099) % (len(pool) - record_bytes)
        while True:
            try:
                p.produce(BULK, value=pool[off:off + record_bytes], partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
        if i % 200 == 0:
            p.poll(0)
    if p.flush(300) != 0:
        raise SystemExit("could not write the bulk data")
    return time.monotonic() - t0


def kops_execute(bootstrap: str, plan: str, throttle: str | None, *, kops_home: str, timeout: float,
                 extra: list[str] = (), progress: str = "none") -> dict:
    cmd = [str(ROOT / ".venv/bin/kops"), "reassign", "execute", "--reassignment-json-file", plan,
           "--bootstrap-server", bootstrap, *(["--throttle", throttle] if throttle else []),
           "--wait", "--yes", "--poll-interval", "1", "--progress", progress, "--output", "json",
           "--timeout", str(int(timeout)), *extra]
    t0, w0 = time.monotonic(), time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 180, env=_env(kops_home))
    t1 = time.monotonic()
    try:
        doc = json.loads(r.stdout)
    except ValueError:
        doc = {}
    return {"cmd": cmd, "t0": t0, "t1": t1, "wall_t0": w0, "exit": r.returncode, "doc": doc,
            "stderr": r.stderr}


_CHANGE = re.compile(r"throttle auto: ([\d.]+) (B|KiB|MiB|GiB)/s -> ([\d.]+) (B|KiB|MiB|GiB)/s \((.*)\)$")
_UNIT = {"B": 1, "KiB": 1024, "MiB": MiB, "GiB": 1024 * MiB}


def throttle_changes(kops_home: str, execution_id: str | None, stderr: str, wall_t0: float) -> list[dict]:
    """The auto throttle's changes: the execution's journal events (else its stderr lines)."""
    lines: list[tuple[float | None, str]] = []
    if execution_id:
        for path in glob.glob(os.path.join(kops_home, "journal", "*", f"{execution_id}.json")):
            for e in json.loads(Path(path).read_text()).get("events", []):
                stamp, _, text = e.partition(" ")
                if text.startswith("throttle auto: ") and "->" in text:
                    when = datetime.fromisoformat(stamp).timestamp() - wall_t0
                    lines.append((round(when), text))
    if not lines:
        lines = [(None, ln.strip()) for ln in stderr.splitlines() if ln.strip().startswith("throttle auto:")]
    out = []
    for when, text in lines:
        m = _CHANGE.search(text)
        if not m:
            continue
        out.append({"at_s": when, "from_MiBps": round(float(m[1]) * _UNIT[m[2]] / MiB, 2),
                    "to_MiBps": round(float(m[3]) * _UNIT[m[4]] / MiB, 2), "reason": m[5]})
    return out


def progress_series(stderr: str) -> list:
    """``--progress json``'s lines: [elapsed_s, bytes_done, throttle] per poll, [elapsed_s, text]
    per message."""
    out = []
    for ln in stderr.splitlines():
        try:
            e = json.loads(ln)
        except ValueError:
            continue
        if not isinstance(e, dict):
            continue
        if e.get("event") == "progress":
            out.append([e["elapsed_s"], e.get("bytes_done"), e.get("throttle_bytes_per_s")])
        elif e.get("event") == "message":
            out.append([e["elapsed_s"], e.get("text")])
    return out


def throttles_left(conn) -> list[str]:
    from kops.ops import reassign as R
    from kops.ops import throttle as T

    return T.throttles_in(R.read(conn, topics=[BULK, TRAFFIC]), [BULK, TRAFFIC])


class Stop(Exception):
    """The benchmark cannot go on: the results so far are still printed."""


def wait_quiet(conn, want: dict, timeout: float = 300) -> None:
    """Nothing reassigning, ``bulk`` at ``want``, every partition of both topics fully in sync."""
    from kops.cluster.topology import list_reassignments
    from kops.ops import reassign as R

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        topo = R.read(conn, topics=[BULK, TRAFFIC])
        if (not list_reassignments(conn)
                and all(tuple(p.replicas) == tuple(want[p.partition]) for p in topo.topic(BULK).partitions)
                and all(set(p.isr) == set(p.replicas) for t in (BULK, TRAFFIC) for p in topo.topic(t).partitions)):
            return
        time.sleep(0.5)
    short = [f"{p.topic}-{p.partition} ISR {list(p.isr)} of {list(p.replicas)}" for t in (BULK, TRAFFIC)
             for p in topo.topic(t).partitions if set(p.isr) != set(p.replicas)]
    raise Stop(f"cluster not quiet after {timeout}s: {short or 'reassignments in progress'}")


def bulk_bytes_on(conn, brokers: list[int]) -> int:
    from kops.cluster.topology import replica_sizes

    return sum(v for (t, _p, b), v in replica_sizes(conn, brokers, [BULK]).items() if t == BULK and b in brokers)


# ------------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", required=True, help="work dir of the running docker sandbox")
    ap.add_argument("--bootstrap-server", required=True)
    ap.add_argument("--partitions", type=int, default=6, help="partitions of bulk")
    ap.add_argument("--mb-per-partition", type=int, default=100, help="MiB of random bytes per bulk partition")
    ap.add_argument("--fill-record-bytes", type=int, default=8192, help="record size of the bulk data")
    ap.add_argument("--safe", default="5M", help="the fixed safe rate")
    ap.add_argument("--fast", default="200M", help="the fixed fast rate")
    ap.add_argument("--auto", default="auto:5M-200M", help="the adaptive throttle's spec")
    ap.add_argument("--variants", default="safe,fast,auto",
                    help="comma-separated: safe, fast, auto, probe (auto with --probe-topic traffic)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--rate", type=float, default=200, help="traffic records per second")
    ap.add_argument("--record-bytes", type=int, default=1024, help="traffic record size")
    ap.add_argument("--min-isr", type=int, default=2, help="min.insync.replicas of traffic")
    ap.add_argument("--sample-interval", type=float, default=0.5)
    ap.add_argument("--gap", type=float, default=15.0, help="idle seconds before each timed run")
    ap.add_argument("--timeout", type=float, default=900, help="per run (kops --timeout)")
    ap.add_argument("--keep-topics", action="store_true")
    ap.add_argument("--progress", choices=("none", "json"), default="none",
                    help="the timed runs' --progress; json: each run's polls (bytes done, throttle) and "
                         "messages are kept in its 'progress' field")
    args = ap.parse_args()

    from kops.cluster.config import ClientConfig
    from kops.cluster.connection import Connection

    bs = args.bootstrap_server
    state = json.loads((Path(args.workdir) / "sandbox.json").read_text())
    cfg = state.get("config") or {}
    if cfg.get("engine") != "docker":
        raise SystemExit(f"{args.workdir}: not a docker sandbox (engine {cfg.get('engine')})")
    racks = {int(b): r for b, r in (cfg.get("racks") or {}).items()}
    if len(set(racks.values())) < 3:
        raise SystemExit(f"{args.workdir}: needs brokers in three racks (has {racks})")
    slow_rack = sorted(set(racks.values()))[2]
    dests = sorted(b for b, r in racks.items() if r == slow_rack)
    faults = state.get("faults", [])
    if not any(f.get("kind") == "slow" and set(f.get("brokers", [])) >= set(dests) for f in faults):
        print(f"warning: rack {slow_rack} (brokers {dests}) is not slowed: `kops sandbox slow --rack {slow_rack} "
              f"--delay 25ms --workdir {args.workdir}`", file=sys.stderr)
    kops_home = os.environ.get("KOPS_HOME") or tempfile.mkdtemp(prefix="bench-auto-home-")
    variants = {"safe": (args.safe, []), "fast": (args.fast, []), "auto": (args.auto, []),
                "probe": (args.auto, ["--probe-topic", TRAFFIC])}
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    for v in names:
        if v not in variants:
            ap.error(f"--variants: unknown {v!r}")

    t_start = time.monotonic()
    bulk, traffic = create_topics(bs, racks, args.partitions, args.min_isr)
    fill_s = fill(bs, args.partitions, args.mb_per_partition, args.fill_record_bytes)
    print(f"bulk: {args.partitions} x {args.mb_per_partition} MiB written in {fill_s:.0f} s; assignment {bulk}; "
          f"traffic {traffic}", file=sys.stderr, flush=True)
    there = targets(bulk, dests)
    tmp = Path(tempfile.mkdtemp(prefix="bench-auto-"))
    plans = {}
    for name, want in (("out", there), ("back", bulk)):
        f = tmp / f"plan-{name}.json"
        f.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": BULK, "partition": p, "replicas": r} for p, r in sorted(want.items())]}))
        plans[name] = str(f)

    result: dict = {
        "sandbox": {"workdir": args.workdir, "mode": state.get("mode"), "kafka_version": state.get("kafka_version"),
                    "racks": racks, "faults": faults},
        "partitions": args.partitions, "mb_per_partition": args.mb_per_partition,
        "variants": {v: variants[v][0] + (" " + " ".join(variants[v][1]) if variants[v][1] else "") for v in names},
        "traffic": {"rate": args.rate, "record_bytes": args.record_bytes, "min_isr": args.min_isr,
                    "assignment": traffic},
        "bulk_assignment": bulk, "target_assignment": there, "fill_s": round(fill_s, 1),
        "cpus": os.cpu_count(), "load_avg_start": [round(x, 2) for x in os.getloadavg()], "runs": [],
    }
    conn = Connection(bs, ClientConfig.load(None), timeout_s=15)
    producer = TrafficProducer(bs, TRAFFIC, len(traffic), args.rate, args.record_bytes)
    sampler = Sampler(bs, args.min_isr, dests, args.sample_interval)
    try:
        wait_quiet(conn, bulk)
        producer.start()
        time.sleep(args.gap)  # the producer's baseline, before any move
        result["baseline_producer"] = producer.window(time.monotonic() - args.gap + 1, time.monotonic())
        sampler.start()
        order = []
        for r in range(args.rounds):
            order += [(r, v) for v in (names if r % 2 == 0 else list(reversed(names)))]
        for rnd, variant in order:
            time.sleep(args.gap)
            base = bulk_bytes_on(conn, dests)
            notifications = config_change_notifications(state.get("zookeeper_connect"))
            load0 = os.getloadavg()
            cpu0 = time.process_time()
            rate, extra = variants[variant]
            run = kops_execute(bs, plans["out"], rate, kops_home=kops_home, timeout=args.timeout, extra=extra,
                               progress=args.progress)
            load1 = os.getloadavg()
            cpu = time.process_time() - cpu0
            doc = run["doc"]
            res = {"round": rnd, "variant": variant, "throttle": rate + (" " + " ".join(extra) if extra else ""),
                   "exit": run["exit"], "state": doc.get("state"), "wall_s": round(run["t1"] - run["t0"], 2),
                   "kops_elapsed_s": doc.get("elapsed_s"), "bytes_moved": doc.get("bytes_to_move"),
                   "final_rate": doc.get("throttle"), "notes": doc.get("notes"),
                   "throttles_left_reported": doc.get("throttles_left"),
                   "load_avg_1m": [round(load0[0], 2), round(load1[0], 2)],
                   # this script's own CPU during the run (producer, sampler): it shares the cores
                   "bench_cpu_s": round(cpu, 1), "config_change_notifications": notifications}
            if run["exit"] != 0 or doc.get("state") != "complete":
                res["stderr_tail"] = run["stderr"].strip().splitlines()[-10:]
            res.update(sampler.window(run["t0"], run["t1"], base))
            if args.progress == "json":
                res["progress"] = progress_series(run["stderr"])
            res["producer"] = producer.window(run["t0"], run["t1"])
            if variant in ("auto", "probe"):
                ch = throttle_changes(kops_home, doc.get("execution_id"), run["stderr"], run["wall_t0"])
                res["throttle_changes"] = ch
                res["changes"] = len(ch)
                res["cuts"] = sum(1 for c in ch if c["to_MiBps"] < c["from_MiBps"])
                res["highest_rate_MiBps"] = max([c["to_MiBps"] for c in ch], default=None)
                res["stderr_throttle_lines"] = sum(1 for ln in run["stderr"].splitlines()
                                                   if ln.startswith("throttle auto:"))
            # brokers apply config changes asynchronously: give the removal a moment to show
            end = time.monotonic() + 20
            while (left := throttles_left(conn)) and time.monotonic() < end:
                time.sleep(0.5)
            res["throttles_after"] = left
            result["runs"].append(res)
            print(_line(res), file=sys.stderr, flush=True)
            if left:
                raise Stop(f"throttles left after the {variant} run: {left}")
            if res["state"] != "complete":
                raise Stop(f"the {variant} run did not complete: exit {run['exit']}\n{run['stderr'][-2000:]}")
            # untimed reset: the same bytes for the next run
            t_reset = time.monotonic()
            back = kops_execute(bs, plans["back"], None, kops_home=kops_home, timeout=args.timeout)
            if back["exit"] != 0:
                raise Stop(f"reset failed: exit {back['exit']}\n{back['stderr'][-2000:]}")
            wait_quiet(conn, bulk)
            res["reset_s"] = round(time.monotonic() - t_reset, 1)
    except Stop as e:
        result["stopped"] = str(e)
        print(f"stopped: {e}", file=sys.stderr, flush=True)
    finally:
        sampler.stop()
        producer.stop()
        result["sampler_errors"] = sampler.errors
        result["sampler_last_errors"] = sampler.last_errors
        if not args.keep_topics:
            from confluent_kafka.admin import AdminClient

            try:
                admin = AdminClient({"bootstrap.servers": bs})
                for f in admin.delete_topics([BULK, TRAFFIC]).values():
                    f.result(30)
            except Exception as e:  # noqa: BLE001 - report, do not hide the run's own error
                print(f"could not delete the topics: {e}", file=sys.stderr)
        conn.close()
    result["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    result["total_s"] = round(time.monotonic() - t_start, 1)
    result["summary"] = _summary(result["runs"], names)
    print(_table(result["summary"]), file=sys.stderr, flush=True)
    print(json.dumps(result, indent=2))
    return 1 if "stopped" in result else 0


def _line(r: dict) -> str:
    p = r["producer"]
    auto = (f"  changes {r['changes']} (cuts {r['cuts']}) highest {r['highest_rate_MiBps']} MiB/s"
            if "changes" in r else "")
    return (f"round {r['round']} {r['variant']:5s} wall {r['wall_s']:7.2f}s  bytes {r['bytes_moved']}  "
            f"copy {r['copy_rate_MiBps']} MiB/s  under-min-ISR {r['under_min_isr_samples']}/{r['samples']}  "
            f"URP {r['urp_samples']}/{r['samples']}  p50 {p['p50_ms']} ms  p99 {p['p99_ms']} ms  "
            f"max {p['max_ms']} ms  errors {p['errors']}{auto}  load {r['load_avg_1m']}  bench cpu {r['bench_cpu_s']}s  "
            f"zk-notifications {r['config_change_notifications']}  state {r['state']}")


def _summary(runs: list[dict], names: list[str]) -> dict:
    out: dict = {}
    for v in names:
        rs = [r for r in runs if r["variant"] == v]
        if not rs:
            continue

        def med(get, rs=rs):
            vals = [x for x in (get(r) for r in rs) if x is not None]
            return round(statistics.median(vals), 2) if vals else None

        out[v] = {"runs": len(rs), "median_wall_s": med(lambda r: r["wall_s"]),
                  "median_copy_rate_MiBps": med(lambda r: r["copy_rate_MiBps"]),
                  "under_min_isr_samples": sum(r["under_min_isr_samples"] for r in rs),
                  "urp_samples": sum(r["urp_samples"] for r in rs),
                  "samples": sum(r["samples"] for r in rs),
                  "median_p50_ms": med(lambda r: r["producer"]["p50_ms"]),
                  "median_p99_ms": med(lambda r: r["producer"]["p99_ms"]),
                  "max_ms": max((r["producer"]["max_ms"] or 0) for r in rs),
                  "producer_errors": sum(r["producer"]["errors"] for r in rs)}
        if any("changes" in r for r in rs):
            out[v]["median_changes"] = med(lambda r: r.get("changes"))
            out[v]["cuts"] = sum(r.get("cuts", 0) for r in rs)
            out[v]["highest_rate_MiBps"] = max((r.get("highest_rate_MiBps") or 0) for r in rs)
    ratios = {}
    for a in ("auto", "probe"):
        for b in ("safe", "fast"):
            if a in out and b in out and out[b]["median_wall_s"]:
                ratios[f"{a}/{b}"] = round(out[a]["median_wall_s"] / out[b]["median_wall_s"], 3)
                per_round = []
                for rnd in sorted({r["round"] for r in runs}):
                    wa = [r["wall_s"] for r in runs if r["round"] == rnd and r["variant"] == a]
                    wb = [r["wall_s"] for r in runs if r["round"] == rnd and r["variant"] == b]
                    if wa and wb:
                        per_round.append(round(wa[0] / wb[0], 3))
                ratios[f"{a}/{b} per round"] = per_round
    out["wall_ratios"] = ratios
    return out


def _table(s: dict) -> str:
    rows = [f"{'variant':8s} {'runs':>4s} {'wall':>8s} {'copy MiB/s':>10s} {'<minISR':>8s} {'URP':>8s} "
            f"{'p50 ms':>8s} {'p99 ms':>8s} {'max ms':>8s} {'errors':>6s} {'changes':>7s} {'top MiB/s':>9s}"]
    for v, x in s.items():
        if v == "wall_ratios":
            continue
        rows.append(f"{v:8s} {x['runs']:>4d} {x['median_wall_s']:>7.1f}s {str(x['median_copy_rate_MiBps']):>10s} "
                    f"{x['under_min_isr_samples']:>3d}/{x['samples']:<4d} {x['urp_samples']:>3d}/{x['samples']:<4d} "
                    f"{str(x['median_p50_ms']):>8s} {str(x['median_p99_ms']):>8s} {str(x['max_ms']):>8s} "
                    f"{x['producer_errors']:>6d} {str(x.get('median_changes', '-')):>7s} "
                    f"{str(x.get('highest_rate_MiBps', '-')):>9s}")
    rows.append("wall ratios: " + json.dumps(s.get("wall_ratios", {})))
    return "\n".join(rows)


if __name__ == "__main__":
    raise SystemExit(main())
