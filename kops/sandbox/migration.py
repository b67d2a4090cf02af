"""A ZooKeeper -> KRaft migration (KIP-866) of a ZooKeeper-mode sandbox, for real (Kafka 3.7 - 3.9).

The steps are Kafka's own (docs/ops.html, "ZooKeeper to KRaft Migration"), each a verb of
:class:`SandboxMigration` (``sb.migration``) and of ``kops sandbox migration ...``:

1. :meth:`SandboxMigration.start_controllers`: KRaft controllers (ids from 1000) formatted with
   the ZooKeeper cluster's id, ``zookeeper.metadata.migration.enable=true`` and
   ``zookeeper.connect``, next to the running ZooKeeper sandbox (state ``PRE_MIGRATION``);
2. each broker restarted in phase ``migrate`` (:meth:`SandboxMigration.restart`): still a ZooKeeper broker, also registered with the quorum; once every broker
   is, the active controller copies ZooKeeper's metadata into its log, becomes the cluster's
   controller in ZooKeeper and writes both (``MIGRATION``, "dual write");
3. each broker restarted in phase ``kraft``: a KRaft broker (``process.roles=broker``);
4. :meth:`SandboxMigration.finalize`: the controllers restarted without the migration settings
   (``POST_MIGRATION``); the sandbox is then a KRaft sandbox and ZooKeeper is stopped.

Before step 4, Kafka's revert goes back to ZooKeeper mode ("Reverting to ZooKeeper mode during
the migration"), verb by verb as the zk-to-kraft-rollback playbook's hooks call them: each KRaft
broker restarted in phase ``migrate`` again; :meth:`SandboxMigration.stop_controllers` deprovisions
the controllers (the sandbox is then ``reverting``); ``/controller`` and ``/migration`` deleted
(:func:`kops.cluster.migration.clear`: ``/controller_epoch`` raised above the KRaft epoch first);
each broker restarted in phase ``zookeeper`` (without the migration settings; the last one ends
the migration). :meth:`SandboxMigration.rollback` does it all from step 2.

Where the migration is is read from ZooKeeper (:func:`classify`): ``/migration`` (written by the
active KRaft controller: its id, epochs and the offset of the migrated metadata in its log) and
``/controller`` (``kraftControllerEpoch`` once a KRaft controller holds it). The phase of each
broker and of the controllers is the sandbox's state (``SandboxConfig.migration`` and
``broker_phases``), so ``status``, ``start``, ``restart`` and ``up`` keep them.
"""

from __future__ import annotations

import json
import shutil
import time
from typing import Any

from kops.cluster.migration import (  # noqa: F401  (re-exported: the sandbox's names)
    MIGRATION, NONE, POST_MIGRATION, PRE_MIGRATION, STATES, MigrationStatus, classify, read_status, zk_cluster_id)
from kops.errors import BadInput, ClusterError
from kops.sandbox import procs
from kops.sandbox.configs import write_node_configs
from kops.sandbox.deadline import Deadline
from kops.sandbox.modes import ZooKeeperMode
from kops.sandbox.readiness import fail_if_exited, failure_details, startup_complete, wait_controllers, wait_metadata
from kops.sandbox.state import Node

#: a rollback's first broker: SIGKILL after this long in its controlled shutdown (no controller answers it)
ROLLBACK_FIRST_STOP_S = 15.0
#: what a ZooKeeper broker and a KRaft broker log once started
ZK_BROKER_STARTED = "[KafkaServer id={id}] started"
KRAFT_BROKER_STARTED = "[BrokerServer id={id}] Transition from STARTING to STARTED"
#: what every controller logs (controller.log) once the migration is finalized (FeatureControlManager
#: replays the record)
FINALIZED_LINE = "changing the migration state from MIGRATION to POST_MIGRATION"


