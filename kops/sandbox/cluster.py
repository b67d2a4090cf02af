"""A real local multi-rack Kafka cluster: ZooKeeper + N brokers (Kafka 3.9, default) or a KRaft
controller quorum + N brokers (Kafka 4.x), as detached JVM processes on 127.0.0.1.

State (mode, config, pids, ports, racks) is kept in ``<workdir>/sandbox.json`` so separate
processes (``kops sandbox up`` then ``kops sandbox stop --broker 1``) act on the same cluster;
:func:`kops.sandbox.opening.attach` loads it.  Mutating operations take ``<workdir>/.sandbox.lock``.

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


from kops.sandbox.base import SandboxBase
from kops.sandbox.lifecycle import Lifecycle
from kops.sandbox.membership import Membership


class Sandbox(Membership, Lifecycle, SandboxBase):
    """A local Kafka cluster in one work directory.

    Its parts, each in its own module: :class:`~kops.sandbox.base.SandboxBase` (configuration,
    state, processes, security), :class:`~kops.sandbox.lifecycle.Lifecycle` (up, down, status),
    :class:`~kops.sandbox.membership.Membership` (stop, start, add, remove). Open the sandbox a
    work directory holds with :func:`kops.sandbox.opening.attach`.

    >>> sb = Sandbox(SandboxConfig(workdir="/tmp/kops-sb")).up()   # doctest: +SKIP
    >>> sb.bootstrap_servers                                       # doctest: +SKIP
    '127.0.0.1:9092,127.0.0.1:9093,...'
    >>> sb.stop(rack="b"); sb.start(rack="b"); sb.down()           # doctest: +SKIP
    """

    # -- context manager -------------------------------------------------------------------------
    def __enter__(self) -> Sandbox:
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down()

    def __repr__(self) -> str:
        return f"Sandbox(mode={self.mode!r}, workdir={str(self.workdir)!r}, bootstrap={self.bootstrap_servers!r})"
