"""The core of a sandbox: configuration, state file, lock, its processes, its security files."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kops.errors import BadInput, ClusterError
from kops.sandbox import dist, procs
from kops.inputs.properties import render_properties
from kops.sandbox.config import SandboxConfig
from kops.sandbox.dist import file_lock
from kops.sandbox.nodes import STATE_VERSION, Log, node_key, nolog, read_state


class SandboxBase:
    """What every sandbox has: its configuration, its state file and lock, its processes
    (started, found, signalled) and its security files. Local JVM processes here; the containerised
    sandbox overrides the process methods."""

    def __init__(self, config: SandboxConfig | None = None, *, log: Log | None = None, **overrides: Any):
        cfg = config or SandboxConfig()
        if overrides:
            cfg = cfg.with_(**overrides)
        self.config = cfg.validate()
        self.log: Log = log or nolog
        self.started_now: list[str] = []  # nodes the last up()/start() launched
        self._procs: dict[str, dict[str, Any]] = {}
        self._cluster_id: str | None = None
        self._load_state()

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
        state = read_state(self.workdir)
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

    def _state_doc(self) -> dict[str, Any]:
        """What :meth:`_save_state` writes (engines add their own keys)."""
        return {
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

    def _save_state(self) -> None:
        """Write the state file at once (a reader never sees half of it). A change made outside
        :meth:`up`, :meth:`start`, :meth:`stop`... goes through :meth:`_updating_state`."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        tmp = self.config.state_file.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(self._state_doc(), indent=2) + "\n")
        tmp.replace(self.config.state_file)

    @contextmanager
    def _updating_state(self) -> Iterator[None]:
        """Read, change and write the state file under the sandbox lock: another process (``kops
        sandbox restart`` from a playbook hook, ``kops sandbox slow``) may have changed it since
        this object last read it, and writing what this object remembers would undo that."""
        with self._lock():
            self._load_state()
            yield
            self._save_state()

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
        rec = self._procs.get(node_key(node, self.config))
        return rec.get("pid") if rec else None

    def _running(self, node: str | int) -> bool:
        rec = self._procs.get(node_key(node, self.config))
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
        self._procs[node_key(node, cfg)] = {
            "pid": pid,
            "started": procs.start_time(pid),
            "launched_ms": int(time.time() * 1000),
            "log_offset": log_offset,
            "port": self._port_of(node),
            "rack": cfg.rack_map.get(node) if isinstance(node, int) else None,
        }
        self._save_state()
        self.started_now.append(node_key(node, cfg))
        return pid

    def _write_configs(self) -> None:
        cfg = self.config
        cfg.config_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(dist.resource_path(dist.log4j_resource(self.kafka_version)), cfg.log4j_file)
        if self.mode == "zookeeper":
            cfg.properties_file("zookeeper").write_text(
                render_properties(cfg.zookeeper_properties(), "kops sandbox: ZooKeeper (generated)")
            )
        else:
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

    def client_config(self):
        """The admin user's client settings (:class:`kops.cluster.config.ClientConfig`; empty
        when not secured)."""
        from kops.cluster.config import ClientConfig

        if not self.config.secured:
            return ClientConfig()
        return ClientConfig.load(str(self.security_files.admin_properties))

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