class MigrationMode(ZooKeeperMode):
    """ZooKeeper with KRaft controllers in migration mode beside it, and brokers each in its
    phase (``SandboxConfig.broker_phase``): ZooKeeper brokers register in ``/brokers/ids``,
    KRaft brokers only with the quorum (read through the brokers' metadata). ``/controller``
    names a KRaft controller once the metadata is migrated."""

    migration = "migrating"

    def base_properties(self, node: Node, secrets: Any = None) -> dict[str, str]:
        if node == "zookeeper":
            return self.config.zookeeper_properties()
        return self.config.controller_properties(int(node), secrets)

    def start_base(self, missing: list[Node], deadline: Deadline) -> None:
        super().start_base(missing, deadline)
        ctrls = [n for n in missing if n in self.config.controller_ids]
        if ctrls:
            self.start_controllers(ctrls, deadline)  # type: ignore[arg-type]

    def start_controllers(self, ctrls: list[int], deadline: Deadline) -> None:
        """Format the controllers' storage with the ZooKeeper cluster's id (once), start them and
        wait until they started and the active one wrote ``/migration``."""
        from kops.sandbox.kraft import KraftMode

        st, cfg = self.state, self.config
        if st.cluster_id is None:
            with self._zk(10.0) as zk:
                st.cluster_id = zk_cluster_id(zk)
            if st.cluster_id is None:
                raise ClusterError("ZooKeeper holds no /cluster/id: start the brokers once before migrating")
            st.save()
        KraftMode(st, self.nodes, self.log).format_storage(ctrls, deadline)
        self.log(f"starting KRaft controllers {ctrls} in migration mode ({cfg.quorum_voters}; cluster id "
                 f"{st.cluster_id})")
        for c in ctrls:
            self.nodes.launch(c)
        wait_controllers(self.state, self.nodes, ctrls, deadline)
        while True:
            with self._zk(10.0) as zk:
                if read_status(zk).state != NONE:
                    return
            if deadline.passed(ctrls):
                raise ClusterError("the KRaft controllers started but none wrote /migration in ZooKeeper in time",
                                   details=failure_details(cfg, ctrls[0]))
            time.sleep(0.3)

    def startup_complete(self, broker_id: int) -> bool:
        kraft = self.config.broker_phase(broker_id) == "kraft"
        return startup_complete(self.state, broker_id,
                                (KRAFT_BROKER_STARTED if kraft else ZK_BROKER_STARTED).format(id=broker_id))

    def controller_serves(self, ctrl: int | None, regs) -> bool:
        return ctrl is not None and (ctrl in regs or ctrl in self.config.controller_ids)

    def kraft_brokers(self, brokers) -> list[int]:
        return [b for b in brokers if self.config.broker_phase(b) == "kraft"]

    def metadata_brokers(self, brokers: list[int]) -> list[int]:
        """The KRaft brokers: the ZooKeeper brokers of a migration keep every broker registered
        with the quorum in their metadata, a stopped one too (the KRaft controller's
        UpdateMetadata lists it, fenced)."""
        return self.kraft_brokers(brokers)

    def registrations(self) -> tuple[set[int], int | None]:
        from kops.sandbox import probe

        regs, ctrl = super().registrations()
        kraft = self.kraft_brokers(self.live_brokers())
        if kraft:
            try:
                ids, _ = probe.kafka_cluster(",".join(f"{self.config.host}:{self.config.broker_port(b)}"
                                                      for b in self.live_brokers()), timeout_s=5.0,
                                             client_config=self.client_config())
                regs |= set(kraft) & ids
            except Exception:  # noqa: BLE001 - the cluster does not answer
                pass
        return regs, ctrl

    def wait_registered(self, brokers: list[int], deadline: Deadline, since: dict[int, int] | None = None) -> None:
        """ZooKeeper brokers: as :class:`ZooKeeperMode` (``/brokers/ids``); KRaft brokers: start-up
        finished and in the brokers' metadata (their registration with the quorum)."""
        kraft = self.kraft_brokers(brokers)
        zk = [b for b in brokers if b not in kraft]
        if zk:
            super().wait_registered(zk, deadline, since)
        if not kraft:
            return
        since = since or {}
        while not all(self.startup_complete(b) for b in kraft if b in since):
            fail_if_exited(self.nodes.running, self.config, kraft, "finished its start-up as a KRaft broker")
            late = [b for b in kraft if b in since and not self.startup_complete(b)]
            if deadline.passed(late):
                raise ClusterError(f"KRaft broker(s) {late} did not finish their start-up in time",
                                   details=failure_details(self.config, late[0]))
            time.sleep(0.3)
        wait_metadata(self.config, self.live_brokers(), present=set(kraft), absent=set(), deadline=deadline,
                      client_config=self.client_config())

    def require_running(self) -> None:
        super().require_running()
        down = [c for c in self.config.controller_ids if not self.nodes.running(c)]
        if down:
            raise ClusterError(f"KRaft controllers {down} of the migration are not running; run `kops sandbox up`")


