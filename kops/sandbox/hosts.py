"""Where a sandbox's nodes run: the node engine a :class:`kops.sandbox.cluster.Sandbox` holds.

:class:`Nodes` says what every engine does — launch a node (ZooKeeper, a KRaft controller, a
broker) and record its process in the state, tell whether it runs, signal it and wait, clean up
after ``down`` — and :class:`LocalNodes` does it with JVM processes on this machine
(``--engine jvm``, the default); :class:`kops.sandbox.containers.ContainerNodes` with containers
(``--engine docker``). What the cluster is made of (ZooKeeper or KRaft) is the metadata mode's
(:mod:`kops.sandbox.modes`), not the engine's.
"""

from __future__ import annotations

import os
import time
from typing import Any

from kops.sandbox import dist, logdirs, procs
from kops.sandbox.nodes import Log
from kops.sandbox.state import Node, SandboxState


class Nodes:
    """A node engine over one sandbox's state (see the module doc). Subclasses implement
    :meth:`prepare`, :meth:`_start`, :meth:`running`, :meth:`pid`, :meth:`signal_and_wait` and,
    where they differ from a local process, the hooks below them."""

    kind = "?"

    def __init__(self, state: SandboxState, log: Log):
        self.state = state
        self.log = log

    # -- what each engine does -----------------------------------------------------------------------
    def prepare(self) -> None:
        """Make ready what a launch needs (Kafka's jars; an image)."""
        raise NotImplementedError

    def _start(self, node: Node) -> dict[str, Any]:
        """Start the node's process (on the Kafka version the configuration gives it); return its
        identity for the state file (``pid`` ...)."""
        raise NotImplementedError

    def running(self, node: Node) -> bool:
        raise NotImplementedError

    def why_not_running(self, node: Node) -> str:
        """Why :meth:`running` says no (for an error message)."""
        return "not running"

    def pid(self, node: Node) -> int | None:
        rec = self.state.procs.get(self.state.key(node))
        return rec.get("pid") if rec else None

    def signal_and_wait(self, nodes: list[Node], sig: int, t_end: float, timeout_s: float) -> None:
        """Signal the running ones among ``nodes``; wait until they exit; SIGKILL at ``t_end``."""
        raise NotImplementedError

    # -- hooks (a local process needs none of them) ----------------------------------------------------
    def overrides(self, node: Node, secrets: Any = None) -> dict[str, str]:
        """Properties of ``node`` on top of the configuration's (where it listens, how it is reached)."""
        return {}

    def certificate_names(self) -> tuple[str, ...]:
        """Host names the brokers' certificate carries besides the sandbox's host and localhost."""
        return ()

    def after_launch(self, node: Node) -> None:
        """Called once a launched node is recorded."""

    def discard(self, keys: list[str]) -> None:
        """After a failed ``up``/``add``: stop the nodes it launched (named by ``keys``) and
        forget them (their logs stay)."""
        for key in keys:
            node: Node = "zookeeper" if key == "zookeeper" else int(key.partition("-")[2])
            pid = self.pid(node)
            if pid:
                procs.terminate([pid], marker=self.marker(node), timeout_s=5.0, kill=True)
            self.state.procs.pop(key, None)

    def cleanup(self) -> None:
        """After ``down`` stopped every node: remove what the engine made besides the processes."""

    def describe(self) -> dict[str, Any]:
        """What the engine adds to the sandbox's summary (``kops sandbox up --output json``)."""
        return {}

    # -- shared ----------------------------------------------------------------------------------------
    def marker(self, node: Node) -> str:
        """What identifies the node's process: its properties file on its command line."""
        return str(self.state.config.properties_file(node))

    def launch(self, node: Node) -> int:
        """Start ``node`` and record it (pid, launch time, where its server.log ended before);
        returns its pid."""
        st, cfg = self.state, self.state.config
        for d in (cfg.log_dir(node), *cfg.data_dirs(node)):
            if not logdirs.is_failed(d):  # a failed log dir stays failed (Kafka starts with it offline)
                d.mkdir(parents=True, exist_ok=True)
        server_log = cfg.log_dir(node) / "server.log"
        log_offset = server_log.stat().st_size if server_log.exists() else 0
        identity = self._start(node)
        st.procs[st.key(node)] = {
            **identity,
            "launched_ms": int(time.time() * 1000),
            "log_offset": log_offset,
            "port": st.port_of(node),
            "rack": cfg.rack_map.get(node) if isinstance(node, int) else None,
        }
        st.save()
        st.started_now.append(st.key(node))
        self.after_launch(node)
        return identity["pid"]


class LocalNodes(Nodes):
    """Each node a JVM process on this machine, detached, listening on 127.0.0.1."""

    kind = "jvm"

    def prepare(self) -> None:
        dist.ensure_kafka(self.state.config.kafka_version, log=self.log)

    def _start(self, node: Node) -> dict[str, Any]:
        cfg = self.state.config
        is_broker = node != "zookeeper" and node not in cfg.controller_ids
        version = cfg.version_of(node)  # (a node upgraded to another Kafka runs its own jars)
        dist.ensure_kafka(version, log=self.log)
        classpath = dist.kafka_classpath(version)
        cds, claim = dist.cds_flags(version, may_dump=is_broker)
        cmd = cfg.jvm_command(node, java=dist.java_executable(), classpath=classpath, cds=cds)
        env = dict(os.environ)
        for k in ("KAFKA_OPTS", "KAFKA_HEAP_OPTS", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS"):
            env.pop(k, None)
        pid = procs.spawn(cmd, stdout_file=cfg.stdout_file(node), cwd=cfg.node_dir(node), env=env)
        if claim is not None:
            dist.cds_claimed(claim, pid)
        return {"pid": pid, "started": procs.start_time(pid)}

    def running(self, node: Node) -> bool:
        rec = self.state.procs.get(self.state.key(node))
        if not rec or not rec.get("pid"):
            return False
        return procs.is_ours(rec["pid"], marker=self.marker(node), started=rec.get("started"))

    def why_not_running(self, node: Node) -> str:
        rec = self.state.procs.get(self.state.key(node)) or {}
        return procs.why_not_ours(rec.get("pid"), marker=self.marker(node), started=rec.get("started"))

    def signal_and_wait(self, nodes: list[Node], sig: int, t_end: float, timeout_s: float) -> None:
        pids = {n: self.pid(n) for n in nodes if self.running(n)}
        for pid in pids.values():
            procs.signal_pid(pid, sig)  # type: ignore[arg-type]
        for n, pid in pids.items():
            left = procs.wait_gone([pid], marker=self.marker(n), timeout_s=max(0.0, t_end - time.monotonic()))  # type: ignore[list-item]
            if left:
                self.log(f"{self.state.key(n)} did not stop within {timeout_s:.0f}s: SIGKILL")
                procs.terminate(left, marker=self.marker(n), timeout_s=10.0, kill=True)
        if pids:
            for version in self.state.config.versions:
                dist.finalize_cds(version)


__all__ = ["LocalNodes", "Nodes"]
