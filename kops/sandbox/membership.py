"""Changing a running sandbox: stop and start brokers or racks, add and remove brokers."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterable
from typing import Any

from kops.errors import BadInput, ClusterError
from kops.sandbox import dist, procs
from kops.sandbox.nodes import node_key


class Membership:
    """``stop``, ``start``, ``add`` and ``remove`` (a part of :class:`kops.sandbox.cluster.Sandbox`)."""

    # -- stop / start ----------------------------------------------------------------------------
    def _select(self, broker: int | None, rack: str | None, brokers: Iterable[int] | None = None) -> list[int]:
        given = sum(x is not None for x in (broker, rack, brokers))
        if given != 1:
            raise BadInput("name exactly one of: a broker (--broker ID), a rack (--rack R) or a list of brokers")
        if broker is not None:
            self._check_broker(int(broker))
            return [int(broker)]
        if rack is not None:
            return self.brokers_in_rack(rack)
        ids = sorted({int(b) for b in brokers})  # type: ignore[union-attr]
        for b in ids:
            self._check_broker(b)
        return ids

    def stop(
        self,
        broker: int | None = None,
        *,
        rack: str | None = None,
        brokers: Iterable[int] | None = None,
        kill: bool = False,
        wait: bool = True,
        timeout_s: float | None = None,
    ) -> list[int]:
        """Stop one broker, a whole rack or a list of brokers.

        Graceful (default): SIGTERM, Kafka's controlled shutdown moves leadership away; waits
        until the process exits (SIGKILL after ``timeout_s``) and, with ``wait``, until the
        broker is gone from /brokers/ids (KRaft: from the cluster metadata) and the remaining
        brokers see it gone. ``kill=True``: SIGKILL (a crash; the registration goes away when
        the ZooKeeper session expires, ~6 s). Returns the brokers that were running and stopped.
        """
        timeout_s = timeout_s or self.config.stop_timeout_s
        with self._lock():
            self._load_state()
            ids = self._select(broker, rack, brokers)
            return self._stop_locked(ids, kill=kill, wait=wait, timeout_s=timeout_s)

    def _stop_locked(self, ids: list[int], *, kill: bool, wait: bool, timeout_s: float) -> list[int]:
        running = [b for b in ids if self._running(b)]
        if not running:
            self.log(f"brokers {ids} are not running")
            return []
        how = "killing (SIGKILL)" if kill else "stopping (controlled shutdown)"
        self.log(f"{how} brokers {running}")
        t_end = time.monotonic() + timeout_s
        for batch in ([running] if kill else self._shutdown_batches(running)):
            self._signal_and_wait(batch, 9 if kill else 15, t_end, timeout_s)
        if wait:
            self._wait_deregistered(set(running), time.monotonic() + max(30.0, timeout_s))
        return running

    def _shutdown_batches(self, brokers: list[int]) -> list[list[int]]:
        """Graceful order: the other brokers together, the active controller last (concurrent
        controlled shutdowns that include the controller stall in retries for ~10 s)."""
        ctrl = self.controller_id() if self.mode == "zookeeper" else None
        first = [b for b in brokers if b != ctrl]
        last = [b for b in brokers if b == ctrl]
        return [x for x in (first, last) if x]

    def _signal_and_wait(self, nodes: list[Any], sig: int, t_end: float, timeout_s: float) -> None:
        """Signal our processes among ``nodes``; wait until they exit; SIGKILL at ``t_end``."""
        pids = {n: self._pid(n) for n in nodes if self._running(n)}
        for pid in pids.values():
            procs.signal_pid(pid, sig)  # type: ignore[arg-type]
        for n, pid in pids.items():
            left = procs.wait_gone([pid], marker=self._marker(n), timeout_s=max(0.0, t_end - time.monotonic()))  # type: ignore[list-item]
            if left:
                self.log(f"{node_key(n, self.config)} did not stop within {timeout_s:.0f}s: SIGKILL")
                procs.terminate(left, marker=self._marker(n), timeout_s=10.0, kill=True)
        if pids:
            dist.finalize_cds(self.kafka_version)

    def _wait_deregistered(self, gone: set[int], deadline: float) -> None:
        if self.mode == "kraft":
            from kops.sandbox import kraft

            kraft.wait_brokers(self, set(), gone, deadline)
            return
        from kops.sandbox import probe

        remaining = [b for b in self.broker_ids if b not in gone and self._running(b)]
        with probe.zk_client(self.zookeeper_connect or "", timeout_s=10.0, sasl=self._zk_sasl()) as zk:
            while True:
                regs = probe.zk_registrations(zk)
                ctrl = probe.zk_controller(zk)
                if not (gone & set(regs)) and (not remaining or (ctrl is not None and ctrl in regs)):
                    break
                if time.monotonic() > deadline:
                    raise ClusterError(
                        f"brokers {sorted(gone & set(regs))} still registered in ZooKeeper after they stopped"
                        if gone & set(regs) else "no controller was elected after the brokers stopped"
                    )
                time.sleep(0.2)
        if remaining:
            self._wait_metadata(present=set(), absent=gone, deadline=deadline)

    def start(
        self,
        broker: int | None = None,
        *,
        rack: str | None = None,
        brokers: Iterable[int] | None = None,
        timeout_s: float | None = None,
    ) -> list[int]:
        """(Re)start stopped brokers with their config and data; wait until they are registered.
        Brokers already running are left alone. Returns the brokers that were started."""
        timeout_s = timeout_s or self.config.start_timeout_s
        self.started_now = []
        with self._lock():
            self._load_state()
            ids = self._select(broker, rack, brokers)
            self._require_base_running()
            todo = [b for b in ids if not self._running(b)]
            if not todo:
                self.log(f"brokers {ids} are already running")
                return []
            busy = [f"broker {b} port {self.broker_port(b)}" for b in todo
                    if procs.port_in_use(self.config.host, self.broker_port(b))]
            if busy:
                raise ClusterError("ports in use by another process: " + ", ".join(busy))
            cp = dist.kafka_classpath(self.kafka_version)
            self.log(f"starting brokers {todo}")
            for b in todo:
                self._spawn(b, cp)
            since = {b: self._procs[f"broker-{b}"]["launched_ms"] for b in todo}
            self._wait_registered(todo, time.monotonic() + timeout_s, since=since)
        return todo

    def _require_base_running(self) -> None:
        if self.mode == "zookeeper" and not self._running("zookeeper"):
            raise ClusterError("ZooKeeper of the sandbox is not running; run `kops sandbox up` to start everything")
        if self.mode == "kraft" and not any(self._running(c) for c in self.controller_ids):
            raise ClusterError("the KRaft controllers are not running; run `kops sandbox up` to start everything")

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
        timeout_s = timeout_s or self.config.start_timeout_s
        self.started_now = []
        with self._lock():
            self._load_state()
            host = self.config.host
            if port is None:
                port = self.config.next_free_port(lambda p: procs.port_in_use(host, p))
            new_cfg = self.config.with_broker_added(broker_id, rack, port)
            if procs.port_in_use(host, port):
                raise BadInput(f"--port {port} is in use by another process on {host}; pick another port")
            self._require_base_running()
            if not self._recorded:
                raise ClusterError(f"no sandbox in {self.workdir}; run `kops sandbox up` first")
            old_cfg = self.config
            kept = self.config.data_dir(broker_id).exists()
            self.config = new_cfg
            try:
                dist.ensure_kafka(self.kafka_version, log=self.log)
                self._write_configs()
                if self.mode == "kraft":
                    from kops.sandbox import kraft

                    if not (new_cfg.data_dir(broker_id) / "meta.properties").exists():
                        kraft._write_broker_meta(self, broker_id)
                self._save_state()
                self.log(f"adding broker {broker_id} (rack {new_cfg.rack_map[broker_id]}, port {port})"
                         + (" with the data it had" if kept else ""))
                self._spawn(broker_id, dist.kafka_classpath(self.kafka_version))
                since = {broker_id: self._procs[f"broker-{broker_id}"]["launched_ms"]}
                self._wait_registered([broker_id], time.monotonic() + timeout_s, since=since)
            except BaseException:
                self._stop_started_now()
                self.config = old_cfg
                self._save_state()
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
        timeout_s = timeout_s or self.config.stop_timeout_s
        with self._lock():
            self._load_state()
            new_cfg = self.config.with_broker_removed(broker_id)
            was_running = bool(self._stop_locked([broker_id], kill=kill, wait=True, timeout_s=timeout_s))
            self._procs.pop(f"broker-{broker_id}", None)
            props = self.config.properties_file(broker_id)
            node_dir = self.config.node_dir(broker_id)
            self.config = new_cfg
            self._save_state()
            if purge:
                shutil.rmtree(node_dir, ignore_errors=True)
                props.unlink(missing_ok=True)
            self.log(f"broker {broker_id} removed from the sandbox"
                     + ("; its data and logs deleted" if purge else f"; its data and logs stay in {node_dir}"))
        return was_running