def plain_restart_phase(cfg: Any, broker_id: int) -> str | None:
    """The phase a plain restart (no ``--phase``) brings ``broker_id`` back in: while a
    migration is reverted, a broker in migration mode starts without the migration settings,
    as a plain ZooKeeper broker (``zookeeper``, recorded as such); otherwise None (unchanged)."""
    if cfg.migration == "reverting" and cfg.broker_phase(broker_id) == "migrate":
        return "zookeeper"
    return None


class SandboxMigration:
    """The migration verbs of one sandbox (see the module doc); ``sb.migration``."""

    def __init__(self, sandbox: Any):
        self.sb = sandbox  # the kops.sandbox.cluster.Sandbox whose verbs these are

    @property
    def state(self):
        return self.sb.state

    def _zk(self, timeout_s: float = 10.0):
        from kops.sandbox import probe
        from kops.sandbox.security import zk_sasl

        cfg = self.sb.config
        return probe.zk_client(cfg.zookeeper_connect or f"{cfg.host}:{cfg.zookeeper_port}", timeout_s=timeout_s,
                               sasl=zk_sasl(cfg))

    def status(self) -> MigrationStatus:
        """Where the migration is (:func:`classify`). After finalization ``POST_MIGRATION``
        without asking ZooKeeper."""
        self.state.load()
        cfg = self.sb.config
        if cfg.migration == "finalized":
            return MigrationStatus(POST_MIGRATION, None, None, None)
        if cfg.mode != "zookeeper":
            return MigrationStatus(NONE, None, None, None)
        with self._zk() as zk:
            return read_status(zk)

    def wait_state(self, want: str, *, timeout_s: float = 120.0) -> MigrationStatus:
        """Wait until :meth:`status` is ``want``; ClusterError naming the last state after ``timeout_s``."""
        if want not in STATES:
            raise BadInput(f"migration state {want!r}: expected one of {', '.join(STATES)}")
        deadline = time.monotonic() + timeout_s
        while True:
            st = self.status()
            if st.state == want:
                return st
            if time.monotonic() > deadline:
                raise ClusterError(f"the migration did not reach {want} within {timeout_s:.0f}s (it is {st.state}; "
                                   f"/controller {st.controller}, /migration {st.migration_znode})")
            time.sleep(0.3)

    # -- 2. and 3. the brokers ------------------------------------------------------------------------
    def restart(self, broker_id: int, phase: str, *, timeout_s: float | None = None,
                stop_timeout_s: float | None = None) -> bool:
        """Restart one broker in migration ``phase``: ``migrate`` (a ZooKeeper broker in migration
        mode) or ``kraft`` (a KRaft broker, once the metadata is migrated: ``MIGRATION``), recorded
        in the state; the same phase again is a plain restart. A graceful stop (SIGKILL after
        ``stop_timeout_s``), then a start that waits until the broker is registered again.
        BadInput (nothing done) for a step out of Kafka's order. Returns whether it was running."""
        sb, st = self.sb, self.state
        with st.lock():
            st.load()
            st.check_broker(broker_id)
            new = sb.config.with_broker_phase(broker_id, phase)
            if new is not sb.config and phase == "kraft" and (now := self.status().state) != MIGRATION:
                raise BadInput(f"the metadata is not migrated yet (migration state {now}): restart every broker "
                               "with --phase migrate and wait for MIGRATION before --phase kraft")
            # reverting, while no ZooKeeper broker is the controller (the first one back): its
            # controlled shutdown waits for the KRaft controller, gone now ("Notifying KRaft of
            # controlled shutdown"), until SIGKILL; once back as a plain ZooKeeper broker it becomes
            # the controller and the next ones' shutdowns go to it
            first_back = (sb.config.migration == "reverting" and phase == "zookeeper"
                          and sb.config.broker_phase(broker_id) == "migrate" and self.status().controller not in sb.config.broker_ids)
        stopped = sb.stop(broker_id, timeout_s=ROLLBACK_FIRST_STOP_S if first_back else stop_timeout_s or timeout_s)
        with st.updating():
            new = sb.config.with_broker_phase(broker_id, phase)
            if new is not sb.config:
                sb.config = new
                write_node_configs(st, sb.nodes, sb.meta)
                sb.log(f"broker {broker_id}: phase {phase}")
        sb.start(broker_id, timeout_s=timeout_s)
        return bool(stopped)

    # -- 1. the controllers ------------------------------------------------------------------------
    def start_controllers(self, controllers: int = 1, *, ports: list[int] | None = None,
                          timeout_s: float | None = None) -> list[int]:
        """Start ``controllers`` KRaft controllers in migration mode next to the running
        ZooKeeper sandbox (ports: ``ports``, or the first free ones above the sandbox's); returns
        their ids once they started and the active one registered the migration in ZooKeeper
        (``PRE_MIGRATION``). BadInput for a sandbox that is not in ZooKeeper mode or migrates
        already; ClusterError when ZooKeeper or a broker is down."""
        sb, st = self.sb, self.state
        timeout_s = timeout_s or sb.config.start_timeout_s
        st.started_now = []
        with st.lock():
            st.load()
            old = sb.config
            if old.mode != "zookeeper" or old.migration is not None:
                raise BadInput(f"the sandbox in {sb.workdir} is in {old.mode} mode"
                               + (f" (migration {old.migration})" if old.migration else "")
                               + ": KRaft controllers are started next to a ZooKeeper-mode sandbox once")
            sb.meta.require_running()
            down = [b for b in old.broker_ids if not sb.nodes.running(b)]
            if down:
                raise ClusterError(f"brokers {down} are not running; start them before the migration")
            if ports is None:
                ports = []
                for _ in range(controllers):
                    ports.append(_next_port(old, ports))
            new = old.with_(migration="migrating", controllers=controllers, controller_ports=list(ports)).validate()
            busy = [p for p in ports if procs.port_in_use(new.host, p)]
            if busy:
                raise BadInput(f"controller ports {busy} are in use on {new.host}; pick others")
            sb.config = new
            try:
                sb.nodes.prepare()
                write_node_configs(st, sb.nodes, sb.meta)
                st.save()
                sb.meta.start_controllers(new.controller_ids, Deadline(new.log_dir, timeout_s))  # type: ignore[attr-defined]
            except BaseException:  # as before: no controller, no quorum data (their logs stay)
                sb.nodes.discard(list(st.started_now))
                for c in new.controller_ids:
                    shutil.rmtree(new.data_dir(c), ignore_errors=True)
                sb.config = old
                st.cluster_id = None
                st.save()
                raise
            st.save()
        return new.controller_ids

    # -- 4. finalize --------------------------------------------------------------------------------
    def finalize(self, *, stop_zookeeper: bool = True, timeout_s: float | None = None) -> None:
        """Restart the controllers without ``zookeeper.metadata.migration.enable`` and
        ``zookeeper.connect``, one at a time; returns once the active one completed the
        migration (``POST_MIGRATION`` in its log) and every broker is in the metadata. The
        sandbox is then in KRaft mode; ZooKeeper is stopped (``stop_zookeeper``) and forgotten.
        BadInput unless every broker runs as a KRaft broker (phase ``kraft``)."""
        from kops.sandbox.kraft import KraftMode

        sb, st = self.sb, self.state
        timeout_s = timeout_s or sb.config.start_timeout_s
        with st.lock():
            st.load()
            old = sb.config
            deadline = Deadline(old.log_dir, timeout_s)
            if old.migration == "finalized" and st.key("zookeeper") in st.procs:
                sb.log("the controllers were restarted without the migration settings already: waiting for them")
                new = old
            elif old.migration != "migrating":
                raise BadInput(f"the sandbox in {sb.workdir} is not migrating (mode {old.mode}, migration {old.migration})")
            else:
                not_kraft = [b for b in old.broker_ids if old.broker_phase(b) != "kraft"]
                if not_kraft:
                    raise BadInput(f"brokers {not_kraft} are not KRaft brokers yet: restart each with --phase kraft "
                                   "first (finalizing with ZooKeeper brokers left would cut them off)")
                new = old.with_(mode="kraft", migration="finalized", broker_phases={}).validate()
                sb.config = new
                write_node_configs(st, sb.nodes, sb.meta)
                st.save()
                self._roll_controllers(deadline)
            while not any(startup_complete(st, c, FINALIZED_LINE, "controller.log") for c in new.controller_ids):
                if deadline.passed(new.controller_ids):
                    raise ClusterError("no KRaft controller completed the migration (POST_MIGRATION) in time",
                                       details=failure_details(new, new.controller_ids[0]))
                time.sleep(0.3)
            KraftMode(st, sb.nodes, sb.log).wait_registered(new.broker_ids, deadline)
            if stop_zookeeper and st.key("zookeeper") in st.procs:
                sb.log("stopping ZooKeeper: the cluster runs in KRaft mode")
                sb.nodes.signal_and_wait(["zookeeper"], 15, time.monotonic() + new.stop_timeout_s, new.stop_timeout_s)
                st.procs.pop(st.key("zookeeper"), None)
            st.save()

    def _roll_controllers(self, deadline: Deadline) -> None:
        """Restart the controllers one at a time with their properties as written now."""
        sb, st, cfg = self.sb, self.state, self.sb.config
        sb.nodes.prepare()
        t_end = time.monotonic() + cfg.stop_timeout_s
        for c in cfg.controller_ids:
            sb.log(f"restarting KRaft controller {c} without the migration settings")
            sb.nodes.signal_and_wait([c], 15, t_end, cfg.stop_timeout_s)
            sb.nodes.launch(c)
            wait_controllers(st, sb.nodes, [c], deadline)

    # -- rollback (before finalization) ------------------------------------------------------------
    def stop_controllers(self) -> None:
        """Deprovision the KRaft controllers of a migration that is not finalized (Kafka's revert,
        once no broker runs as a KRaft broker): stopped and forgotten, their data removed (a later
        migration starts from an empty quorum). The brokers still in migration mode are then rolled
        back one by one (``restart --phase zookeeper``; the sandbox is ``reverting`` until the last
        one is); with none, the migration is over. BadInput for a KRaft broker left (restart it with
        ``--phase migrate`` first) or a sandbox that is not migrating."""
        sb, st = self.sb, self.state
        with st.lock():
            st.load()
            old = sb.config
            if old.migration != "migrating":
                raise BadInput(f"the sandbox in {sb.workdir} is not migrating (mode {old.mode}, migration {old.migration}); "
                               "a finalized migration cannot be rolled back")
            kraft = [b for b in old.broker_ids if old.broker_phase(b) == "kraft"]
            if kraft:
                raise BadInput(f"brokers {kraft} run as KRaft brokers and need the controllers: restart each with "
                               "--phase migrate first (Kafka's revert of the brokers' move to KRaft)")
            ctrls = [c for c in old.controller_ids if sb.nodes.running(c)]
            if ctrls:
                sb.log(f"stopping KRaft controllers {ctrls} (deprovisioning the quorum)")
                sb.nodes.signal_and_wait(ctrls, 15, time.monotonic() + old.stop_timeout_s, old.stop_timeout_s)
            for c in old.controller_ids:
                st.procs.pop(st.key(c), None)
                shutil.rmtree(old.data_dir(c), ignore_errors=True)
            st.cluster_id = None
            phases = {b: p for b, p in old.broker_phases.items() if p == "migrate"}
            sb.config = old.with_(migration="reverting" if phases else None, broker_phases=phases,
                                  controller_ports=None).validate()
            write_node_configs(st, sb.nodes, sb.meta)
            st.save()

    def rollback(self, *, timeout_s: float | None = None) -> None:
        """Back to ZooKeeper mode from brokers in migration mode (Kafka's "Reverting to ZooKeeper
        mode during the migration", for the step "Enter Migration Mode on the brokers"):
        :meth:`stop_controllers`, ``/controller`` and ``/migration`` deleted (:func:`clear`), each broker
        restarted in phase ``zookeeper``. BadInput once a broker runs as a KRaft broker or the
        migration was finalized."""
        from kops.cluster.migration import clear

        self.stop_controllers()
        with self._zk() as zk:
            done = clear(zk)
            self.sb.log(f"deleted /controller and /migration (was {json.dumps(done.before.migration_znode)}); "
                        f"{done.epoch_note()}")
        for b in [b for b in self.sb.config.broker_ids if self.sb.config.broker_phase(b) == "migrate"]:
            self.restart(b, "zookeeper", timeout_s=timeout_s)

def _next_port(cfg, chosen: list[int]) -> int:
    """The first port above the sandbox's ports and ``chosen`` that no process here listens on."""
    taken = set(cfg.all_ports().values()) | set(chosen)
    port = max(taken) + 1
    while port in taken or procs.port_in_use(cfg.host, port):
        port += 1
    return port


__all__ = ["MIGRATION", "MigrationMode", "MigrationStatus", "NONE", "POST_MIGRATION", "PRE_MIGRATION", "STATES",
           "SandboxMigration", "classify", "read_status", "zk_cluster_id"]
