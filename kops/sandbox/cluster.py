"""A real local multi-rack Kafka cluster: ZooKeeper + N brokers (Kafka 2.8 - 3.9, default 3.9) or
a KRaft controller quorum + N brokers (Kafka 3.7 and later), on 127.0.0.1, as JVM processes or
containers.

A :class:`Sandbox` is made of three parts, each in its own module:

- its state (:class:`kops.sandbox.state.SandboxState`): configuration, processes and cluster id,
  kept in ``<workdir>/sandbox.json`` so that separate processes (``kops sandbox up`` then ``kops
  sandbox stop --broker 1``) act on the same cluster; changes go under ``<workdir>/.sandbox.lock``;
- its node engine (:mod:`kops.sandbox.hosts`): where the nodes run — local JVMs
  (:class:`~kops.sandbox.hosts.LocalNodes`) or containers
  (:class:`~kops.sandbox.containers.ContainerNodes`, with network faults and small data disks);
- its metadata mode (:mod:`kops.sandbox.modes`): what the cluster is made of — ZooKeeper
  (:class:`~kops.sandbox.modes.ZooKeeperMode`) or a KRaft quorum
  (:class:`~kops.sandbox.kraft.KraftMode`).

This class brings them together: up, down and status; stop, start, add and remove brokers. Open
the sandbox a work directory holds with :func:`kops.sandbox.opening.attach`.

Work directory layout::

    sandbox.json                  state (see Sandbox.to_dict)
    config/                       zookeeper.properties, broker-<id>.properties, log4j.properties
    zookeeper/{data,logs,console.out}
    broker-<id>/data/             log.dirs of the broker (--log-dirs N: also data-1 ... data-<N-1>)
    broker-<id>/logs/             server.log, state-change.log, controller.log, ... (log4j)
    broker-<id>/console.out       JVM stdout/stderr (WARN and above, crashes)
    controller-<id>/...           KRaft controllers (mode="kraft")
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kops.errors import BadInput, ClusterError
from kops.sandbox import procs
from kops.sandbox.config import SandboxConfig
from kops.sandbox.configs import write_node_configs
from kops.sandbox.deadline import Deadline
from kops.sandbox.faults import SandboxFaults
from kops.sandbox.hosts import LocalNodes, Nodes
from kops.sandbox.modes import MetadataMode, ZooKeeperMode
from kops.sandbox.nodes import Log, NodeStatus, describe_diff, nolog
from kops.sandbox.readiness import failure_details
from kops.sandbox.state import Node, SandboxState


def nodes_of(state: SandboxState, log: Log) -> Nodes:
    """The node engine the sandbox's configuration names."""
    if state.config.engine == "docker":
        from kops.sandbox.containers import ContainerNodes

        return ContainerNodes(state, log)
    return LocalNodes(state, log)


def mode_of(state: SandboxState, nodes: Nodes, log: Log) -> MetadataMode:
    """The metadata mode the sandbox's configuration names."""
    if state.config.mode == "kraft":
        from kops.sandbox.kraft import KraftMode

        return KraftMode(state, nodes, log)
    if state.config.migration == "migrating":
        from kops.sandbox.migration import MigrationMode

        return MigrationMode(state, nodes, log)
    return ZooKeeperMode(state, nodes, log)


