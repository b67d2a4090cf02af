"""What a sandbox's cluster is made of: its metadata mode, the other part a
:class:`kops.sandbox.cluster.Sandbox` holds besides its node engine (:mod:`kops.sandbox.hosts`).

:class:`MetadataMode` says what a mode does — the nodes the brokers need first and their
properties, starting them, waiting until brokers register or leave, who is registered and who
the controller is — and :class:`ZooKeeperMode` does it with one ZooKeeper (Kafka 2.8 - 3.9);
:class:`kops.sandbox.kraft.KraftMode` with a KRaft controller quorum (Kafka 3.7 and later). A
mode starts its nodes through the engine, so both run on local JVMs and in containers alike.
"""

from __future__ import annotations

import time
from typing import Any

from kops.errors import ClusterError
from kops.sandbox.deadline import Deadline
from kops.sandbox.hosts import Nodes
from kops.sandbox.nodes import Log
from kops.sandbox.readiness import fail_if_exited, failure_details, startup_complete, wait_metadata
from kops.sandbox.state import Node, SandboxState


class MetadataMode:
    """A metadata mode over one sandbox's state and node engine (see the module doc)."""

    name = "?"
    #: what a broker writes to server.log once its start-up is done (``{id}``: its id)
    started_line = ""
    #: a broker can be the controller (ZooKeeper mode); KRaft controllers are nodes of their own
    controller_is_a_broker = False

    def __init__(self, state: SandboxState, nodes: Nodes, log: Log):
        self.state = state
        self.nodes = nodes
        self.log = log

    @property
    def config(self):
        return self.state.config

    def base_properties(self, node: Node, secrets: Any = None) -> dict[str, str]:
        """``<node>.properties`` of a node of :meth:`SandboxState.base_nodes` (``secrets``: a
        secured sandbox's passwords, :class:`kops.sandbox.security.Secrets`)."""
        raise NotImplementedError

    def start_base(self, missing: list[Node], deadline: Deadline) -> None:
        """Start the missing ones of the nodes the brokers need, and wait until they serve."""
        raise NotImplementedError

    def prepare_broker(self, broker_id: int) -> None:
        """Before a broker's first start (KRaft: its meta.properties)."""

    def registrations(self) -> tuple[set[int], int | None]:
        """(brokers registered now, the active controller); empty / None when nothing answers."""
        raise NotImplementedError

    def wait_registered(self, brokers: list[int], deadline: Deadline, since: dict[int, int] | None = None) -> None:
        """Wait until ``brokers`` are registered (those launched at ``since``: newer than their
        launch and done starting up), the brokers' metadata agrees and a controller leads; fail
        early when one of their processes exits."""
        raise NotImplementedError

    def wait_deregistered(self, gone: set[int], deadline: Deadline) -> None:
        """Wait until ``gone`` are out of the cluster and the remaining brokers see it so."""
        raise NotImplementedError

    def require_running(self) -> None:
        """ClusterError unless the nodes the brokers need run (before starting brokers)."""
        raise NotImplementedError

    def shutdown_batches(self, brokers: list[int]) -> list[list[int]]:
        """The order in which to stop ``brokers`` gracefully, batch by batch."""
        return [brokers] if brokers else []

    def refused_change(self, diff: set[str], data_kept: bool) -> str | None:
        """Why the stopped sandbox's data cannot take the changed settings ``diff``; None: it can."""
        if data_kept and ({"mode", "kafka_version", "zk_chroot", "controllers", "security", "log_dirs"} & diff):
            old = self.state.recorded["config"] if self.state.recorded else {}
            dirs = old.get("log_dirs", 1)
            return (f"the stopped sandbox in {self.state.workdir} has data from {old.get('mode')} mode / Kafka "
                    f"{old.get('kafka_version')}" + (f" / {dirs} log dirs per broker" if "log_dirs" in diff else "")
                    + "; run `kops sandbox down --purge` to delete it first, or use "
                    "another --workdir")
        return None

    # -- shared ----------------------------------------------------------------------------------------
    def startup_complete(self, broker_id: int) -> bool:
        return startup_complete(self.state, broker_id, self.started_line.format(id=broker_id))

    def live_brokers(self, absent: set[int] = frozenset()) -> list[int]:  # type: ignore[assignment]
        return [b for b in self.config.broker_ids if b not in absent and self.nodes.running(b)]

    def client_config(self) -> Any:
        """The admin user's client settings (empty when the sandbox is not secured)."""
        from kops.sandbox.security import admin_client_config

        return admin_client_config(self.config)


