"""A dynamic KRaft quorum's controllers (KIP-853, ``kops sandbox up --dynamic-quorum``): start a
new controller, which joins as an observer of the metadata log, and take one out for good. The
``replace-controller`` playbook's hooks in tests (``sb.quorum``); making an observer a voter and
a voter an ex-voter is the playbook's (AddRaftVoter, RemoveRaftVoter), as it is an operator's
with ``kafka-metadata-quorum.sh add-controller / remove-controller``.

A controller added here is formatted with ``kafka-storage.sh format --no-initial-controllers``
(the cluster's id, a directory id of its own) and started with the quorum's
``controller.quorum.bootstrap.servers``; the others' properties list it too, for their next
start."""

from __future__ import annotations

import time
from typing import Any

from kops.errors import BadInput, ClusterError
from kops.sandbox import procs
from kops.sandbox.configs import write_node_configs
from kops.sandbox.deadline import Deadline
from kops.sandbox.readiness import wait_controllers


class SandboxQuorum:
    """The dynamic quorum's verbs of one sandbox (the module doc); ``sb.quorum``."""

    def __init__(self, sandbox: Any):
        self.sb = sandbox  # the kops.sandbox.cluster.Sandbox whose verbs these are

    def _require_dynamic(self) -> None:
        cfg = self.sb.config
        if not cfg.dynamic_quorum:
            raise BadInput(f"the sandbox in {self.sb.workdir} has no dynamic KRaft quorum (mode {cfg.mode}): "
                           "controllers are added and removed on one made with `kops sandbox up --mode kraft "
                           "--dynamic-quorum` (Kafka 3.9+, KIP-853)")

    def next_controller_id(self) -> int:
        """An id from 1000 the sandbox never gave a controller."""
        cfg = self.sb.config
        used = {*cfg.base_controller_ids, *cfg.extra_controllers, *cfg.removed_controllers}
        return max(used, default=999) + 1

    def add_controller(self, node_id: int | None = None, *, port: int | None = None,
                       timeout_s: float | None = None) -> dict[str, Any]:
        """Format and start a new controller (``node_id``: default :meth:`next_controller_id`;
        ``port``: default a free one) and wait until it logged its start and the quorum's leader
        lists it as an observer. Returns its id, endpoint and directory id. A controller added
        already and running is only waited for (a hook run again). BadInput (nothing changed) on
        a static quorum, for an id in use or a port taken."""
        sb, st = self.sb, self.sb.state
        timeout_s = timeout_s or sb.config.start_timeout_s
        deadline = Deadline(sb.config.log_dir, timeout_s)
        st.started_now = []
        with st.lock():
            st.load()
            self._require_dynamic()
            cfg = sb.config
            node_id = self.next_controller_id() if node_id is None else int(node_id)
            if not (node_id in cfg.extra_controllers and node_id in cfg.controller_ids):
                if node_id in cfg.controller_ids or node_id in cfg.broker_ids or node_id in cfg.removed_controllers:
                    raise BadInput(f"id {node_id} is taken (controllers {cfg.controller_ids}, brokers {cfg.broker_ids}"
                                   f"{', removed controllers ' + str(list(cfg.removed_controllers)) if cfg.removed_controllers else ''})")
                port = port if port is not None else procs.free_ports(1, cfg.host)[0]
                if procs.port_in_use(cfg.host, port):
                    raise BadInput(f"--port {port} is in use on {cfg.host}; pick another port")
                sb.meta.require_running()
                old = cfg
                sb.config = cfg.with_(extra_controllers={**cfg.extra_controllers, node_id: port}).validate()
                try:
                    write_node_configs(st, sb.nodes, sb.meta)
                    st.save()
                    sb.meta.format_storage([node_id], deadline)
                    sb.log(f"starting KRaft controller {node_id} on port {port} (an observer until it is added "
                           "to the quorum)")
                    sb.nodes.launch(node_id)
                except BaseException:
                    sb.nodes.signal_and_wait([node_id], 9, time.monotonic() + 10, 10)
                    sb.config = old
                    write_node_configs(st, sb.nodes, sb.meta)
                    st.save()
                    raise
            elif not sb.nodes.running(node_id):
                sb.nodes.launch(node_id)
        cfg = sb.config
        if st.key(node_id) in st.started_now:
            wait_controllers(st, sb.nodes, [node_id], deadline)
        self._wait_observer(node_id, deadline)
        return {"id": node_id, "host": cfg.host, "port": cfg.controller_port(node_id), "listener": "CONTROLLER",
                "directory_id": sb.meta.directory_id(node_id)}

    def _wait_observer(self, node_id: int, deadline: Deadline) -> None:
        """Until the quorum's leader lists ``node_id`` among its replicas (an observer, or a voter
        already) with a log end offset."""
        from kops.cluster.connection import Connection
        from kops.cluster.topology import read_quorum

        sb, last = self.sb, "no answer"
        with Connection(sb.bootstrap_servers, sb.client_config(), timeout_s=10) as conn:
            while True:
                try:
                    q = read_quorum(conn)
                    last = f"voters {[v.id for v in q.voters]}, observers {[o.id for o in q.observers]}"
                    if any(r.id == node_id and r.log_end_offset >= 0 for r in (*q.voters, *q.observers)):
                        return
                except ClusterError as e:
                    last = e.message
                if not sb.nodes.running(node_id):
                    raise ClusterError(f"KRaft controller {node_id} exited", details=sb.failure_details(node_id))
                if deadline.passed([node_id]):
                    raise ClusterError(f"KRaft controller {node_id} did not join the quorum as an observer in time "
                                       f"({last})", details=sb.failure_details(node_id))
                time.sleep(0.3)

    def remove_controller(self, node_id: int, *, force: bool = False, timeout_s: float | None = None) -> bool:
        """Stop a controller (gracefully; SIGKILL at the stop timeout) and take it out of the
        sandbox for good; its data and logs stay. Refused (BadInput, nothing changed) while the
        quorum's leader still counts it a voter -- remove it from the voter set first
        (RemoveRaftVoter: the replace-controller playbook) -- unless ``force`` (a voter lost, as a
        dead machine would be). Returns whether it was running."""
        sb, st = self.sb, self.sb.state
        with st.lock():
            st.load()
            self._require_dynamic()
            cfg = sb.config
            if node_id not in cfg.controller_ids:
                raise BadInput(f"no controller {node_id} in the sandbox (controllers {cfg.controller_ids})")
            if len(cfg.controller_ids) == 1:
                raise BadInput(f"controller {node_id} is the sandbox's last controller")
            if not force:
                voters = self._voters()
                if node_id in voters:
                    raise BadInput(f"controller {node_id} is still a voter of the quorum (voters {sorted(voters)}): "
                                   "remove it from the voter set first (RemoveRaftVoter: `kops playbook run "
                                   "replace-controller`), or --force to take it away as a failed machine would go")
            stop_s = timeout_s or cfg.stop_timeout_s
            was_running = sb.nodes.running(node_id)
            sb.nodes.signal_and_wait([node_id], 15, time.monotonic() + stop_s, stop_s)
            st.procs.pop(st.key(node_id), None)
            sb.config = cfg.with_(removed_controllers=[*cfg.removed_controllers, node_id]).validate()
            write_node_configs(st, sb.nodes, sb.meta)
            st.save()
            sb.log(f"KRaft controller {node_id} removed from the sandbox; its data and logs stay in "
                   f"{cfg.node_dir(node_id)}")
        return bool(was_running)

    def _voters(self) -> set[int]:
        from kops.cluster.connection import Connection
        from kops.cluster.topology import read_quorum

        sb = self.sb
        try:
            with Connection(sb.bootstrap_servers, sb.client_config(), timeout_s=10) as conn:
                return {v.id for v in read_quorum(conn).voters}
        except ClusterError as e:
            raise BadInput(f"cannot read the quorum's voters to check that this controller is not one ({e.message}); "
                           "--force takes it away anyway") from None


__all__ = ["SandboxQuorum"]
