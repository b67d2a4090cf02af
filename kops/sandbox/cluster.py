"""A real local multi-rack Kafka cluster: ZooKeeper + N brokers (Kafka 3.9, default) or a KRaft
controller quorum + N brokers (Kafka 4.x), as detached JVM processes on 127.0.0.1.

State (mode, config, pids, ports, racks) is kept in ``<workdir>/sandbox.json`` so separate
processes (``kops sandbox up`` then ``kops sandbox stop --broker 1``) act on the same cluster;
:meth:`Sandbox.attach` loads it.  Mutating operations take ``<workdir>/.sandbox.lock``.

Work directory layout::

    sandbox.json                  state (see Sandbox.to_dict)
    config/                       zookeeper.properties, broker-<id>.properties, log4j.properties
    zookeeper/{data,logs,console.out}
    broker-<id>/data/             log.dirs of the broker
    broker-<id>/logs/             server.log, state-change.log, controller.log, ... (log4j)
    broker-<id>/console.out       JVM stdout/stderr (WARN and above, crashes)
    controller-<id>/...           KRaft controllers (mode="kraft")
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kops.errors import BadInput, ClusterError
from kops.sandbox import dist, procs
from kops.sandbox.config import SandboxConfig, default_workdir, render_properties
from kops.sandbox.dist import file_lock

STATE_VERSION = 1
Log = Callable[[str], None]


def _nolog(_msg: str) -> None:
    pass


@dataclass(frozen=True)
class NodeStatus:
    """One process of the sandbox, as :meth:`Sandbox.status` reports it."""

    name: str  # "zookeeper", "broker-1", "controller-1000"
    role: str  # zookeeper | broker | controller
    id: int | None
    rack: str | None
    port: int
    pid: int | None
    running: bool  # our JVM process runs
    registered: bool | None  # broker: in /brokers/ids (ZK) / cluster metadata (KRaft); else None
    alive: bool  # running and (brokers) registered
    controller: bool = False  # this broker is the active controller (ZooKeeper mode)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _node_key(node: str | int, cfg: SandboxConfig) -> str:
    if node == "zookeeper":
        return "zookeeper"
    if isinstance(node, int) and node in cfg.controller_ids:
        return f"controller-{node}"
    return f"broker-{int(node)}"


class Sandbox:
    """A local Kafka cluster in one work directory.

    >>> sb = Sandbox(SandboxConfig(workdir="/tmp/kops-sb")).up()   # doctest: +SKIP
    >>> sb.bootstrap_servers                                       # doctest: +SKIP
    '127.0.0.1:9092,127.0.0.1:9093,...'
    >>> sb.stop(rack="b"); sb.start(rack="b"); sb.down()           # doctest: +SKIP
    """

    def __init__(self, config: SandboxConfig | None = None, *, log: Log | None = None, **overrides: Any):
        cfg = config or SandboxConfig()
        if overrides:
            cfg = cfg.with_(**overrides)
        self.config = cfg.validate()
        self.log: Log = log or _nolog
        self.started_now: list[str] = []  # nodes the last up()/start() launched
        self._procs: dict[str, dict[str, Any]] = {}
        self._cluster_id: str | None = None
        self._load_state()

    # -- construction ----------------------------------------------------------------------------
    @classmethod
    def attach(cls, workdir: str | Path | None = None, *, log: Log | None = None) -> Sandbox:
        """The sandbox recorded in ``workdir`` (default ``$KOPS_SANDBOX_DIR`` / ``~/.kops/sandbox``)."""
        wd = Path(workdir or default_workdir()).expanduser().absolute()
        state = _read_state(wd)
        if state is None:
            raise ClusterError(f"no sandbox in {wd} (start one with `kops sandbox up --workdir {wd}`)")
        cfg = SandboxConfig.from_dict({**state["config"], "workdir": str(wd)})
        return sandbox_class(cfg)(cfg, log=log)

    @classmethod
    def exists(cls, workdir: str | Path | None = None) -> bool:
        wd = Path(workdir or default_workdir()).expanduser().absolute()
        return _read_state(wd) is not None

    # -- plain properties ------------------------------------------------------------------------
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
        return self._cluster_id

    def rack_of(self, broker_id: int) -> str:
        self._check_broker(broker_id)
        return self.racks[broker_id]

    def brokers_in_rack(self, rack: str) -> list[int]:
        ids = [b for b, r in self.racks.items() if r == rack]
        if not ids:
            raise BadInput(f"no rack {rack!r} in the sandbox; racks: {sorted(set(self.racks.values()))}")
        return sorted(ids)

    def broker_port(self, broker_id: int) -> int:
        self._check_broker(broker_id)
        return self.config.broker_port(broker_id)

    def broker_address(self, broker_id: int) -> str:
        return f"{self.config.host}:{self.broker_port(broker_id)}"

    def broker_log_dir(self, broker_id: int) -> Path:
        """Directory of the broker's log4j files: server.log, state-change.log, controller.log."""
        self._check_broker(broker_id)
        return self.config.log_dir(broker_id)

    def broker_data_dir(self, broker_id: int) -> Path:
        """The broker's ``log.dirs`` (partition data)."""
        self._check_broker(broker_id)
        return self.config.data_dir(broker_id)

    def broker_properties_file(self, broker_id: int) -> Path:
        self._check_broker(broker_id)
        return self.config.properties_file(broker_id)

    def node_log_dir(self, node: str | int) -> Path:
        """Log dir of ``"zookeeper"``, a broker id or a KRaft controller id."""
        return self.config.log_dir(node)

    def _check_broker(self, broker_id: int) -> None:
        if broker_id not in self.config.broker_ids:
            raise BadInput(f"no broker {broker_id} in the sandbox; brokers: {self.config.broker_ids}")

    # -- state file ------------------------------------------------------------------------------
    def _load_state(self) -> None:
        state = _read_state(self.workdir)
        self._procs = dict(state.get("processes", {})) if state else {}
        self._cluster_id = state.get("cluster_id") if state else None
        self._recorded = state
        if state:
            self._adopt_membership(state.get("config") or {})

    def _adopt_membership(self, recorded: dict[str, Any]) -> None:
        """Brokers added or removed since this object was made (``kops sandbox add/remove`` in
        another process) are the work dir's truth: take them over, as long as the recorded
        sandbox has the same base shape (otherwise ``up`` reports the difference)."""
        cfg = self.config
        if (recorded.get("brokers"), recorded.get("first_broker_id", 0)) != (cfg.brokers, cfg.first_broker_id):
            return
        probe = cfg.with_(extra_brokers=recorded.get("extra_brokers") or {},
                          removed_brokers=recorded.get("removed_brokers") or ())
        if (probe.extra_brokers, probe.removed_brokers) != (cfg.extra_brokers, cfg.removed_brokers):
            self.config = probe

    def _save_state(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        doc = {
            "kops_sandbox": STATE_VERSION,
            "mode": self.mode,
            "kafka_version": self.kafka_version,
            "workdir": str(self.workdir),
            "bootstrap_servers": self.bootstrap_servers,
            "zookeeper_connect": self.zookeeper_connect,
            "cluster_id": self._cluster_id,
            "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "config": self.config.to_dict(),
            "processes": self._procs,
        }
        tmp = self.config.state_file.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(doc, indent=2) + "\n")
        tmp.replace(self.config.state_file)

    def _lock(self, timeout_s: float = 300.0):
        self.workdir.mkdir(parents=True, exist_ok=True)
        return file_lock(self.workdir / ".sandbox.lock", timeout_s=timeout_s, what="sandbox lock")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (what ``kops sandbox up --output json`` prints)."""
        return {
            "mode": self.mode,
            "kafka_version": self.kafka_version,
            "workdir": str(self.workdir),
            "bootstrap_servers": self.bootstrap_servers,
            "zookeeper_connect": self.zookeeper_connect,
            "cluster_id": self._cluster_id,
            "security": self.config.security,
            **({"security_files": self.security_files.client_files()} if self.config.secured else {}),
            "brokers": [
                {
                    "id": b,
                    "rack": self.racks[b],
                    "address": self.broker_address(b),
                    "log_dir": str(self.config.log_dir(b)),
                    "data_dir": str(self.config.data_dir(b)),
                }
                for b in self.broker_ids
            ],
            "controllers": [
                {"id": c, "address": f"{self.config.host}:{self.config.controller_port(c)}"}
                for c in self.controller_ids
            ],
        }

    # -- processes -------------------------------------------------------------------------------
    def _marker(self, node: str | int) -> str:
        return str(self.config.properties_file(node))

    def _pid(self, node: str | int) -> int | None:
        rec = self._procs.get(_node_key(node, self.config))
        return rec.get("pid") if rec else None

    def _running(self, node: str | int) -> bool:
        rec = self._procs.get(_node_key(node, self.config))
        if not rec or not rec.get("pid"):
            return False
        return procs.is_ours(rec["pid"], marker=self._marker(node), started=rec.get("started"))

    def _nodes(self) -> list[str | int]:
        first: list[str | int] = ["zookeeper"] if self.mode == "zookeeper" else list(self.controller_ids)
        return [*first, *self.broker_ids]

    def _port_of(self, node: str | int) -> int:
        if node == "zookeeper":
            return self.config.zookeeper_port
        if node in self.controller_ids:
            return self.config.controller_port(int(node))
        return self.config.broker_port(int(node))

    def _spawn(self, node: str | int, classpath: str) -> int:
        cfg = self.config
        for d in (cfg.log_dir(node), cfg.data_dir(node)):
            d.mkdir(parents=True, exist_ok=True)
        is_broker = node != "zookeeper" and node not in self.controller_ids
        cds, claim = dist.cds_flags(self.kafka_version, may_dump=is_broker)
        cmd = cfg.jvm_command(node, java=dist.java_executable(), classpath=classpath, cds=cds)
        env = dict(os.environ)
        for k in ("KAFKA_OPTS", "KAFKA_HEAP_OPTS", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS"):
            env.pop(k, None)
        server_log = cfg.log_dir(node) / "server.log"
        log_offset = server_log.stat().st_size if server_log.exists() else 0
        pid = procs.spawn(cmd, stdout_file=cfg.stdout_file(node), cwd=cfg.node_dir(node), env=env)
        if claim is not None:
            dist.cds_claimed(claim, pid)
        self._procs[_node_key(node, cfg)] = {
            "pid": pid,
            "started": procs.start_time(pid),
            "launched_ms": int(time.time() * 1000),
            "log_offset": log_offset,
            "port": self._port_of(node),
            "rack": cfg.rack_map.get(node) if isinstance(node, int) else None,
        }
        self._save_state()
        self.started_now.append(_node_key(node, cfg))
        return pid

    def _write_configs(self) -> None:
        cfg = self.config
        cfg.config_dir.mkdir(parents=True, exist_ok=True)
        if self.mode == "zookeeper":
            shutil.copyfile(dist.resource_path("log4j.properties"), cfg.log4j_file)
            cfg.properties_file("zookeeper").write_text(
                render_properties(cfg.zookeeper_properties(), "kops sandbox: ZooKeeper (generated)")
            )
        else:
            shutil.copyfile(dist.resource_path("log4j2.yaml"), cfg.log4j_file)
            for c in self.controller_ids:
                cfg.properties_file(c).write_text(
                    render_properties(cfg.controller_properties(c), f"kops sandbox: KRaft controller {c} (generated)")
                )
        secrets = None
        if cfg.secured:
            from kops.sandbox import security

            secrets = security.write_security_files(cfg.security, cfg.security_files, cfg.host,
                                                    names=self.certificate_names())
        for b in self.broker_ids:
            text = render_properties(cfg.broker_properties(b, secrets), f"kops sandbox: broker {b} (generated)")
            if secrets is not None:  # holds the inter-broker SCRAM password: 0600
                from kops.sandbox.security import write_private

                write_private(cfg.properties_file(b), text)
            else:
                cfg.properties_file(b).write_text(text)

    # -- security (kops.sandbox.security) ------------------------------------------------------
    def certificate_names(self) -> tuple[str, ...]:
        """Host names the brokers' certificate carries besides the sandbox's host and localhost
        (the containerised sandbox adds its nodes' names)."""
        return ()

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

    def _zk_sasl(self) -> dict[str, str] | None:
        if not self.config.secured:
            return None
        from kops.sandbox import security

        s = security.load_secrets(self.security_files)
        if s is None:
            raise ClusterError(f"the secured sandbox in {self.workdir} has no {self.security_files.secrets}")
        return security.zk_sasl_options(security.ZK_USER, s.zk_password)

    def client_conf(self) -> dict[str, str]:
        """librdkafka settings of the admin user (empty when not secured)."""
        if not self.config.secured:
            return {}
        from kops.cluster.config import ClientConfig

        return ClientConfig.load(str(self.security_files.admin_properties)).librdkafka()

    def _failure_details(self, node: str | int, lines: int = 25) -> list[str]:
        """The first error of the last run (the cause, above any stack trace) and the tails of
        the node's server.log and console.out."""
        cfg = self.config
        out: list[str] = []
        cause = None
        for f in (cfg.log_dir(node) / "server.log", cfg.stdout_file(node)):
            recent = procs.tail(f, 400)
            for i, line in enumerate(recent):
                if (" ERROR " in line or " FATAL " in line) and cause is None:
                    cause = line
                    if i + 1 < len(recent) and not recent[i + 1].startswith("["):
                        cause += " -- " + recent[i + 1].strip()  # the exception's message
                elif line.startswith("# A fatal error has been detected") and cause is None:  # a JVM crash
                    what = next((x for x in recent[i + 1 : i + 4] if x.strip("# \n")), "")
                    cause = f"{line.strip('# ')} {what.strip('# ')}".strip()
            t = recent[-lines:]
            if t:
                out.append(f"--- last lines of {f}:")
                out.extend(t)
        if cause:
            out.insert(0, f"first error: {cause}")
        return out or [f"(no log output in {cfg.node_dir(node)})"]

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
                f"{_node_key(n, self.config)} port {self._port_of(n)}"
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
        nodes = [n for n in self._nodes() if _node_key(n, self.config) in self.started_now]
        for n in nodes:
            pid = self._pid(n)
            if pid:
                procs.terminate([pid], marker=self._marker(n), timeout_s=5.0, kill=True)
            self._procs.pop(_node_key(n, self.config), None)
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
                details=[_describe_diff(k, old, self.config) for k in diff],
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
                if needle in line and _log_time(line) >= launched - 2:
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
                                                conf=self.client_conf())
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
                    self.log(f"stopping {', '.join(_node_key(n, self.config) for n in running)}")
                batches = self._shutdown_batches(running) if group is brokers and running else [running]  # type: ignore[arg-type]
                for batch in batches:
                    self._signal_and_wait(batch, 15, t_end, timeout_s)
                stopped.extend(_node_key(n, self.config) for n in running)
                for n in group:
                    self._procs.pop(_node_key(n, self.config), None)
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
            key = _node_key(n, self.config)
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
                self.log(f"{_node_key(n, self.config)} did not stop within {timeout_s:.0f}s: SIGKILL")
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

    # -- context manager -------------------------------------------------------------------------
    def __enter__(self) -> Sandbox:
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down()

    def __repr__(self) -> str:
        return f"Sandbox(mode={self.mode!r}, workdir={str(self.workdir)!r}, bootstrap={self.bootstrap_servers!r})"