class Sandbox:
    """A local Kafka cluster in one work directory (see the module doc).

    >>> sb = Sandbox(SandboxConfig(workdir="/tmp/kops-sb")).up()   # doctest: +SKIP
    >>> sb.bootstrap_servers                                       # doctest: +SKIP
    '127.0.0.1:9092,127.0.0.1:9093,...'
    >>> sb.stop(rack="b"); sb.start(rack="b"); sb.down()           # doctest: +SKIP
    """

    def __init__(self, config: SandboxConfig | None = None, *, log: Log | None = None, **overrides: Any):
        cfg = config or SandboxConfig()
        if overrides:
            cfg = cfg.with_(**overrides)
        self.log: Log = log or nolog
        self.state = SandboxState(cfg.validate())
        self.nodes = nodes_of(self.state, self.log)
        self._meta_of = (self.config.mode, self.config.migration)
        self._meta = mode_of(self.state, self.nodes, self.log)

    @property
    def meta(self) -> MetadataMode:
        """The metadata mode the configuration names now (a ZooKeeper -> KRaft migration changes
        it: :mod:`kops.sandbox.migration`)."""
        now = (self.config.mode, self.config.migration)
        if now != self._meta_of:
            self._meta_of, self._meta = now, mode_of(self.state, self.nodes, self.log)
        return self._meta

    # -- plain properties ------------------------------------------------------------------------
    @property
    def config(self) -> SandboxConfig:
        return self.state.config

    @config.setter
    def config(self, config: SandboxConfig) -> None:
        self.state.config = config

    @property
    def workdir(self) -> Path:
        return self.config.workdir  # type: ignore[return-value]

    @property
    def mode(self) -> str:
        return self.config.mode

    @property
    def kafka_version(self) -> str:
        return self.config.kafka_version  # type: ignore[return-value]

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:p1,127.0.0.1:p2,...`` (every broker)."""
        return self.config.bootstrap_servers

    @property
    def zookeeper_connect(self) -> str | None:
        """``127.0.0.1:<port>[/chroot]``; None in KRaft mode."""
        return self.config.zookeeper_connect

    @property
    def broker_ids(self) -> list[int]:
        return self.config.broker_ids

    @property
    def controller_ids(self) -> list[int]:
        return self.config.controller_ids

    @property
    def racks(self) -> dict[int, str]:
        """Broker id -> rack."""
        return self.config.rack_map

    @property
    def cluster_id(self) -> str | None:
        """KRaft cluster id (None in ZooKeeper mode)."""
        return self.state.cluster_id

    @property
    def started_now(self) -> list[str]:
        """The nodes the last ``up``/``start``/``add`` launched."""
        return self.state.started_now

    def rack_of(self, broker_id: int) -> str:
        self.state.check_broker(broker_id)
        return self.racks[broker_id]

    def brokers_in_rack(self, rack: str) -> list[int]:
        ids = [b for b, r in self.racks.items() if r == rack]
        if not ids:
            raise BadInput(f"no rack {rack!r} in the sandbox; racks: {sorted(set(self.racks.values()))}")
        return sorted(ids)

    def broker_port(self, broker_id: int) -> int:
        self.state.check_broker(broker_id)
        return self.config.broker_port(broker_id)

    def broker_address(self, broker_id: int) -> str:
        return f"{self.config.host}:{self.broker_port(broker_id)}"

    def broker_log_dir(self, broker_id: int) -> Path:
        """Directory of the broker's log4j files: server.log, state-change.log, controller.log."""
        self.state.check_broker(broker_id)
        return self.config.log_dir(broker_id)

    def broker_data_dir(self, broker_id: int) -> Path:
        """The broker's (first) log dir (partition data)."""
        self.state.check_broker(broker_id)
        return self.config.data_dir(broker_id)

    def broker_data_dirs(self, broker_id: int) -> list[Path]:
        """Every log dir of the broker, in ``log.dirs`` order (``--log-dirs N``: N of them)."""
        self.state.check_broker(broker_id)
        return self.config.data_dirs(broker_id)

    def _failed_log_dirs(self, broker_id: int) -> list[str]:
        from kops.sandbox import logdirs

        return [str(d) for d in self.config.data_dirs(broker_id) if logdirs.is_failed(d)]

    def broker_properties_file(self, broker_id: int) -> Path:
        self.state.check_broker(broker_id)
        return self.config.properties_file(broker_id)

    def failure_details(self, node: Node) -> list[str]:
        """The first error of the node's last run and the tails of its logs."""
        return failure_details(self.config, node)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (what ``kops sandbox up --output json`` prints)."""
        cfg = self.config
        return {
            "mode": self.mode,
            "kafka_version": self.kafka_version,
            "workdir": str(self.workdir),
            "bootstrap_servers": self.bootstrap_servers,
            "zookeeper_connect": self.zookeeper_connect,
            "cluster_id": self.cluster_id,
            "security": cfg.security,
            **({"security_files": self.security_files.client_files()} if cfg.secured else {}),
            "brokers": [
                {"id": b, "rack": self.racks[b], "address": self.broker_address(b),
                 "log_dir": str(cfg.log_dir(b)), "data_dir": str(cfg.data_dir(b)),
                 "data_dirs": [str(d) for d in cfg.data_dirs(b)],
                 **({"failed_log_dirs": failed} if (failed := self._failed_log_dirs(b)) else {}),
                 **({"phase": cfg.broker_phase(b)} if cfg.in_migration else {}),
                 "kafka_version": cfg.version_of(b)}
                for b in self.broker_ids
            ],
            **({"migration": cfg.migration} if cfg.migration else {}),
            "controllers": [{"id": c, "address": f"{cfg.host}:{cfg.controller_port(c)}",
                             "kafka_version": cfg.version_of(c)} for c in self.controller_ids],
            **self.nodes.describe(),
        }

    # -- security (kops.sandbox.security) ------------------------------------------------------
    @property
    def security(self) -> str:
        """none | sasl_plaintext | sasl_ssl."""
        return self.config.security

    @property
    def security_files(self):
        """Paths of the secured sandbox's files (client properties, CA, ZooKeeper credentials)."""
        return self.config.security_files

    @property
    def admin_config(self) -> Path | None:
        """Client properties of the super user (``--command-config``); None when not secured."""
        return self.security_files.admin_properties if self.config.secured else None

    @property
    def user_config(self) -> Path | None:
        """Client properties of the unprivileged user; None when not secured."""
        return self.security_files.user_properties if self.config.secured else None

    @property
    def zookeeper_auth_file(self) -> Path | None:
        """ZooKeeper credentials (``--zookeeper-auth-file``); None when not secured."""
        return self.security_files.zookeeper_auth if self.config.secured else None

    def client_config(self):
        """The admin user's client settings (:class:`kops.cluster.config.ClientConfig`; empty
        when not secured)."""
        return self.meta.client_config()

    # -- up / down -------------------------------------------------------------------------------
    def is_running(self) -> bool:
        """Every process of the sandbox runs (does not check registrations)."""
        return all(self.nodes.running(n) for n in self.state.nodes())

    def any_running(self) -> bool:
        return any(self.nodes.running(n) for n in self.state.recorded_nodes())

    def up(self, *, timeout_s: float | None = None) -> Sandbox:
        """Start whatever is not running and wait until every broker is registered and a
        controller is elected. Idempotent: on a running sandbox it only checks readiness."""
        st = self.state
        timeout_s = timeout_s or self.config.start_timeout_s
        st.started_now = []
        with st.lock():
            st.load()
            self._check_compatible()
            if self.is_running() and st.recorded:
                self.log(f"sandbox already running in {self.workdir}")
            missing = [n for n in st.nodes() if not self.nodes.running(n)]
            busy = [f"{st.key(n)} port {st.port_of(n)}" for n in missing
                    if procs.port_in_use(self.config.host, st.port_of(n))]
            if busy:
                raise ClusterError(
                    "ports in use by another process (another sandbox? pick other ports with "
                    "--zookeeper-port/--base-port or stop it): " + ", ".join(busy)
                )
            if missing:
                self.nodes.prepare()
                self._write_configs()
            deadline = Deadline(self.config.log_dir, timeout_s)
            try:
                t0 = time.monotonic()
                self.meta.start_base(missing, deadline)
                brokers = [n for n in missing if n in self.broker_ids]
                if brokers:
                    self.log(f"starting brokers {brokers} (racks {', '.join(f'{b}={self.racks[b]}' for b in brokers)})")
                for b in brokers:
                    self.nodes.launch(b)
                self.meta.wait_registered(self.broker_ids, deadline, since=st.launched_ms(brokers))  # type: ignore[arg-type]
                self.log(f"sandbox ready in {time.monotonic() - t0:.1f}s: {self.bootstrap_servers}")
            except BaseException:
                self._stop_started_now()
                raise
            st.save()
        return self

    def _stop_started_now(self) -> None:
        """After a failed up()/add(): stop the processes this call launched (logs stay on disk)."""
        self.nodes.discard(list(self.state.started_now))
        try:
            self.state.save()
        except OSError:
            pass

    def _check_compatible(self) -> None:
        rec = self.state.recorded
        if not rec:
            return
        old = SandboxConfig.from_dict({**rec["config"], "workdir": str(self.workdir)})
        keys = ("mode", "kafka_version", "brokers", "first_broker_id", "zookeeper_port", "zk_chroot", "controllers",
                "security", "engine", "log_dirs")
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
        data_kept = any(self.config.data_dir(n).exists() for n in ["zookeeper", *old.broker_ids, *old.controller_ids])
        refused = self.meta.refused_change(set(diff), data_kept)
        if refused:
            raise BadInput(refused)

    def _write_configs(self) -> None:
        write_node_configs(self.state, self.nodes, self.meta)

    def down(self, *, purge: bool = False, timeout_s: float | None = None) -> list[str]:
        """Stop every process this sandbox started (brokers first, then ZooKeeper/controllers):
        SIGTERM, SIGKILL after ``timeout_s``; then whatever the engine made besides them
        (containers, their network). ``purge`` also deletes the work dir's sandbox files.
        Returns the names of the processes that were stopped."""
        st = self.state
        timeout_s = timeout_s or self.config.stop_timeout_s
        stopped: list[str] = []
        with st.lock():
            st.load()
            try:
                recorded = st.recorded_nodes()
                brokers = [n for n in recorded if n != "zookeeper" and n not in self.controller_ids]
                others = [n for n in recorded if n == "zookeeper" or n in self.controller_ids]
                t_end = time.monotonic() + timeout_s
                for group in (brokers, others):
                    running = [n for n in group if self.nodes.running(n)]
                    if running:
                        self.log(f"stopping {', '.join(st.key(n) for n in running)}")
                    batches = self.meta.shutdown_batches(running) if group is brokers else [running]  # type: ignore[arg-type]
                    for batch in batches:
                        self.nodes.signal_and_wait(batch, 15, t_end, timeout_s)
                    stopped.extend(st.key(n) for n in running)
                    for n in group:
                        st.procs.pop(st.key(n), None)
            finally:  # whatever failed above, nothing of the engine's stays (containers, network, mounts)
                self.nodes.cleanup()
                if purge:
                    st.purge()
                    self.log(f"deleted the sandbox's files in {self.workdir}")
                else:
                    st.save()
        return stopped

    # -- status ----------------------------------------------------------------------------------
    def registered_brokers(self) -> set[int]:
        """Broker ids registered now (ZK /brokers/ids, or KRaft cluster metadata); empty when the
        cluster does not answer."""
        return self.meta.registrations()[0]

    def controller_id(self) -> int | None:
        """The active controller: the broker id in /controller (ZooKeeper mode); None in KRaft mode
        (brokers do not name it: :meth:`active_controller`)."""
        return self.meta.registrations()[1]

    def active_controller(self) -> int | None:
        """ZooKeeper mode: the controller broker; KRaft: the leader of the metadata quorum
        (DescribeMetadataQuorum through the brokers)."""
        if self.mode == "zookeeper":
            return self.controller_id()
        from kops.cluster.connection import Connection
        from kops.cluster.topology import kraft_controller

        conn = Connection.from_options(bootstrap_server=self.bootstrap_servers, command_config=None, zookeeper=None,
                                       timeout_s=10.0)
        try:
            return kraft_controller(conn)
        finally:
            conn.close()

    def status(self) -> list[NodeStatus]:
        """ZooKeeper (or KRaft controllers) and every broker: pid, running, registered, alive."""
        st = self.state
        st.load()
        regs, ctrl = self.meta.registrations()
        out: list[NodeStatus] = []
        for n in st.nodes():
            running = self.nodes.running(n)
            pid = self.nodes.pid(n) if running else None
            if n == "zookeeper":
                out.append(NodeStatus(st.key(n), "zookeeper", None, None, st.port_of(n), pid, running, None, running))
            elif n in self.controller_ids:
                out.append(NodeStatus(st.key(n), "controller", int(n), None, st.port_of(n), pid, running, None, running,
                                      controller=(ctrl == n)))
            else:
                b = int(n)
                reg = b in regs
                out.append(NodeStatus(st.key(n), "broker", b, self.racks[b], st.port_of(b), pid, running, reg,
                                      running and reg, controller=(self.meta.controller_is_a_broker and ctrl == b)))
        return out

    def alive_brokers(self) -> list[int]:
        return [s.id for s in self.status() if s.role == "broker" and s.alive]  # type: ignore[misc]

    # -- stop / start ----------------------------------------------------------------------------
    def select(self, broker: int | None, rack: str | None, brokers: Iterable[int] | None = None) -> list[int]:
        """The brokers one verb acts on: exactly one of a broker, a rack or a list of brokers."""
        given = sum(x is not None for x in (broker, rack, brokers))
        if given != 1:
            raise BadInput("name exactly one of: a broker (--broker ID), a rack (--rack R) or a list of brokers")
        if broker is not None:
            self.state.check_broker(int(broker))
            return [int(broker)]
        if rack is not None:
            return self.brokers_in_rack(rack)
        ids = sorted({int(b) for b in brokers})  # type: ignore[union-attr]
        for b in ids:
            self.state.check_broker(b)
        return ids

    def stop(self, broker: int | None = None, *, rack: str | None = None, brokers: Iterable[int] | None = None,
             kill: bool = False, wait: bool = True, timeout_s: float | None = None) -> list[int]:
        """Stop one broker, a whole rack or a list of brokers.

        Graceful (default): SIGTERM, Kafka's controlled shutdown moves leadership away; waits
        until the process exits (SIGKILL after ``timeout_s``) and, with ``wait``, until the
        broker is gone from /brokers/ids (KRaft: from the cluster metadata) and the remaining
        brokers see it gone. ``kill=True``: SIGKILL (a crash; the registration goes away when
        the ZooKeeper session expires, ~18 s). Returns the brokers that were running and stopped.
        """
        timeout_s = timeout_s or self.config.stop_timeout_s
        with self.state.lock():
            self.state.load()
            ids = self.select(broker, rack, brokers)
            return self._stop_locked(ids, kill=kill, wait=wait, timeout_s=timeout_s)

    def _stop_locked(self, ids: list[int], *, kill: bool, wait: bool, timeout_s: float) -> list[int]:
        running = [b for b in ids if self.nodes.running(b)]
        if not running:
            self.log(f"brokers {ids} are not running")
            return []
        how = "killing (SIGKILL)" if kill else "stopping (controlled shutdown)"
        self.log(f"{how} brokers {running}")
        t_end = time.monotonic() + timeout_s
        for batch in ([running] if kill else self.meta.shutdown_batches(running)):
            self.nodes.signal_and_wait(batch, 9 if kill else 15, t_end, timeout_s)  # type: ignore[arg-type]
        if wait:
            self.meta.wait_deregistered(set(running), Deadline(self.config.log_dir, max(30.0, timeout_s)))
        return running

    def start(self, broker: int | None = None, *, rack: str | None = None, brokers: Iterable[int] | None = None,
              timeout_s: float | None = None) -> list[int]:
        """(Re)start stopped brokers with their config and data; wait until they are registered.
        Brokers already running are left alone. Returns the brokers that were started."""
        st = self.state
        timeout_s = timeout_s or self.config.start_timeout_s
        st.started_now = []
        with st.lock():
            st.load()
            ids = self.select(broker, rack, brokers)
            self.meta.require_running()
            todo = [b for b in ids if not self.nodes.running(b)]
            if not todo:
                self.log(f"brokers {ids} are already running")
                return []
            busy = [f"broker {b} port {self.broker_port(b)}" for b in todo
                    if procs.port_in_use(self.config.host, self.broker_port(b))]
            if busy:
                raise ClusterError("ports in use by another process: " + ", ".join(busy))
            self.nodes.prepare()
            self.log(f"starting brokers {todo}")
            for b in todo:
                self.nodes.launch(b)
            self.meta.wait_registered(todo, Deadline(self.config.log_dir, timeout_s), since=st.launched_ms(todo))
        return todo

    @property
    def migration(self):
        """The ZooKeeper -> KRaft migration verbs (:class:`kops.sandbox.migration.SandboxMigration`):
        start the controllers, read the migration's state, finalize, roll back."""
        from kops.sandbox.migration import SandboxMigration

        return SandboxMigration(self)

    @property
    def quorum(self):
        """The dynamic KRaft quorum's verbs (:class:`kops.sandbox.quorum.SandboxQuorum`): a
        controller added as an observer, one taken out for good."""
        from kops.sandbox.quorum import SandboxQuorum

        return SandboxQuorum(self)

    @property
    def upgrade(self):
        """The rolling-upgrade verbs (:class:`kops.sandbox.upgrade.SandboxUpgrade`): a broker or the
        KRaft controllers restarted on another Kafka version's jars."""
        from kops.sandbox.upgrade import SandboxUpgrade

        return SandboxUpgrade(self)

    # -- grow / shrink ---------------------------------------------------------------------------
    def add(self, broker_id: int, rack: str, *, port: int | None = None, timeout_s: float | None = None) -> int:
        """Grow the running sandbox by a new broker id in ``rack``: its config is written like
        the others', it is started and waited for exactly as :meth:`start` does (registered,
        start-up finished, in every broker's metadata), and it is recorded in the state file so
        later ``stop/start/status/down`` and :meth:`attach` know it. ``port``: default the first
        free port above the sandbox's ports. An id removed earlier without ``purge`` comes back
        with its data. If the broker does not come up it is stopped and forgotten again (its logs
        stay) and ClusterError is raised. Returns the broker's port.

        BadInput (nothing changed) for an id in use, a malformed rack or one of another shape
        than the others', or a port that is the sandbox's or taken on this machine."""
        st = self.state
        timeout_s = timeout_s or self.config.start_timeout_s
        st.started_now = []
        with st.lock():
            st.load()
            host = self.config.host
            if port is None:
                port = self.config.next_free_port(lambda p: procs.port_in_use(host, p))
            new_cfg = self.config.with_broker_added(broker_id, rack, port)
            if procs.port_in_use(host, port):
                raise BadInput(f"--port {port} is in use by another process on {host}; pick another port")
            self.meta.require_running()
            if not st.recorded:
                raise ClusterError(f"no sandbox in {self.workdir}; run `kops sandbox up` first")
            old_cfg = self.config
            kept = self.config.data_dir(broker_id).exists()
            self.config = new_cfg
            try:
                self.nodes.prepare()
                self._write_configs()
                self.meta.prepare_broker(broker_id)
                st.save()
                self.log(f"adding broker {broker_id} (rack {new_cfg.rack_map[broker_id]}, port {port})"
                         + (" with the data it had" if kept else ""))
                self.nodes.launch(broker_id)
                self.meta.wait_registered([broker_id], Deadline(self.config.log_dir, timeout_s),
                                         since=st.launched_ms([broker_id]))
            except BaseException:
                self._stop_started_now()
                self.config = old_cfg
                st.save()
                raise
        return port

    def remove(self, broker_id: int, *, purge: bool = False, kill: bool = False,
               timeout_s: float | None = None) -> bool:
        """Take a broker out of the sandbox for good: stop it if it runs (controlled shutdown, or
        SIGKILL with ``kill``; waits until it left the cluster) and forget it in the state file,
        so ``start``, ``up`` and ``status`` no longer know it. Its data and logs stay in the work
        dir (``add`` of the same id brings them back) unless ``purge``. The cluster's metadata
        still assigns it its replicas: moving them is kops' work (replace-broker /
        decommission-broker playbooks). Returns whether the broker was running."""
        st = self.state
        timeout_s = timeout_s or self.config.stop_timeout_s
        with st.lock():
            st.load()
            new_cfg = self.config.with_broker_removed(broker_id)
            was_running = bool(self._stop_locked([broker_id], kill=kill, wait=True, timeout_s=timeout_s))
            st.procs.pop(st.key(broker_id), None)
            props = self.config.properties_file(broker_id)
            node_dir = self.config.node_dir(broker_id)
            self.config = new_cfg
            st.save()
            if purge:
                shutil.rmtree(node_dir, ignore_errors=True)
                props.unlink(missing_ok=True)
            self.log(f"broker {broker_id} removed from the sandbox"
                     + ("; its data and logs deleted" if purge else f"; its data and logs stay in {node_dir}"))
        return was_running

    # -- what only containers can do (engine docker) -----------------------------------------------
    @property
    def containers(self):
        """The containerised node engine (:class:`kops.sandbox.containers.ContainerNodes`): its
        names, network, faults and data disks. BadInput for a sandbox of local JVMs."""
        if self.nodes.kind != "docker":
            raise BadInput(f"the sandbox in {self.workdir} runs local JVMs: network faults, small data disks and "
                           "stopping ZooKeeper or a controller on its own need `kops sandbox up --engine docker`")
        return self.nodes

    @property
    def faults(self) -> SandboxFaults:
        """The fault verbs (:class:`kops.sandbox.faults.SandboxFaults`): cut brokers or a rack off,
        slow them, fill a data disk, stop ZooKeeper or a controller on its own (engine docker);
        fail a log dir of a JBOD broker (both engines)."""
        from kops.sandbox.logdirs import LogDirFaults

        return SandboxFaults(self.select, lambda: self.containers, self.mode, lambda: LogDirFaults(self))

    # -- context manager -------------------------------------------------------------------------
    def __enter__(self) -> Sandbox:
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down()

    def __repr__(self) -> str:
        return (f"Sandbox(mode={self.mode!r}, engine={self.nodes.kind!r}, workdir={str(self.workdir)!r}, "
                f"bootstrap={self.bootstrap_servers!r})")


__all__ = ["Sandbox", "mode_of", "nodes_of"]