class ZooKeeperMode(MetadataMode):
    """One ZooKeeper; brokers register in /brokers/ids, the controller in /controller."""

    name = "zookeeper"
    started_line = "[KafkaServer id={id}] started"
    controller_is_a_broker = True

    def base_properties(self, node: Node, secrets: Any = None) -> dict[str, str]:
        return self.config.zookeeper_properties()

    def _zk(self, timeout_s: float):
        from kops.sandbox import probe
        from kops.sandbox.security import zk_sasl

        return probe.zk_client(self.config.zookeeper_connect or "", timeout_s=timeout_s, sasl=zk_sasl(self.config))

    def start_base(self, missing: list[Node], deadline: Deadline) -> None:
        from kops.sandbox import probe

        cfg = self.config
        if "zookeeper" in missing:
            self.log(f"starting ZooKeeper on {cfg.host}:{cfg.zookeeper_port}")
            self.nodes.launch("zookeeper")
        while not probe.zk_ruok(cfg.host, cfg.zookeeper_port):
            if not self.nodes.running("zookeeper"):
                raise ClusterError("ZooKeeper exited during start-up",
                                   details=[self.nodes.why_not_running("zookeeper"), *failure_details(cfg, "zookeeper")])
            if deadline.passed(["zookeeper"]):
                raise ClusterError("ZooKeeper did not come up in time", details=failure_details(cfg, "zookeeper"))
            time.sleep(0.1)
        if cfg.secured:
            self._create_scram_users(deadline)

    def _create_scram_users(self, deadline: Deadline) -> None:
        """SCRAM-SHA-512 credentials of admin and the unprivileged user, in ZooKeeper, before the
        brokers start (the brokers authenticate to each other as admin)."""
        from kops.sandbox import security

        s = security.load_or_create_secrets(self.config.security_files)
        last: Exception | None = None
        while True:  # ZooKeeper answers ruok a little before it accepts SASL sessions
            try:
                with self._zk(10.0) as zk:
                    security.create_scram_users(zk, s)
                self.log(f"SCRAM-SHA-512 users {security.ADMIN_USER} (super user) and "
                         f"{security.UNPRIVILEGED_USER} are in ZooKeeper")
                return
            except ClusterError as e:
                last = e
            if deadline.passed(["zookeeper"]):
                raise ClusterError(
                    f"could not create the SCRAM users in ZooKeeper ({last})", details=failure_details(self.config, "zookeeper")
                )
            time.sleep(0.5)

    def registrations(self) -> tuple[set[int], int | None]:
        from kops.sandbox import probe

        if not self.nodes.running("zookeeper"):
            return set(), None
        try:
            with self._zk(5.0) as zk:
                return set(probe.zk_registrations(zk)), probe.zk_controller(zk)
        except ClusterError:
            return set(), None

    def wait_registered(self, brokers: list[int], deadline: Deadline, since: dict[int, int] | None = None) -> None:
        from kops.sandbox import probe

        want = set(brokers)
        since = since or {}
        with self._zk(max(1.0, min(15.0, deadline.left()))) as zk:
            while True:
                regs = probe.zk_registrations(zk)
                ok = {
                    b for b in want
                    if b in regs and regs[b].timestamp_ms >= since.get(b, 0) - 2000
                    and (b not in since or self.startup_complete(b))
                }
                ctrl = probe.zk_controller(zk)
                if ok == want and self.controller_serves(ctrl, regs):
                    break
                fail_if_exited(self.nodes.running, self.config, sorted(want - ok), "registered in ZooKeeper")
                # past the bound, only the late brokers' progress keeps the wait going (all of
                # them while the controller is what it waits for)
                if deadline.passed((want - ok) or want):
                    late = sorted(want - ok)
                    if late:
                        b = late[0]
                        raise ClusterError(
                            f"broker(s) {late} did not register in ZooKeeper in time (broker {b}: rack "
                            f"{self.config.rack_map[b]}, port {self.config.broker_port(b)}, log "
                            f"{self.config.log_dir(b)}/server.log)",
                            details=failure_details(self.config, b),
                        )
                    raise ClusterError("no controller was elected in time (/controller is empty)")
                time.sleep(0.2)
        wait_metadata(self.config, self.live_brokers(), present=want, absent=set(), deadline=deadline,
                      client_config=self.client_config())

    def wait_deregistered(self, gone: set[int], deadline: Deadline) -> None:
        from kops.sandbox import probe

        remaining = self.live_brokers(absent=gone)
        with self._zk(10.0) as zk:
            while True:
                regs = probe.zk_registrations(zk)
                ctrl = probe.zk_controller(zk)
                if not (gone & set(regs)) and (not remaining or self.controller_serves(ctrl, regs)):
                    break
                if deadline.passed():
                    raise ClusterError(
                        f"brokers {sorted(gone & set(regs))} still registered in ZooKeeper after they stopped"
                        if gone & set(regs) else "no controller was elected after the brokers stopped"
                    )
                time.sleep(0.2)
        remaining = self.metadata_brokers(remaining)
        if remaining:
            wait_metadata(self.config, remaining, present=set(), absent=gone, deadline=deadline,
                          client_config=self.client_config())

    def metadata_brokers(self, brokers: list[int]) -> list[int]:
        """Those of ``brokers`` whose metadata tells when a broker left the cluster."""
        return brokers

    def controller_serves(self, ctrl: int | None, regs) -> bool:
        """The controller in /controller is one that serves: a registered broker (a KRaft
        controller during a migration: :class:`kops.sandbox.migration.MigrationMode`)."""
        return ctrl is not None and ctrl in regs

    def require_running(self) -> None:
        if not self.nodes.running("zookeeper"):
            raise ClusterError("ZooKeeper of the sandbox is not running; run `kops sandbox up` to start everything")

    def shutdown_batches(self, brokers: list[int]) -> list[list[int]]:
        """The other brokers together, the active controller last (concurrent controlled shutdowns
        that include the controller stall in retries for ~10 s)."""
        ctrl = self.registrations()[1]
        first = [b for b in brokers if b != ctrl]
        last = [b for b in brokers if b == ctrl]
        return [x for x in (first, last) if x]


__all__ = ["MetadataMode", "ZooKeeperMode"]
