"""Write large synthetic state-change logs with the line formats of Kafka 3.9 (ZooKeeper mode).

A simulated cluster (brokers in racks, topics with RF replicas) goes through a stream of real-looking
events — topic creation, broker failures and restarts, preferred elections, ISR shrinks — and every
broker writes what Kafka 3.9 writes for them: the controller its ``[Controller id=C epoch=E]`` lines,
each broker its ``[Broker id=B]`` LeaderAndIsr / become-leader / become-follower / metadata lines.
Lines are rendered by ``tests/logsamples.py`` (the formats the parser is tested on). Files are
rotated hourly like Kafka's ``DailyRollingFileAppender`` (``state-change.log.yyyy-MM-dd-HH``; the last
hour is ``state-change.log``), one directory per broker: ``OUT/broker-N/state-change.log*``.

    python bench/gen_logs.py --out /tmp/kops-bench-logs --size 2G --brokers 6
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from datetime import datetime, timedelta

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from tests import logsamples as s  # noqa: E402


def parse_size(v: str) -> int:
    v = v.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if v[-1] in mult:
        return int(float(v[:-1]) * mult[v[-1]])
    return int(v)


class Writer:
    """Per-broker hourly files, buffered."""

    def __init__(self, out: str, brokers: list[int]):
        self.out = out
        self.files: dict[int, tuple[str, object]] = {}
        self.buf: dict[int, list[str]] = {b: [] for b in brokers}
        self.bytes = 0
        self.lines = 0
        for b in brokers:
            os.makedirs(os.path.join(out, f"broker-{b}"), exist_ok=True)

    def write(self, b: int, hour: str, text: str) -> None:
        cur = self.files.get(b)
        if cur is None or cur[0] != hour:
            self.flush(b)
            if cur is not None:
                cur[1].close()
            f = open(os.path.join(self.out, f"broker-{b}", f"state-change.log.{hour}"), "w", encoding="utf-8")
            self.files[b] = (hour, f)
        self.buf[b].append(text)
        self.bytes += len(text) + 1
        self.lines += text.count("\n") + 1
        if len(self.buf[b]) >= 4096:
            self.flush(b)

    def flush(self, b: int) -> None:
        cur = self.files.get(b)
        if cur is not None and self.buf[b]:
            cur[1].write("\n".join(self.buf[b]) + "\n")
        self.buf[b] = []

    def close(self) -> None:
        for b, (hour, f) in list(self.files.items()):
            self.flush(b)
            f.close()
            last = os.path.join(self.out, f"broker-{b}", f"state-change.log.{hour}")
            os.replace(last, os.path.join(self.out, f"broker-{b}", "state-change.log"))


def generate(out: str, size: int, brokers: int, topics: int, partitions: int, rf: int, start: str, seed: int,
             stack_every: int = 500) -> dict:
    rnd = random.Random(seed)
    ids = list(range(1, brokers + 1))
    w = Writer(out, ids)
    clock = datetime.strptime(start, "%Y-%m-%d %H:%M:%S")
    controller, cepoch, corr = ids[0], 1, 0
    alive = set(ids)
    # partition -> [replicas, leader, leader_epoch, isr, partition_epoch]
    state: dict[str, list] = {}
    events = 0

    def tick(ms_max: int = 3) -> tuple[str, str]:
        nonlocal clock
        clock += timedelta(milliseconds=rnd.randint(0, ms_max))
        return clock.strftime("%Y-%m-%d %H:%M:%S,") + f"{clock.microsecond // 1000:03d}", clock.strftime("%Y-%m-%d-%H")

    def emit(b: int, render, *args) -> None:
        ts, hour = tick()
        w.write(b, hour, render(ts, *args))

    def send_lai(tps: list[str]) -> None:
        nonlocal corr
        corr += 1
        by_broker: dict[int, list[str]] = {}
        for tp in tps:
            for r in state[tp][0]:
                if r in alive:
                    by_broker.setdefault(r, []).append(tp)
        for b, its in sorted(by_broker.items()):
            nl = sum(1 for tp in its if state[tp][1] == b)
            emit(controller, s.c_send_lai, controller, cepoch, b, nl, len(its) - nl)
        for b, its in sorted(by_broker.items()):
            emit(b, s.b_handling, b, corr, controller, len(its))
            for tp in its:
                rep, leader, le, isr, pe = state[tp]
                if leader == b:
                    emit(b, s.b_leader, b, tp, "T" + tp.split("-")[0][-6:].rjust(21, "x"), le, rnd.randint(0, 10**7), pe, 0, isr,
                         None, le - 1)
                else:
                    emit(b, s.b_follower, b, tp, le, rnd.randint(0, 10**7), pe, 0, leader)
            emit(b, s.b_finished, b, rnd.randint(1, 400), corr, controller, len(its))
        emit(controller, s.c_send_um, controller, cepoch, sorted(alive), len(tps))
        for b in sorted(alive):
            emit(b, s.b_metadata, b, len(tps), controller, cepoch, corr)

    topic_names = [f"topic-{i:04d}" for i in range(topics)]
    created = 0
    t0 = time.time()
    while w.bytes < size:
        events += 1
        roll = rnd.random()
        if created < len(topic_names) and (roll < 0.3 or not state):
            name = topic_names[created]
            created += 1
            tps = []
            for p in range(partitions):
                rep = [ids[(p + created + i) % brokers] for i in range(rf)]
                tp = f"{name}-{p}"
                state[tp] = [rep, rep[0], 0, list(rep), 0]
                tps.append(tp)
                emit(controller, s.c_new_partition, controller, cepoch, tp, rep)
            for tp in tps:
                rep, leader, le, isr, pe = state[tp]
                emit(controller, s.c_online, controller, cepoch, tp, "NewPartition", leader, le, isr, pe)
            send_lai(tps)
        elif roll < 0.6 and len(alive) > rf:
            dead = rnd.choice(sorted(alive - {controller}))
            alive.discard(dead)
            led = [tp for tp, st in state.items() if st[1] == dead]
            followed = [tp for tp, st in state.items() if dead in st[3] and st[1] != dead]
            emit(controller, s.c_mark_offline, controller, led[:5] + followed[:5], dead)
            for tp in led:
                st = state[tp]
                cands = [r for r in st[3] if r != dead and r in alive]
                st[1] = cands[0] if cands else -1
                st[2] += 1
                st[3] = cands or st[3]
                st[4] += 1
                emit(controller, s.c_online, controller, cepoch, tp, "OfflinePartition", st[1], st[2], st[3], st[4])
            for tp in followed:
                st = state[tp]
                st[3] = [r for r in st[3] if r != dead]
                st[4] += 1
                emit(controller, s.c_isr_removed, controller, cepoch, tp, st[1], st[3], st[2], st[4], dead)
            if stack_every and events % stack_every == 0:
                emit(controller, lambda ts: s.line(ts, "ERROR", f"[Controller id={controller} epoch={cepoch}] Controller {controller} epoch {cepoch} initiated state change of replica {dead} for partition {led[0] if led else 'x-0'} from OnlineReplica to OfflineReplica failed")
                     + "\norg.apache.kafka.common.errors.NotLeaderOrFollowerException: simulated\n\tat kafka.controller.ZkReplicaStateMachine.doHandleStateChanges(ReplicaStateMachine.scala:229)")
            send_lai(led + followed)
        elif roll < 0.85 and len(alive) < brokers:
            back = rnd.choice(sorted(set(ids) - alive))
            alive.add(back)
            tps = [tp for tp, st in state.items() if back in st[0]]
            for tp in tps:
                st = state[tp]
                if back not in st[3]:
                    st[3] = st[3] + [back]
                    st[4] += 1
            send_lai(tps)
        else:  # preferred election
            tps = [tp for tp, st in state.items() if st[1] != st[0][0] and st[0][0] in alive and st[0][0] in st[3]]
            for tp in tps:
                st = state[tp]
                st[1] = st[0][0]
                st[2] += 1
                st[4] += 1
                emit(controller, s.c_online, controller, cepoch, tp, "OnlinePartition", st[1], st[2], st[3], st[4])
            if tps:
                send_lai(tps)
        tick(2000)
    w.close()
    return {"bytes": w.bytes, "lines": w.lines, "events": events, "topics": created, "seconds": round(time.time() - t0, 1),
            "first": start, "last": clock.strftime("%Y-%m-%d %H:%M:%S")}


def replicate_days(out: str, days: int) -> dict:
    """Grow the data set cheaply: copy the generated logs to the following ``days - 1`` days (dates in
    the lines and in the hourly file names shifted with ``sed``), as a week of one cluster's logs."""
    import glob
    import subprocess

    added = 0
    for d in sorted(glob.glob(os.path.join(out, "broker-*"))):
        files = sorted(glob.glob(os.path.join(d, "state-change.log*")))
        for f in files:
            name = os.path.basename(f)
            with open(f, encoding="utf-8") as fh:
                first = fh.readline()
            day0 = datetime.strptime(first[1:11], "%Y-%m-%d")
            hour = name.split(".log.", 1)[1] if ".log." in name else None
            if hour is None:  # the live file: its hour from its last line
                hour = subprocess.run(["tail", "-c", "4096", f], capture_output=True, text=True).stdout.strip()
                hour = [ln for ln in hour.splitlines() if ln.startswith("[")][-1][1:14].replace(" ", "-")
            for k in range(1, days):
                day = (day0 + timedelta(days=k)).strftime("%Y-%m-%d")
                target = os.path.join(d, f"state-change.log.{day}{hour[10:]}")
                with open(target, "w") as fo:
                    subprocess.run(["sed", f"s/^\\[{day0.strftime('%Y-%m-%d')}/[{day}/", f], stdout=fo, check=True)
                added += os.path.getsize(target)
        # the live file is the newest hour: rename so that the last copy is state-change.log
        live = os.path.join(d, "state-change.log")
        newest = sorted(glob.glob(os.path.join(d, "state-change.log.*")))[-1]
        if days > 1:
            with open(live, encoding="utf-8") as fh:
                first = fh.readline()
            hour = subprocess.run(["tail", "-c", "4096", live], capture_output=True, text=True).stdout
            hour = [ln for ln in hour.splitlines() if ln.startswith("[")][-1][1:14].replace(" ", "-")
            os.replace(live, os.path.join(d, f"state-change.log.{hour}"))
            os.replace(newest, live)
    return {"bytes_added": added}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--size", default="100M", help="total bytes, e.g. 500M, 2G")
    ap.add_argument("--brokers", type=int, default=6)
    ap.add_argument("--topics", type=int, default=400)
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--rf", type=int, default=3)
    ap.add_argument("--start", default="2026-11-20 00:00:00")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--days", type=int, default=1, help="copy the generated logs to this many days (cheap growth)")
    a = ap.parse_args(argv)
    info = generate(a.out, parse_size(a.size), a.brokers, a.topics, a.partitions, a.rf, a.start, a.seed)
    if a.days > 1:
        info |= replicate_days(a.out, a.days)
    print(info)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