def _describe_diff(key: str, old: SandboxConfig, new: SandboxConfig) -> str:
    if key == "racks":
        return f"racks: running {old.rack_map}, asked {new.rack_map}"
    if key == "ports":
        return f"ports: running {old.all_ports()}, asked {new.all_ports()}"
    return f"{key}: running {getattr(old, key)!r}, asked {getattr(new, key)!r}"


def _log_time(line: str) -> float:
    """Epoch seconds of a ``[2026-01-02 03:04:05,678] ...`` log4j line (local time); 0 if none."""
    if not line.startswith("[") or len(line) < 25:
        return 0.0
    try:
        t = time.strptime(line[1:20], "%Y-%m-%d %H:%M:%S")
        return time.mktime(t) + int(line[21:24]) / 1000.0
    except ValueError:
        return 0.0


def _read_state(workdir: Path) -> dict[str, Any] | None:
    f = workdir / "sandbox.json"
    try:
        doc = json.loads(f.read_text())
    except FileNotFoundError:
        return None
    except ValueError as e:
        raise ClusterError(f"the sandbox state file {f} is unreadable ({e}); remove it to start afresh") from None
    if not isinstance(doc, dict) or doc.get("kops_sandbox") != STATE_VERSION or "config" not in doc:
        raise ClusterError(f"{f} is not a kops sandbox state file (version {STATE_VERSION})")
    return doc


