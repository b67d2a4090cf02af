"""A sandbox's memory in its work dir: its configuration, its nodes' processes, the KRaft cluster
id and what its node engine records, in ``<workdir>/sandbox.json``, changed under
``<workdir>/.sandbox.lock``.

Several kops processes act on one sandbox (``kops sandbox up``, then ``kops sandbox stop
--broker 1`` from a playbook hook...): each reads the file under the lock before it changes
anything, and writes it whole (a reader never sees half of it).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kops.errors import BadInput
from kops.sandbox.config import SandboxConfig
from kops.sandbox.dist import file_lock
from kops.sandbox.nodes import STATE_VERSION, node_key, read_state

#: the keys of the state file this module writes; any other top-level key is the node engine's
#: (``SandboxState.extras``: the containerised engine's private dockerd and network faults)
BASE_KEYS = ("kops_sandbox", "mode", "kafka_version", "workdir", "bootstrap_servers", "zookeeper_connect",
             "cluster_id", "updated", "config", "processes")

Node = str | int


class SandboxState:
    """The configuration (brokers added or removed by another process taken over), the process
    records by node name (``zookeeper``, ``broker-3``, ``controller-1000``), the KRaft cluster id,
    the state file as last read (``recorded``) and the engine's own keys (``extras``)."""

    def __init__(self, config: SandboxConfig):
        self.config = config
        self.procs: dict[str, dict[str, Any]] = {}
        self.cluster_id: str | None = None
        self.recorded: dict[str, Any] | None = None
        self.extras: dict[str, Any] = {}
        self.started_now: list[str] = []  # nodes the last up()/start()/add() launched
        self.load()

    # -- the nodes ---------------------------------------------------------------------------------
    @property
    def workdir(self) -> Path:
        return self.config.workdir  # type: ignore[return-value]

    def key(self, node: Node) -> str:
        return node_key(node, self.config)

    def base_nodes(self) -> list[Node]:
        """ZooKeeper, or the KRaft controllers (both during a ZooKeeper -> KRaft migration): what
        the brokers need running first."""
        return (["zookeeper"] if self.config.mode == "zookeeper" else []) + list(self.config.controller_ids)

    def nodes(self) -> list[Node]:
        return [*self.base_nodes(), *self.config.broker_ids]

    def recorded_nodes(self) -> list[Node]:
        """Every node a process is recorded for (brokers removed since included)."""
        return ["zookeeper" if key == "zookeeper" else int(key.partition("-")[2]) for key in self.procs]

    def port_of(self, node: Node) -> int:
        if node == "zookeeper":
            return self.config.zookeeper_port
        if node in self.config.controller_ids:
            return self.config.controller_port(int(node))
        return self.config.broker_port(int(node))

    def check_broker(self, broker_id: int) -> None:
        if broker_id not in self.config.broker_ids:
            raise BadInput(f"no broker {broker_id} in the sandbox; brokers: {self.config.broker_ids}")

    def launched_ms(self, brokers: list[int]) -> dict[int, int]:
        """When each of ``brokers`` was last launched (ms since the epoch)."""
        return {b: self.procs[self.key(b)]["launched_ms"] for b in brokers}

    # -- the file ----------------------------------------------------------------------------------
    def load(self) -> None:
        state = read_state(self.workdir)
        self.recorded = state
        self.procs = dict(state.get("processes", {})) if state else {}
        self.cluster_id = state.get("cluster_id") if state else None
        self.extras = {k: v for k, v in (state or {}).items() if k not in BASE_KEYS}
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
        self._adopt_migration(recorded)
        self._adopt_versions(recorded)
        self._adopt_controllers(recorded)

    def _adopt_controllers(self, recorded: dict[str, Any]) -> None:
        """Controllers added to or removed from a dynamic quorum since this object was made
        (``kops sandbox controller add / remove`` in another process, a playbook's hook)."""
        cfg = self.config
        if not (cfg.dynamic_quorum and recorded.get("dynamic_quorum")):
            return
        probe = cfg.with_(extra_controllers=recorded.get("extra_controllers") or {},
                          removed_controllers=recorded.get("removed_controllers") or ())
        if (probe.extra_controllers, probe.removed_controllers) != (cfg.extra_controllers, cfg.removed_controllers):
            self.config = probe

    def _adopt_versions(self, recorded: dict[str, Any]) -> None:
        """Nodes upgraded to another Kafka since this object was made (``kops sandbox upgrade``
        in another process, a playbook's hook): the same sandbox's nodes run what was recorded."""
        cfg = self.config
        if recorded.get("kafka_version") != cfg.kafka_version:
            return
        versions = {int(n): str(v) for n, v in (recorded.get("node_versions") or {}).items()}
        if versions != dict(cfg.node_versions):
            self.config = cfg.with_(node_versions=versions)

    def _adopt_migration(self, recorded: dict[str, Any]) -> None:
        """A ZooKeeper -> KRaft migration moved on in another process (``kops sandbox migration
        ...``): this object's ZooKeeper sandbox takes over the recorded migration (controllers,
        brokers' phases; after finalization KRaft mode). Another mode or Kafka is ``up``'s to
        report, never taken over."""
        cfg = self.config
        if not (recorded.get("migration") or cfg.migration) or cfg.mode != "zookeeper":
            return  # no migration on either side (a rolled back one: this object's migration ends)
        if recorded.get("kafka_version") != cfg.kafka_version:
            return
        keys = ("mode", "migration", "broker_phases", "controllers", "controller_ports", "controller_base_port")
        changes = {k: recorded.get(k) for k in keys if k in recorded}
        adopted = cfg.with_(**changes)
        if adopted != cfg:
            self.config = adopted

    def document(self) -> dict[str, Any]:
        cfg = self.config
        return {
            "kops_sandbox": STATE_VERSION,
            "mode": cfg.mode,
            "kafka_version": cfg.kafka_version,
            "workdir": str(self.workdir),
            "bootstrap_servers": cfg.bootstrap_servers,
            "zookeeper_connect": cfg.zookeeper_connect,
            "cluster_id": self.cluster_id,
            "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "config": cfg.to_dict(),
            "processes": self.procs,
            **{k: v for k, v in self.extras.items() if v},
        }

    def save(self) -> None:
        """Write the state file at once (a reader never sees half of it). A change made outside
        ``up``, ``start``, ``stop``... goes through :meth:`updating`."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        tmp = self.config.state_file.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(self.document(), indent=2) + "\n")
        tmp.replace(self.config.state_file)

    @contextmanager
    def updating(self) -> Iterator[None]:
        """Read, change and write the state file under the sandbox lock: another process (``kops
        sandbox restart`` from a playbook hook, ``kops sandbox slow``) may have changed it since
        this object last read it, and writing what this object remembers would undo that."""
        with self.lock():
            self.load()
            yield
            self.save()

    def lock(self, timeout_s: float = 300.0):
        self.workdir.mkdir(parents=True, exist_ok=True)
        return file_lock(self.workdir / ".sandbox.lock", timeout_s=timeout_s, what="sandbox lock")

    def purge(self) -> None:
        """Delete the sandbox's files in its work dir (configs, data, logs, the state file) and
        forget what they recorded. Other files in the work dir stay."""
        wd = self.workdir
        names = ["config", "zookeeper", "sandbox.json", "security"]
        names += [p.name for p in wd.glob("broker-*")] + [p.name for p in wd.glob("controller-*")]
        for name in names:
            p = wd / name
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            elif p.exists():
                p.unlink()
        self.procs = {}
        self.cluster_id = None
        self.extras = {}


__all__ = ["BASE_KEYS", "Node", "SandboxState"]
