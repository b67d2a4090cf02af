"""KRaft mode (Kafka 3.7 and later): storage formatted with Kafka's StorageTool, a controller
quorum, brokers that register with it; readiness through the Admin API (no ZooKeeper). The
metadata mode a :class:`kops.sandbox.cluster.Sandbox` holds for ``mode="kraft"``."""

from __future__ import annotations

import base64
import subprocess
import time
import uuid

from kops.errors import ClusterError
from kops.sandbox import dist, logdirs
from kops.sandbox.deadline import Deadline
from kops.sandbox.modes import MetadataMode
from kops.sandbox.readiness import fail_if_exited, failure_details, wait_quorum_leader
from kops.sandbox.state import Node

#: how long ``up`` waits for a dynamic quorum's controllers to agree on a leader before it starts
#: the brokers (:func:`kops.sandbox.readiness.wait_quorum_leader`)
QUORUM_SETTLE_S = 60.0


def new_cluster_id() -> str:
    """A Kafka cluster id: base64url (no padding) of a random UUID, as ``kafka-storage.sh
    random-uuid`` prints it (never starting with '-')."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


class KraftMode(MetadataMode):
    """A quorum of controller-only nodes (ids from 1000) and broker-only nodes; a broker is
    registered while it is unfenced in the cluster metadata. Brokers do not expose the active
    controller, so :meth:`registrations` reports it as unknown."""

    name = "kraft"
    started_line = "[BrokerServer id={id}] Transition from STARTING to STARTED"

    def base_properties(self, node: Node, secrets=None) -> dict[str, str]:
        return self.config.controller_properties(int(node), secrets)

    def start_base(self, missing: list[Node], deadline: Deadline) -> None:
        st, cfg = self.state, self.config
        if st.cluster_id is None:
            st.cluster_id = new_cluster_id()
            st.save()
        if missing:
            self.format_storage([*cfg.controller_ids, *cfg.broker_ids], deadline)
        ctrls = [n for n in missing if n in cfg.controller_ids]
        if ctrls:
            self.log(f"starting KRaft controllers {ctrls} ({cfg.quorum_voters})")
        for c in ctrls:
            self.nodes.launch(c)
        if ctrls and cfg.dynamic_quorum:  # brokers find the leader only once it is settled (readiness)
            leader = wait_quorum_leader(st, cfg.controller_ids, deadline.settle(QUORUM_SETTLE_S))
            self.log(f"KRaft quorum: every controller follows leader {leader}" if leader is not None else
                     f"KRaft controllers {cfg.controller_ids} agreed on no leader in {QUORUM_SETTLE_S:.0f} s; "
                     "starting the brokers anyway")

    def prepare_broker(self, broker_id: int) -> None:
        self._write_broker_meta(broker_id)

    def _write_broker_meta(self, broker_id: int) -> None:
        """A broker-only node's ``meta.properties`` exactly as ``kafka-storage.sh format`` writes it
        (v1: node.id, directory.id, cluster.id), in each of its log dirs that lacks one (JBOD:
        every dir its own directory id). Brokers take the metadata version from the controllers'
        log, so they need no bootstrap checkpoint; writing this file saves one JVM start per
        broker on small machines."""
        for d in self.config.data_dirs(broker_id):
            if (d / "meta.properties").exists() or logdirs.is_failed(d):
                continue
            d.mkdir(parents=True, exist_ok=True)
            text = (
                "#\n#" + time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime()) + "\n"
                f"node.id={broker_id}\ndirectory.id={new_cluster_id()}\nversion=1\ncluster.id={self.state.cluster_id}\n"
            )
            tmp = d / "meta.properties.tmp"
            tmp.write_text(text)
            tmp.replace(d / "meta.properties")

    def format_storage(self, nodes: list[int], deadline: Deadline) -> None:
        """``kafka-storage.sh format --cluster-id=<cluster id> -c <props>`` (one argument: a ZooKeeper cluster's id may start with "-") on every controller lacking
        meta.properties (in parallel JVMs); brokers get their meta.properties written directly.
        The cluster id is the state's (a new one; a migrated ZooKeeper cluster's own)."""
        cfg = self.config
        todo = [n for n in nodes
                if not all((d / "meta.properties").exists() or logdirs.is_failed(d) for d in cfg.data_dirs(n))]
        for b in [n for n in todo if n in cfg.broker_ids]:
            self._write_broker_meta(b)
        todo = [n for n in todo if n not in cfg.broker_ids]
        if not todo:
            return
        self.log(f"formatting storage of {', '.join(map(str, todo))} (cluster id {self.state.cluster_id})")
        initial = self.initial_controllers() if cfg.dynamic_quorum else None
        running: list[tuple[int, subprocess.Popen]] = []
        for n in todo:
            cfg.data_dir(n).mkdir(parents=True, exist_ok=True)
            quorum: list[str] = []
            if initial is not None:  # KIP-853: the first voters named with their directory ids; others join later
                quorum = (["--initial-controllers", initial] if n in cfg.initial_controller_ids
                          else ["--no-initial-controllers"])
            cmd = dist.java_command(
                dist.STORAGE_TOOL,
                ["format", f"--cluster-id={self.state.cluster_id or ''}", "-c", str(cfg.properties_file(n)), "--ignore-formatted",
                 *(["--release-version", cfg.release_version] if cfg.release_version else []), *quorum],
                version=cfg.version_of(n),
            )
            running.append((n, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
        failed: list[str] = []
        for n, p in running:
            try:
                out, _ = p.communicate(timeout=max(5.0, deadline.left()))
            except subprocess.TimeoutExpired:
                p.kill()
                out, _ = p.communicate()
                failed.append(f"node {n}: format timed out")
                continue
            if p.returncode != 0:
                failed.append(f"node {n}: exit {p.returncode}: " + " | ".join(out.strip().splitlines()[-5:]))
        if failed:
            raise ClusterError("formatting the KRaft storage failed", details=failed)

    def initial_controllers(self) -> str:
        """``--initial-controllers`` of a dynamic quorum: ``id@host:port:directory-id`` of each first
        voter, a directory id kept from a controller formatted already, a new one otherwise (the
        same list for every controller formatted)."""
        cfg, out = self.config, []
        for c in cfg.initial_controller_ids:
            out.append(f"{c}@{cfg.host}:{cfg.controller_port(c)}:{self.directory_id(c) or self._new_directory_id(c)}")
        return ",".join(out)

    def directory_id(self, node: int) -> str | None:
        """The ``directory.id`` in a node's (first) ``meta.properties``, None before it is formatted."""
        meta = self.config.data_dir(node) / "meta.properties"
        if not meta.exists():
            return None
        for line in meta.read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "directory.id":
                return value.strip()
        return None

    def _new_directory_id(self, node: int) -> str:
        """A first voter's directory id before it is formatted, kept in the state so that a
        format that failed half-way gives the rest the same list again."""
        ids = self.state.extras.setdefault("directory_ids", {})
        if str(node) not in ids:
            ids[str(node)] = new_cluster_id()
            self.state.save()
        return ids[str(node)]

    def registrations(self) -> tuple[set[int], int | None]:
        from kops.sandbox import probe

        live = self.live_brokers()
        if not live:
            return set(), None
        try:
            ids, _ = probe.kafka_cluster(",".join(f"{self.config.host}:{self.config.broker_port(b)}" for b in live),
                                         timeout_s=5.0, client_config=self.client_config())
        except Exception:  # noqa: BLE001 - the cluster does not answer
            return set(), None
        return ids, None

    def wait_registered(self, brokers: list[int], deadline: Deadline, since: dict[int, int] | None = None) -> None:
        self._wait(set(brokers), set(), deadline, since=since)

    def wait_deregistered(self, gone: set[int], deadline: Deadline) -> None:
        self._wait(set(), gone, deadline)

    def _wait(self, present: set[int], absent: set[int], deadline: Deadline, *, since: dict[int, int] | None = None) -> None:
        """Wait until ``present`` are in the cluster metadata (and, those launched at ``since``,
        finished start-up) and ``absent`` are not; fail early when a process of ``present``
        exits."""
        from kops.sandbox import probe

        cfg, st = self.config, self.state
        since = since or {}
        last: object = None
        while True:
            for c in cfg.controller_ids:
                if not self.nodes.running(c) and st.key(c) in st.started_now:
                    raise ClusterError(f"KRaft controller {c} exited during start-up",
                                       details=[self.nodes.why_not_running(c), *failure_details(cfg, c)])
            live = self.live_brokers(absent)
            ids: set[int] = set()
            if live:
                try:
                    ids, _ = probe.kafka_cluster(",".join(f"{cfg.host}:{cfg.broker_port(b)}" for b in live),
                                                 timeout_s=max(1.0, min(5.0, deadline.left())),
                                                 client_config=self.client_config())
                    last = sorted(ids)
                except Exception as e:  # noqa: BLE001
                    last = f"{type(e).__name__}: {e}"
            started = all(self.startup_complete(b) for b in since if b in present)
            if present <= ids and not (absent & ids) and started:
                return
            fail_if_exited(self.nodes.running, cfg, sorted(present - ids), "joined the cluster")
            behind = (present - ids) | (absent & ids) | {b for b in since if b in present and not self.startup_complete(b)}
            if deadline.passed(behind or present):
                late = sorted(present - ids) or sorted(absent & ids) or sorted(behind) or sorted(since)
                b = late[0]
                raise ClusterError(
                    f"KRaft cluster not ready in time: want brokers {sorted(present)} in the metadata and "
                    f"{sorted(absent)} gone; last seen {last} (broker {b} log: {cfg.log_dir(b)}/server.log)",
                    details=failure_details(cfg, b),
                )
            time.sleep(0.3)

    def require_running(self) -> None:
        if not any(self.nodes.running(c) for c in self.config.controller_ids):
            raise ClusterError("the KRaft controllers are not running; run `kops sandbox up` to start everything")

    def refused_change(self, diff: set[str], data_kept: bool) -> str | None:
        refused = super().refused_change(diff, data_kept)
        if refused is None and "brokers" in diff and data_kept:
            return "changing the broker count of a stopped KRaft sandbox needs `kops sandbox down --purge` first"
        return refused


__all__ = ["KraftMode", "new_cluster_id"]