def open_sandbox(workdir: str | Path | None = None, *, log: Log | None = None, **overrides: Any) -> Sandbox:
    """The sandbox for ``kops sandbox up``: the recorded config of ``workdir`` (if any) with
    ``overrides`` (only the settings the user gave) on top; defaults otherwise."""
    wd = Path(workdir or default_workdir()).expanduser().absolute()
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if "base_port" in overrides:
        overrides.setdefault("broker_ports", None)
    if "controller_base_port" in overrides:
        overrides.setdefault("controller_ports", None)
    state = _read_state(wd)
    if state is not None:
        base = SandboxConfig.from_dict({**state["config"], "workdir": str(wd)})
        if "mode" in overrides and overrides["mode"] != base.mode and "kafka_version" not in overrides:
            overrides["kafka_version"] = None  # the new mode's default version
        if "brokers" in overrides and overrides["brokers"] != base.brokers:
            overrides.setdefault("racks", None)
            overrides.setdefault("broker_ports", None)
            overrides.setdefault("extra_brokers", {})
            overrides.setdefault("removed_brokers", ())
        cfg = base.with_(**overrides) if overrides else base
        return sandbox_class(cfg)(cfg, log=log)
    if overrides.get("mode") == "kraft" and "kafka_version" not in overrides:
        overrides["kafka_version"] = None
    cfg = SandboxConfig(workdir=wd, **overrides)
    return sandbox_class(cfg)(cfg, log=log)


def sandbox_class(cfg: SandboxConfig) -> type[Sandbox]:
    """:class:`Sandbox` (local JVMs) or, for ``engine="docker"``, the containerised one."""
    if cfg.engine == "docker":
        from kops.sandbox.containers import DockerSandbox

        return DockerSandbox
    return Sandbox
