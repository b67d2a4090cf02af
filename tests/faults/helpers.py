"""What the fault scenarios share: topics, kops as a user runs it, the checks after a fault."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient

from tests.cluster.kafka_helpers import admin, assert_lock_released, create_topic, delete_topic, ongoing, wait_for
from tests.cluster.test_reassign import replicas, same_rack_swap, write_plan

__all__ = [
    "FaultWatch", "KopsRun", "SANDBOXES", "admin", "assert_clean", "cluster_epochs", "create_topic", "delete_topic",
    "fully_replicated", "kops", "kops_bg", "moves_in_flight", "replication_report", "throttles_set",
    "unplanned_faults", "wait_fully_replicated", "wait_settled", "ongoing", "replicas", "same_rack_swap", "unique",
    "wait_for", "wait_in_flight", "wait_recovered", "write_plan", "workload_topics",
]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def kops(*args: str, timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The real CLI in a fresh process, as a user or cron runs it."""
    return subprocess.run([sys.executable, "-m", "kops", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)


class KopsRun:
    """kops in the background (``kops_bg(...)``); ``finish(timeout)`` -> (exit code, stdout, stderr)
    and how long it ran."""

    def __init__(self, args: list[str], out: Path):
        self.args = args
        self.out = out
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen([sys.executable, "-m", "kops", *args], stdout=open(out, "w"),
                                     stderr=open(f"{out}.err", "w"), stdin=subprocess.DEVNULL, env=dict(os.environ))
        self.elapsed: float | None = None

    def finish(self, timeout: float) -> tuple[int, str, str]:
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise AssertionError(f"kops {' '.join(self.args[:2])} did not end within {timeout:.0f}s "
                                 f"(stderr: {Path(f'{self.out}.err').read_text()[-2000:]})") from None
        self.elapsed = time.monotonic() - self.t0
        return rc, self.out.read_text(), Path(f"{self.out}.err").read_text()

    def stop(self) -> None:
        """Kill it if it still runs (a scenario that failed before waiting for it): no kops of a
        failed scenario may go on holding the cluster lock into the next one."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def kops_bg(*args: str, out: Path) -> KopsRun:
    return KopsRun(list(args), out)


def cron_runs(run, done, *, limit: int, every_s: float = 2.0) -> list[dict]:
    """``run()`` -> (exit code, report, stderr) as cron would call it, every ``every_s``, until
    ``done(report)``; each run must exit 0, and more than ``limit`` runs fail the test. The
    reports, in order."""
    runs: list[dict] = []
    while True:
        code, doc, err = run()
        assert code == 0, (doc, err[-2000:])
        runs.append(doc)
        if done(doc):
            return runs
        assert len(runs) < limit, doc
        time.sleep(every_s)


def workload_topics(bootstrap: str, n: int = 2, partitions: int = 6) -> list[str]:
    """Topics for the workload: RF 3 over the 3 racks, min.insync.replicas=2."""
    names = [unique("work") for _ in range(n)]
    for t in names:
        create_topic(bootstrap, t, partitions=partitions, rf=3, min_isr=2)
    known_to_every_broker(bootstrap, names)
    return names


def known_to_every_broker(bootstrap: str, topics: list[str], timeout: float = 60) -> None:
    """Until each broker's own metadata shows every partition of ``topics`` with a leader: a client
    that asks a broker which has not heard of a new topic yet (the controller tells each broker
    on its own) would take it for unknown — a consumer then leaves it out of its subscription."""
    from confluent_kafka.admin import AdminClient

    def knows(addr: str) -> bool:
        try:
            md = AdminClient({"bootstrap.servers": addr}).list_topics(timeout=5)
        except Exception:  # noqa: BLE001 - not answering yet
            return False
        return all(t in md.topics and md.topics[t].error is None and md.topics[t].partitions
                   and all(p.leader >= 0 for p in md.topics[t].partitions.values()) for t in topics)

    # the brokers registered now (a scenario may have replaced one: the bootstrap list can name a
    # broker that is gone)
    brokers = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).brokers
    for addr in sorted(f"{b.host}:{b.port}" for b in brokers.values()):
        wait_for(lambda a=addr: knows(a), timeout, 0.2, f"broker {addr} to know topics {topics}")


def wait_in_flight(bootstrap: str, topic: str, timeout: float = 60) -> None:
    """Until the cluster shows a reassignment of ``topic`` in progress."""
    wait_for(lambda: any(t == topic for t, _ in ongoing(bootstrap)), timeout, 0.2,
             f"a reassignment of {topic} in flight")


def moves_in_flight(bootstrap: str, topic: str, timeout: float = 60) -> int:
    """How many of ``topic``'s partitions the cluster shows being reassigned, asked until a
    controller answers (right after a controller was killed, none may for a moment)."""
    got: list[int] = []

    def ask() -> bool:
        try:
            got[:] = [sum(1 for t, _ in ongoing(bootstrap) if t == topic)]
        except Exception:  # noqa: BLE001 - no controller to answer yet
            return False
        return True
    wait_for(ask, timeout, 0.5, "a controller to answer ListPartitionReassignments")
    return got[0]


def _not_fully_replicated(md) -> list[str]:
    """The partitions of a metadata answer without a leader or with replicas missing from the
    ISR (``topic-p leader L replicas [..] isr [..]``), and the topics answered with an error."""
    bad = []
    for name, tm in sorted(md.topics.items()):
        if tm.error is not None:
            bad.append(f"{name}: {tm.error}")
            continue
        bad += [f"{name}-{p} leader {pm.leader} replicas {pm.replicas} isr {pm.isrs}"
                for p, pm in sorted(tm.partitions.items()) if pm.leader < 0 or set(pm.isrs) != set(pm.replicas)]
    return bad


def _missing_from_isr(md) -> set[int]:
    return {r for tm in md.topics.values() for pm in tm.partitions.values() for r in set(pm.replicas) - set(pm.isrs)}


def assignment(bootstrap: str) -> dict[tuple[str, int], list[int]]:
    """Every partition of every topic (internal ones too) -> its replicas, as the metadata says."""
    md = admin(bootstrap).list_topics(timeout=10)
    return {(t, p): list(pm.replicas) for t, tm in md.topics.items() for p, pm in tm.partitions.items()}


def fully_replicated(bootstrap: str) -> bool:
    """Every partition has a leader and its whole replica set in the ISR."""
    try:
        md = admin(bootstrap).list_topics(timeout=10)
    except Exception:  # noqa: BLE001 - the cluster is still recovering
        return False
    return not _not_fully_replicated(md)


#: each fault-lab sandbox by its bootstrap servers (registered by conftest), for the broker log
#: excerpts a failed wait for recovery ends with
SANDBOXES: dict[str, object] = {}


def _log_excerpt(sb, broker: int, lines: int = 4) -> list[str]:
    """The last WARN/ERROR lines of ``broker``'s server.log (the log's last 512 KiB)."""
    f = sb.broker_log_dir(broker) / "server.log"  # type: ignore[attr-defined]
    if not f.exists():
        return []
    with f.open("rb") as fh:
        fh.seek(max(0, f.stat().st_size - 512 * 1024))
        text = fh.read().decode("utf-8", "replace")
    hits = [ln for ln in text.splitlines() if " ERROR " in ln or " WARN " in ln]
    return [f"  broker {broker}: {ln[:300]}" for ln in hits[-lines:]]


def replication_report(bootstrap: str) -> str:
    """What each broker's metadata says is not fully replicated, with the controller it names,
    the replication throttles in force and the last warnings of the brokers missing from an ISR
    and of the controller: the text a failed wait for recovery ends with (a follower that never
    catches up shows in every broker's view; a stale metadata cache in one)."""
    lines, suspects = [], set()
    for b in bootstrap.split(","):
        try:
            md = AdminClient({"bootstrap.servers": b}).list_topics(timeout=10)
        except Exception as e:  # noqa: BLE001 - a report, whatever answers
            lines.append(f"{b}: no answer ({e})")
            continue
        bad = _not_fully_replicated(md)
        suspects |= _missing_from_isr(md) | {md.controller_id}
        lines.append(f"{b} (controller {md.controller_id}, brokers {sorted(md.brokers)}): "
                     f"{len(bad)} not fully replicated"
                     + (": " + "; ".join(bad[:6]) + (" ..." if len(bad) > 6 else "") if bad else ""))
    try:
        lines.append(f"throttles in force: {throttles_set(bootstrap) or 'none'}")
    except Exception as e:  # noqa: BLE001
        lines.append(f"throttles not read: {e}")
    sb = SANDBOXES.get(bootstrap)
    if sb is not None:
        for b in sorted(x for x in suspects if x is not None and x >= 0):
            lines += _log_excerpt(sb, b)
    return "\n".join(lines)


def wait_fully_replicated(bootstrap: str, timeout: float, what: str) -> None:
    """Until every partition is fully replicated; on timeout the assertion carries
    :func:`replication_report`."""
    try:
        wait_for(lambda: fully_replicated(bootstrap), timeout, 0.5, what)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{replication_report(bootstrap)}") from None


def wait_recovered(bootstrap: str, since: float, timeout: float = 180) -> float:
    """Seconds from ``since`` (a monotonic time) until every partition is fully replicated."""
    wait_fully_replicated(bootstrap, timeout, "every partition fully replicated again")
    return round(time.monotonic() - since, 1)


def throttles_set(bootstrap: str) -> dict[str, dict[str, str]]:
    """Every replication throttle setting a tool can leave on the cluster: each topic's throttled
    replicas (internal topics too, in one DescribeConfigs request) and each registered broker's
    own dynamic rates (one request each: librdkafka sends a broker's configs to that broker),
    read by a new client. Rates a broker inherits -- from its static server.properties or the
    cluster-wide ``<default>`` entity -- are the operator's, not a leftover."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    from kops.cluster.topology import config_source

    from tests.cluster.test_reassign import RATE_KEYS, REPLICA_KEYS

    a = AdminClient({"bootstrap.servers": bootstrap})
    md = a.list_topics(timeout=15)
    found: dict[str, dict[str, str]] = {}
    topics = [ConfigResource(ResourceType.TOPIC, t) for t in sorted(md.topics)]
    for r, fut in (a.describe_configs(topics, request_timeout=15) if topics else {}).items():
        entries = fut.result(20)
        got = {k: entries[k].value for k in REPLICA_KEYS if k in entries and entries[k].value}
        if got:
            found[f"topic {r.name}"] = got
    for b in sorted(md.brokers):
        r = ConfigResource(ResourceType.BROKER, str(b))
        entries = a.describe_configs([r], request_timeout=15)[r].result(20)
        got = {k: entries[k].value for k in RATE_KEYS
               if k in entries and config_source(entries[k]) == "DYNAMIC_BROKER_CONFIG"}
        if got:
            found[f"broker {b}"] = got
    return found


def assert_clean(bootstrap: str, record=None, context: str = "") -> int:
    """No replication throttle left on any topic or broker of the cluster, no reassignment in
    progress, no kops execution unfinished, the lock released. The number of throttle settings
    found is measured and given to ``record`` (as ``throttles_left``) before it is asserted to be
    0. ``context`` (what ran, its notes) goes into a failure's message."""
    seen: dict = {}

    def none_left() -> bool:
        seen.clear()
        seen.update(throttles_set(bootstrap))
        return not seen
    try:
        # kops lifts them as its last step; a broker applies a dynamic config change a moment later
        wait_for(none_left, 30, 0.5, "no throttle left")
    except AssertionError:
        pass
    left = sum(len(v) for v in seen.values())
    if record is not None:
        record(throttles_left=left)
    assert left == 0, f"throttles left: {seen}; {context}"
    assert ongoing(bootstrap) == {}, "a reassignment is still in progress"
    r = kops("reassign", "list", "--bootstrap-server", bootstrap, "--output", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["kops_executions"] == [], "the journal still shows an unfinished execution"
    assert_lock_released(bootstrap)
    return left


def data_topic(bootstrap: str, sb, tmp_path: Path, *, partitions: int = 3, mb: int = 6, plan_name: str = "plan.json"):
    """A topic with real data and a plan that moves one replica of each partition to the other
    broker of its rack: (topic, before, target, plan file)."""
    topic = unique("moved")
    before = create_topic(bootstrap, topic, partitions=partitions, rf=3, min_isr=2, mb_per_partition=mb)
    target = same_rack_swap(sb, before)
    return topic, before, target, write_plan(tmp_path / plan_name, topic, target)


def cluster_epochs(sb) -> dict:
    """What a cluster fault nobody injected leaves behind (ZooKeeper mode): each registered
    broker's registration time (``/brokers/ids/N``; a broker registers anew once its ZooKeeper
    session has expired -- a JVM that did not heartbeat for ``zookeeper.session.timeout.ms``)
    and the controller epoch (``/controller_epoch``, +1 at every controller election)."""
    from kops.sandbox import probe

    with probe.zk_client(sb.zookeeper_connect, 15.0) as zk:
        regs = probe.zk_registrations(zk)
        data, _ = zk.get("/controller_epoch")
    return {"brokers": {b: r.timestamp_ms for b, r in regs.items()}, "controller_epoch": int(data.decode() or 0)}


def unplanned_faults(sb, before: dict) -> list[str]:
    """What changed since ``before`` (:func:`cluster_epochs`) although the scenario injected no
    broker or ZooKeeper fault: brokers whose ZooKeeper session expired (registered anew, or not
    registered at all) and controller elections. Empty when the cluster stayed as it was."""
    from datetime import datetime, timezone

    now = cluster_epochs(sb)
    out = []
    for b, ts in sorted(before["brokers"].items()):
        t = now["brokers"].get(b)
        if t is None:
            out.append(f"broker {b} is not registered (its ZooKeeper session expired)")
        elif t != ts:
            at = datetime.fromtimestamp(t / 1000, timezone.utc).strftime("%H:%M:%S")
            out.append(f"broker {b} registered anew at {at} UTC (its ZooKeeper session expired)")
    elected = now["controller_epoch"] - before["controller_epoch"]
    if elected:
        out.append(f"{elected} controller election(s) (controller epoch {before['controller_epoch']} -> "
                   f"{now['controller_epoch']})")
    return out


def wait_settled(sb, bootstrap: str, timeout: float = 180) -> dict:
    """Until the cluster is as a scenario that injects no broker fault needs it: every broker
    registered, a controller elected, every partition fully replicated, and no broker session
    expiring meanwhile (two reads of :func:`cluster_epochs` 2 s apart agree, a ZooKeeper tick
    of the sandbox). Returns those epochs: the baseline for :func:`unplanned_faults`."""
    seen: list[dict] = []

    def settled() -> bool:
        if sb.registered_brokers() != set(sb.broker_ids) or sb.controller_id() is None:
            return False
        if not fully_replicated(bootstrap):
            return False
        e = cluster_epochs(sb)
        stable = bool(seen) and seen[-1] == e
        seen.append(e)
        return stable

    try:
        wait_for(settled, timeout, 2.0, "every broker registered, a controller, every partition fully replicated")
    except AssertionError as err:
        raise AssertionError(f"{err}\n{replication_report(bootstrap)}") from None
    return seen[-1]


class FaultWatch:
    """``with FaultWatch(sb, bootstrap) as watch: ...; watch.settle(); ...`` around a scenario that
    injects no broker or ZooKeeper fault of its own. :meth:`settle` waits until the cluster is
    settled (:func:`wait_settled`) and keeps that baseline; when the scenario then fails, the
    failure names the faults nobody injected (:func:`unplanned_faults`: a broker whose ZooKeeper
    session expired on a loaded machine, a controller failover) ahead of the original error, so
    a kops exit code measured on a cluster without a controller is not taken for kops' doing."""

    def __init__(self, sb, bootstrap: str):
        self.sb, self.bootstrap = sb, bootstrap
        self.baseline: dict | None = None

    def settle(self) -> dict:
        self.baseline = wait_settled(self.sb, self.bootstrap)
        return self.baseline

    def faults(self) -> list[str]:
        """The unplanned faults since :meth:`settle` (none before it)."""
        return unplanned_faults(self.sb, self.baseline) if self.baseline is not None else []

    def __enter__(self) -> FaultWatch:
        return self

    def __exit__(self, et, e, tb) -> bool:
        if not isinstance(e, Exception) or self.baseline is None:
            return False
        try:
            extra = self.faults()
        except Exception:  # noqa: BLE001 - ZooKeeper not answering: the original error stands
            return False
        if extra:
            raise AssertionError(
                "the cluster had faults this scenario did not inject: " + "; ".join(extra)
                + f"; what failed then (not a verdict on kops): {type(e).__name__}: {str(e)[-3000:]}") from e
        return False
