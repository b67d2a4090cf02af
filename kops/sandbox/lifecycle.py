"""Bringing a sandbox up and down, waiting for its nodes, and its status."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kops.errors import BadInput, ClusterError
from kops.sandbox import dist, procs
from kops.sandbox.config import SandboxConfig
from kops.sandbox.nodes import NodeStatus, describe_diff, log_time, node_key

if TYPE_CHECKING:
    from kops.sandbox.cluster import Sandbox


class Lifecycle:
    """``up``, ``down`` and ``status`` of a sandbox (a part of :class:`kops.sandbox.cluster.Sandbox`)."""

    # -- up / down -------------------------------------------------------------------------------
    def is_running(self) -> bool:
        """Every process of the sandbox runs (does not check registrations)."""
        return all(self._running(n) for n in self._nodes())

    def any_running(self) -> bool:
        return any(self._running(n) for n in self._nodes_recorded())

    def _nodes_recorded(self) -> list[str | int]:
        out: list[str | int] = []
        for key in self._procs:
            role, _, ident = key.partition("-")
            out.append("zookeeper" if key == "zookeeper" else int(ident))
        return out

    def up(self, *, timeout_s: float | None = None) -> Sandbox:
        """Start whatever is not running and wait until every broker is registered and a
        controller is elected. Idempotent: on a running sandbox it only checks readiness."""
        timeout_s = timeout_s or self.config.start_timeout_s
        self.started_now = []
        with self._lock():
            self._load_state()
            self._check_compatible()
            if self.is_running() and self._recorded:
                self.log(f"sandbox already running in {self.workdir}")
            missing = [n for n in self._nodes() if not self._running(n)]
            busy = [
                f"{node_key(n, self.config)} port {self._port_of(n)}"
                for n in missing
                if procs.port_in_use(self.config.host, self._port_of(n))
            ]
            if busy:
                raise ClusterError(
                    "ports in use by another process (another sandbox? pick other ports with "
                    "--zookeeper-port/--base-port or stop it): " + ", ".join(busy)
                )
            if missing:
                dist.ensure_kafka(self.kafka_version, log=self.log)
            cp = dist.kafka_classpath(self.kafka_version) if missing else ""
            if missing:
                self._write_configs()
            deadline = time.monotonic() + timeout_s
            try:
                if self.mode == "zookeeper":
                    self._up_zookeeper(missing, cp, deadline)
                else:
                    from kops.sandbox import kraft

                    kraft.up(self, missing, cp, deadline)
            except BaseException:
                self._stop_started_now()
                raise
            self._save_state()
        return self

    def _stop_started_now(self) -> None:
        """After a failed up(): stop the processes this call launched (logs stay on disk)."""
        nodes = [n for n in self._nodes() if node_key(n, self.config) in self.started_now]
        for n in nodes:
            pid = self._pid(n)
            if pid:
                procs.terminate([pid], marker=self._marker(n), timeout_s=5.0, kill=True)
            self._procs.pop(node_key(n, self.config), None)
        try:
            self._save_state()
        except OSError:
            pass

    def _check_compatible(self) -> None:
        rec = self._recorded
        if not rec:
            return
        old = SandboxConfig.from_dict({**rec["config"], "workdir": str(self.workdir)})
        keys = ("mode", "kafka_version", "brokers", "first_broker_id", "zookeeper_port", "zk_chroot", "controllers",
                "security", "engine")
        diff = [k for k in keys if getattr(old, k) != getattr(self.config, k)]
        if old.rack_map != self.config.rack_map:
            diff.append("racks")
        if old.all_ports() != self.config.all_ports():
            diff.append("ports")
        if not diff:
            return
        if self.any_running():
            raise BadInput(
                f"a sandbox with different settings ({', '.join(diff)}) is running in {self.workdir}; "
                "run `kops sandbox down` first or use another --workdir",
                details=[describe_diff(k, old, self.config) for k in diff],
            )
        data_kept = any(self.config.data_dir(n).exists() for n in (["zookeeper"] + old.broker_ids + old.controller_ids)
                        if n == "zookeeper" or isinstance(n, int))
        if data_kept and ({"mode", "kafka_version", "zk_chroot", "controllers", "security"} & set(diff)):
            raise BadInput(
                f"the stopped sandbox in {self.workdir} has data from {old.mode} mode / Kafka {old.kafka_version}; "
                "run `kops sandbox down --purge` to delete it first, or use another --workdir"
            )
        if self.mode == "kraft" and "brokers" in diff and data_kept:
            raise BadInput("changing the broker count of a stopped KRaft sandbox needs `kops sandbox down --purge` first")

    def _up_zookeeper(self, missing: list[str | int], cp: str, deadline: float) -> None:
        from kops.sandbox import probe

        cfg = self.config
        t0 = time.monotonic()
        if "zookeeper" in missing:
            self.log(f"starting ZooKeeper on {cfg.host}:{cfg.zookeeper_port}")
            self._spawn("zookeeper", cp)
        while not probe.zk_ruok(cfg.host, cfg.zookeeper_port):
            if not self._running("zookeeper"):
                raise ClusterError("ZooKeeper exited during start-up", details=self._failure_details("zookeeper"))
            if time.monotonic() > deadline:
                raise ClusterError("ZooKeeper did not come up in time", details=self._failure_details("zookeeper"))
            time.sleep(0.1)
        if cfg.secured:
            self._create_scram_users(deadline)
        brokers = [b for b in missing if b != "zookeeper"]
        if brokers:
            self.log(f"starting brokers {brokers} (racks {', '.join(f'{b}={self.racks[b]}' for b in brokers)})")
        for b in brokers:
            self._spawn(b, cp)
        self._wait_registered(self.broker_ids, deadline, since={b: self._procs[f"broker-{b}"]["launched_ms"] for b in brokers})
        self.log(f"sandbox ready in {time.monotonic() - t0:.1f}s: {self.bootstrap_servers}")

    def _create_scram_users(self, deadline: float) -> None:
        """SCRAM-SHA-512 credentials of admin and the unprivileged user, in ZooKeeper, before the
        brokers start (the brokers authenticate to each other as admin)."""
        from kops.sandbox import probe, security

        s = security.load_or_create_secrets(self.security_files)
        last: Exception | None = None
        while True:  # ZooKeeper answers ruok a little before it accepts SASL sessions
            try:
                with probe.zk_client(self.zookeeper_connect or "", timeout_s=10.0, sasl=self._zk_sasl()) as zk:
                    security.create_scram_users(zk, s)
                self.log(f"SCRAM-SHA-512 users {security.ADMIN_USER} (super user) and "
                         f"{security.UNPRIVILEGED_USER} are in ZooKeeper")
                return
            except ClusterError as e:
                last = e
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"could not create the SCRAM users in ZooKeeper ({last})", details=self._failure_details("zookeeper")
                )
            time.sleep(0.5)

    def _wait_registered(
        self, broker_ids: Iterable[int], deadline: float, *, since: dict[int, int] | None = None, controller: bool = True
    ) -> None:
        """Wait until ``broker_ids`` are registered (ZK: /brokers/ids with a registration newer
        than their launch; KRaft: in the cluster metadata) and a controller is elected; fail early
        when one of their processes exits."""
        if self.mode == "kraft":
            from kops.sandbox import kraft

            kraft.wait_brokers(self, set(broker_ids), set(), deadline)
            return
        from kops.sandbox import probe

        want = set(broker_ids)
        since = since or {}
        with probe.zk_client(self.zookeeper_connect or "", timeout_s=max(1.0, min(15.0, deadline - time.monotonic())),
                             sasl=self._zk_sasl()) as zk:
            while True:
                regs = probe.zk_registrations(zk)
                ok = {
                    b for b in want
                    if b in regs and regs[b].timestamp_ms >= since.get(b, 0) - 2000
                    and (b not in since or self._startup_complete(b))
                }
                ctrl = probe.zk_controller(zk) if controller else -1
                if ok == want and ctrl is not None and (not controller or ctrl in regs):
                    break
                for b in sorted(want - ok):
                    if not self._running(b):
                        raise ClusterError(
                            f"broker {b} (rack {self.racks[b]}, port {self.broker_port(b)}) exited before it "
                            "registered in ZooKeeper",
                            details=self._failure_details(b),
                        )
                if time.monotonic() > deadline:
                    late = sorted(want - ok)
                    if late:
                        b = late[0]
                        raise ClusterError(
                            f"broker(s) {late} did not register in ZooKeeper in time (broker {b}: rack "
                            f"{self.racks[b]}, port {self.broker_port(b)}, log {self.broker_log_dir(b)}/server.log)",
                            details=self._failure_details(b),
                        )
                    raise ClusterError("no controller was elected in time (/controller is empty)")
                time.sleep(0.2)
        self._wait_metadata(present=want, absent=set(), deadline=deadline)

    def _startup_complete(self, broker_id: int) -> bool:
        """The broker logged the end of its start-up since its last launch (``[KafkaServer id=N]
        started``; KRaft: ``[BrokerServer id=N] Transition from STARTING to STARTED``). Until
        then Kafka refuses a graceful shutdown (it halts instead), so start-up waits for it."""
        rec = self._procs.get(f"broker-{broker_id}") or {}
        launched = rec.get("launched_ms", 0) / 1000.0
        offset = int(rec.get("log_offset", 0))
        needle = (
            f"[KafkaServer id={broker_id}] started"
            if self.mode == "zookeeper"
            else f"[BrokerServer id={broker_id}] Transition from STARTING to STARTED"
        )
        log_dir = self.config.log_dir(broker_id)
        files = [log_dir / "server.log"]
        files += [p for p in log_dir.glob("server.log.*") if p.stat().st_mtime >= launched - 1]
        for f in files:
            try:
                with open(f, "rb") as fh:
                    size = fh.seek(0, os.SEEK_END)
                    fh.seek(offset if f.name == "server.log" and size >= offset else 0)
                    data = fh.read().decode(errors="replace")
            except FileNotFoundError:
                continue
            for line in data.splitlines():
                if needle in line and log_time(line) >= launched - 2:
                    return True
        return False

    def _wait_metadata(self, *, present: set[int], absent: set[int], deadline: float) -> None:
        """Wait until the brokers' metadata agrees (what clients will see next)."""
        from kops.sandbox import probe

        live = [b for b in self.broker_ids if b not in absent and self._running(b)]
        if not live:
            return
        bootstrap = ",".join(self.broker_address(b) for b in live)
        last: Any = None
        while True:
            try:
                ids, ctrl = probe.kafka_cluster(bootstrap, timeout_s=max(1.0, min(5.0, deadline - time.monotonic())),
                                                client_config=self.client_config())
                last = (sorted(ids), ctrl)
                if present <= ids and not (absent & ids) and ctrl is not None and ctrl not in absent:
                    return
            except Exception as e:  # noqa: BLE001 - client errors while brokers settle
                last = f"{type(e).__name__}: {e}"
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"the cluster metadata did not settle in time (want brokers {sorted(present)} present and "
                    f"{sorted(absent)} absent; last seen {last})"
                )
            time.sleep(0.2)

    def down(self, *, purge: bool = False, timeout_s: float | None = None) -> list[str]:
        """Stop every process this sandbox started (brokers first, then ZooKeeper/controllers):
        SIGTERM, SIGKILL after ``timeout_s``. ``purge`` also deletes the work dir's sandbox files.
        Returns the names of the processes that were stopped."""
        timeout_s = timeout_s or self.config.stop_timeout_s
        stopped: list[str] = []
        with self._lock():
            self._load_state()
            recorded = self._nodes_recorded()
            brokers = [n for n in recorded if n != "zookeeper" and n not in self.controller_ids]
            others = [n for n in recorded if n == "zookeeper" or n in self.controller_ids]
            t_end = time.monotonic() + timeout_s
            for group in (brokers, others):
                running = [n for n in group if self._running(n)]
                if running:
                    self.log(f"stopping {', '.join(node_key(n, self.config) for n in running)}")
                batches = self._shutdown_batches(running) if group is brokers and running else [running]  # type: ignore[arg-type]
                for batch in batches:
                    self._signal_and_wait(batch, 15, t_end, timeout_s)
                stopped.extend(node_key(n, self.config) for n in running)
                for n in group:
                    self._procs.pop(node_key(n, self.config), None)
            if purge:
                self._purge_files()
            else:
                self._save_state()
        return stopped

    def _purge_files(self) -> None:
        wd = self.workdir
        names = ["config", "zookeeper", "sandbox.json", "security"]
        names += [p.name for p in wd.glob("broker-*")] + [p.name for p in wd.glob("controller-*")]
        for name in names:
            p = wd / name
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            elif p.exists():
                p.unlink()
        self.log(f"deleted the sandbox's files in {wd}")
        self._procs = {}
        self._cluster_id = None

    # -- status ----------------------------------------------------------------------------------
    def registered_brokers(self) -> set[int]:
        """Broker ids registered now (ZK /brokers/ids, or KRaft cluster metadata); empty when the
        cluster does not answer."""
        if self.mode == "kraft":
            from kops.sandbox import kraft

            return kraft.registered(self)[0]
        from kops.sandbox import probe

        if not self._running("zookeeper"):
            return set()
        try:
            with probe.zk_client(self.zookeeper_connect or "", timeout_s=5.0, sasl=self._zk_sasl()) as zk:
                return set(probe.zk_registrations(zk))
        except ClusterError:
            return set()

    def controller_id(self) -> int | None:
        """The active controller: broker id in /controller (ZK mode), the KRaft quorum leader in
        KRaft mode; None when unknown."""
        if self.mode == "kraft":
            from kops.sandbox import kraft

            return kraft.registered(self)[1]
        from kops.sandbox import probe

        if not self._running("zookeeper"):
            return None
        try:
            with probe.zk_client(self.zookeeper_connect or "", timeout_s=5.0, sasl=self._zk_sasl()) as zk:
                return probe.zk_controller(zk)
        except ClusterError:
            return None

    def status(self) -> list[NodeStatus]:
        """ZooKeeper (or KRaft controllers) and every broker: pid, running, registered, alive."""
        self._load_state()
        regs: set[int] = set()
        ctrl: int | None = None
        if self.mode == "zookeeper":
            from kops.sandbox import probe

            if self._running("zookeeper"):
                try:
                    with probe.zk_client(self.zookeeper_connect or "", timeout_s=5.0, sasl=self._zk_sasl()) as zk:
                        regs = set(probe.zk_registrations(zk))
                        ctrl = probe.zk_controller(zk)
                except ClusterError:
                    pass
        else:
            from kops.sandbox import kraft

            if any(self._running(b) for b in self.broker_ids):
                regs, ctrl = kraft.registered(self)
        out: list[NodeStatus] = []
        for n in self._nodes():
            running = self._running(n)
            key = node_key(n, self.config)
            if n == "zookeeper":
                out.append(NodeStatus(key, "zookeeper", None, None, self._port_of(n), self._pid(n) if running else None,
                                      running, None, running))
            elif n in self.controller_ids:
                out.append(NodeStatus(key, "controller", int(n), None, self._port_of(n),
                                      self._pid(n) if running else None, running, None, running,
                                      controller=(ctrl == n)))
            else:
                b = int(n)
                reg = b in regs
                out.append(NodeStatus(key, "broker", b, self.racks[b], self._port_of(b),
                                      self._pid(b) if running else None, running, reg, running and reg,
                                      controller=(self.mode == "zookeeper" and ctrl == b)))
        return out

    def alive_brokers(self) -> list[int]:
        return [s.id for s in self.status() if s.role == "broker" and s.alive]  # type: ignore[misc]
