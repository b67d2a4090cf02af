"""A rolling upgrade of the sandbox's Kafka, node by node (``kops sandbox upgrade``), for the
``upgrade`` playbook's hooks: a broker (``upgrade_command``) or the KRaft controllers one at a
time (``controllers_command``) stopped gracefully and started again on another Kafka version's
jars, with their config and data. Which node runs which Kafka is the sandbox's state
(``SandboxConfig.node_versions``), so ``start``, ``restart`` and ``status`` keep it.

Only the binaries change here: the metadata.version stays where it was until the playbook (or
``kops cluster features upgrade``) raises it, as Kafka's upgrade procedure has it -- until then
each node can go back to the old version the same way."""

from __future__ import annotations

import time
from typing import Any

from kops.errors import BadInput, ClusterError
from kops.sandbox import dist
from kops.sandbox.configs import write_node_configs
from kops.sandbox.deadline import Deadline
from kops.sandbox.readiness import wait_controllers


class SandboxUpgrade:
    """The upgrade verbs of one sandbox (see the module doc); ``sb.upgrade``."""

    def __init__(self, sandbox: Any):
        self.sb = sandbox  # the kops.sandbox.cluster.Sandbox whose verbs these are

    def _with_version(self, nodes: list[int], version: str):
        """The sandbox's config with ``nodes`` on Kafka ``version`` (BadInput, nothing changed,
        where it cannot be)."""
        cfg = self.sb.config
        versions = dict(cfg.node_versions)
        for n in nodes:
            if version == cfg.kafka_version:
                versions.pop(n, None)  # back to the sandbox's own Kafka
            else:
                versions[n] = version
        return cfg.with_(node_versions=versions).validate()

    def broker(self, broker_id: int, version: str, *, timeout_s: float | None = None) -> bool:
        """Upgrade (or downgrade) one broker to Kafka ``version``: its jars fetched first, then a
        controlled shutdown (SIGKILL after the stop timeout) and a start on the new jars that
        waits until it is registered again. Returns whether it was running. BadInput (nothing
        done) for a version that cannot run the sandbox's mode, a broker it does not have, the
        docker engine or a migration in progress."""
        sb, st = self.sb, self.sb.state
        with st.lock():
            st.load()
            st.check_broker(broker_id)
            self._with_version([broker_id], version)
        dist.ensure_kafka(version, log=sb.log)  # (before the broker goes down: it is down for the restart only)
        stopped = sb.stop(broker_id, timeout_s=timeout_s)
        with st.updating():
            sb.config = self._with_version([broker_id], version)
            write_node_configs(st, sb.nodes, sb.meta)
            sb.log(f"broker {broker_id}: Kafka {version}")
        sb.start(broker_id, timeout_s=timeout_s)
        return bool(stopped)

    def controllers(self, version: str, *, timeout_s: float | None = None) -> list[int]:
        """Upgrade the KRaft controllers to Kafka ``version``, one at a time: each stopped
        gracefully, started on the new jars, and waited for until it logged its start and has
        caught up with the quorum's high watermark (DescribeQuorum), so that the quorum never
        loses more than one voter. Controllers already on ``version`` are only waited for (a
        run that failed half-way can be run again). Returns the controllers restarted."""
        sb, st = self.sb, self.sb.state
        with st.lock():
            st.load()
            cfg = sb.config
            if cfg.mode != "kraft" or not cfg.controller_ids:
                raise BadInput(f"the sandbox in {sb.workdir} has no KRaft controllers (mode {cfg.mode}): upgrade "
                               "its brokers one by one with --broker")
            self._with_version(cfg.controller_ids, version)
        dist.ensure_kafka(version, log=sb.log)
        timeout_s = timeout_s or cfg.start_timeout_s
        done = []
        for c in cfg.controller_ids:
            deadline = Deadline(cfg.log_dir, timeout_s)
            with st.lock():
                st.load()
                if sb.config.version_of(c) != version or not sb.nodes.running(c):
                    sb.log(f"restarting KRaft controller {c} on Kafka {version}")
                    stop_s = sb.config.stop_timeout_s
                    sb.nodes.signal_and_wait([c], 15, time.monotonic() + stop_s, stop_s)
                    sb.config = self._with_version([c], version)
                    write_node_configs(st, sb.nodes, sb.meta)
                    st.save()
                    sb.nodes.launch(c)  # (its own jars: Nodes picks them by its version)
                    done.append(c)
            wait_controllers(st, sb.nodes, [c], deadline)
            self._wait_caught_up(c, deadline)
        return done

    def _wait_caught_up(self, c: int, deadline: Deadline) -> None:
        """Until the quorum has a leader and voter ``c``'s log reaches its high watermark."""
        from kops.cluster.connection import Connection
        from kops.cluster.topology import read_quorum

        sb, last = self.sb, "no answer"
        with Connection(sb.bootstrap_servers, sb.client_config(), timeout_s=10) as conn:
            while True:
                try:
                    q = read_quorum(conn)
                except ClusterError as e:
                    q, last = None, e.message
                if q is not None:
                    voter = next((v for v in q.voters if v.id == c), None)
                    if voter is None:
                        raise ClusterError(f"KRaft controller {c} is not a voter of the quorum "
                                           f"({[v.id for v in q.voters]})")
                    if q.leader >= 0 and q.lag(voter) == 0:
                        return
                    last = f"leader {q.leader}, its lag {q.lag(voter)}"
                if deadline.passed([c]):
                    raise ClusterError(f"KRaft controller {c} did not catch up with the quorum in time ({last})")
                time.sleep(0.5)


__all__ = ["SandboxUpgrade"]
