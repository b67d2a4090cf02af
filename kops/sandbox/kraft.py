"""KRaft mode (Kafka 4.x): format storage, start the controller quorum and the brokers, and
readiness through the Admin API (no ZooKeeper). Called by :class:`kops.sandbox.cluster.Sandbox`."""

from __future__ import annotations

import base64
import subprocess
import time
import uuid
from typing import TYPE_CHECKING

from kops.errors import ClusterError
from kops.sandbox import dist

if TYPE_CHECKING:
    from kops.sandbox.cluster import Sandbox


def new_cluster_id() -> str:
    """A Kafka cluster id: base64url (no padding) of a random UUID, as ``kafka-storage.sh
    random-uuid`` prints it (never starting with '-')."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def _write_broker_meta(sb: Sandbox, broker_id: int) -> None:
    """A broker-only node's ``meta.properties`` exactly as ``kafka-storage.sh format`` writes it
    (v1: node.id, directory.id, cluster.id). Brokers take the metadata version from the
    controllers' log, so they need no bootstrap checkpoint; writing this file saves one JVM
    start per broker on small machines."""
    d = sb.config.data_dir(broker_id)
    d.mkdir(parents=True, exist_ok=True)
    text = (
        "#\n#" + time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime()) + "\n"
        f"node.id={broker_id}\ndirectory.id={new_cluster_id()}\nversion=1\ncluster.id={sb._cluster_id}\n"
    )
    tmp = d / "meta.properties.tmp"
    tmp.write_text(text)
    tmp.replace(d / "meta.properties")


def _format(sb: Sandbox, nodes: list[int], deadline: float) -> None:
    """``kafka-storage.sh format -t <cluster id> -c <props>`` on every controller lacking
    meta.properties (in parallel JVMs); brokers get their meta.properties written directly."""
    cfg = sb.config
    todo = [n for n in nodes if not (cfg.data_dir(n) / "meta.properties").exists()]
    for b in [n for n in todo if n in cfg.broker_ids]:
        _write_broker_meta(sb, b)
    todo = [n for n in todo if n not in cfg.broker_ids]
    if not todo:
        return
    sb.log(f"formatting storage of {', '.join(map(str, todo))} (cluster id {sb._cluster_id})")
    running: list[tuple[int, subprocess.Popen]] = []
    for n in todo:
        cfg.data_dir(n).mkdir(parents=True, exist_ok=True)
        cmd = dist.java_command(
            dist.STORAGE_TOOL,
            ["format", "-t", sb._cluster_id or "", "-c", str(cfg.properties_file(n)), "--ignore-formatted"],
            version=sb.kafka_version,
        )
        running.append((n, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
    failed: list[str] = []
    for n, p in running:
        try:
            out, _ = p.communicate(timeout=max(5.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            failed.append(f"node {n}: format timed out")
            continue
        if p.returncode != 0:
            failed.append(f"node {n}: exit {p.returncode}: " + " | ".join(out.strip().splitlines()[-5:]))
    if failed:
        raise ClusterError("formatting the KRaft storage failed", details=failed)


def up(sb: Sandbox, missing: list, cp: str, deadline: float) -> None:
    cfg = sb.config
    t0 = time.monotonic()
    if sb._cluster_id is None:
        sb._cluster_id = new_cluster_id()
        sb._save_state()
    if missing:
        _format(sb, [*cfg.controller_ids, *cfg.broker_ids], deadline)
    ctrls = [n for n in missing if n in cfg.controller_ids]
    if ctrls:
        sb.log(f"starting KRaft controllers {ctrls} ({cfg.quorum_voters})")
    for c in ctrls:
        sb._spawn(c, cp)
    brokers = [n for n in missing if n in cfg.broker_ids]
    if brokers:
        sb.log(f"starting brokers {brokers} (racks {', '.join(f'{b}={sb.racks[b]}' for b in brokers)})")
    for b in brokers:
        sb._spawn(b, cp)
    since = {b: sb._procs[f"broker-{b}"]["launched_ms"] for b in brokers}
    wait_brokers(sb, set(cfg.broker_ids), set(), deadline, since=since)
    sb.log(f"sandbox ready in {time.monotonic() - t0:.1f}s: {sb.bootstrap_servers}")


def registered(sb: Sandbox) -> tuple[set[int], int | None]:
    """(unfenced brokers in the cluster metadata, None): KRaft has no broker-visible controller
    id (DescribeCluster names a random broker), so the controller is reported as unknown."""
    from kops.sandbox import probe

    live = [b for b in sb.broker_ids if sb._running(b)]
    if not live:
        return set(), None
    try:
        ids, _ = probe.kafka_cluster(",".join(sb.broker_address(b) for b in live), timeout_s=5.0)
    except Exception:  # noqa: BLE001 - the cluster does not answer
        return set(), None
    return ids, None


def wait_brokers(sb: Sandbox, present: set[int], absent: set[int], deadline: float,
                 *, since: dict[int, int] | None = None) -> None:
    """Wait until ``present`` are in the cluster metadata (and, those launched now, finished
    start-up) and ``absent`` are not; fail early when a process of ``present`` exits."""
    from kops.sandbox import probe

    since = since or {}
    last: object = None
    while True:
        for c in sb.controller_ids:
            if not sb._running(c) and f"controller-{c}" in sb.started_now:
                raise ClusterError(f"KRaft controller {c} exited during start-up", details=sb._failure_details(c))
        live = [b for b in sb.broker_ids if b not in absent and sb._running(b)]
        ids: set[int] = set()
        if live:
            try:
                ids, _ = probe.kafka_cluster(",".join(sb.broker_address(b) for b in live),
                                             timeout_s=max(1.0, min(5.0, deadline - time.monotonic())))
                last = sorted(ids)
            except Exception as e:  # noqa: BLE001
                last = f"{type(e).__name__}: {e}"
        started = all(sb._startup_complete(b) for b in since if b in present)
        if present <= ids and not (absent & ids) and started:
            return
        for b in sorted(present - ids):
            if not sb._running(b):
                raise ClusterError(
                    f"broker {b} (rack {sb.racks[b]}, port {sb.broker_port(b)}) exited before it joined the cluster",
                    details=sb._failure_details(b),
                )
        if time.monotonic() > deadline:
            late = sorted(present - ids) or sorted(absent & ids) or sorted(since)
            b = late[0]
            raise ClusterError(
                f"KRaft cluster not ready in time: want brokers {sorted(present)} in the metadata and "
                f"{sorted(absent)} gone; last seen {last} (broker {b} log: {sb.broker_log_dir(b)}/server.log)",
                details=sb._failure_details(b),
            )
        time.sleep(0.3)


__all__ = ["new_cluster_id", "registered", "up", "wait_brokers"]
