"""The fault verbs of a containerised sandbox, for game days and the fault lab (``Sandbox.faults``).

Brokers are named as :meth:`kops.sandbox.cluster.Sandbox.select` names them for ``stop`` and
``start`` (one broker, a rack, or a list); the work is done by the container engine: network faults
by :class:`kops.sandbox.netfaults.NetworkFaults`, small data disks and ZooKeeper or a controller
stopped on its own by :class:`kops.sandbox.containers.ContainerNodes`. A sandbox of local JVMs
refuses every verb with the flag it needs (``--engine docker``), but a failed log dir of a JBOD
broker (:mod:`kops.sandbox.logdirs`), which both engines have.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from kops.errors import BadInput
from kops.sandbox.state import Node

if TYPE_CHECKING:
    from pathlib import Path

    from kops.sandbox.containers import ContainerNodes
    from kops.sandbox.logdirs import LogDirFaults

Select = Callable[[int | None, str | None, Iterable[int] | None], list[int]]


class SandboxFaults:
    """Faults set on one sandbox: cut off, slowed, disk filled, ZooKeeper or a controller stopped."""

    def __init__(self, select: Select, containers: Callable[[], ContainerNodes], mode: str,
                 log_dirs: Callable[[], LogDirFaults] | None = None):
        self._select = select
        self._containers = containers
        self._mode = mode
        self._log_dirs = log_dirs

    def partition(self, broker: int | None = None, *, rack: str | None = None, from_host: bool = False) -> list[int]:
        """Cut brokers (one, or a rack) off from every other node of the cluster, both ways;
        with ``from_host`` also from this machine (clients here lose them too)."""
        return self._containers().faults.partition(self._select(broker, rack, None), from_host=from_host)

    def cut_host(self) -> None:
        """Cut this machine off from every node of the cluster, both ways, until :meth:`heal`; the
        nodes still reach each other (the host where kops runs loses the cluster)."""
        self._containers().faults.cut_host()

    def slow(self, broker: int | None = None, *, rack: str | None = None, delay_ms: float = 0.0,
             loss_pct: float = 0.0) -> list[int]:
        """Delay by ``delay_ms`` and drop ``loss_pct`` % of the packets the brokers send."""
        return self._containers().faults.slow(self._select(broker, rack, None), delay_ms=delay_ms, loss_pct=loss_pct)

    def slow_node(self, node: int, *, delay_ms: float = 0.0, loss_pct: float = 0.0) -> None:
        """:meth:`slow` for a KRaft controller (its id): what it sends to the quorum and the
        brokers is delayed; :meth:`heal` ends it."""
        nodes = self._containers()
        if self._mode != "kraft":
            raise BadInput("only a KRaft sandbox has controllers of its own: slow brokers with slow()")
        nodes.faults.slow([node], delay_ms=delay_ms, loss_pct=loss_pct)

    def heal(self) -> int:
        """Remove every partition, host cut and slow link; returns how many faults were removed."""
        return self._containers().faults.heal()

    def fill_disk(self, broker: int, *, leave_bytes: int) -> int:
        """Fill the small data disk of ``broker`` until ``leave_bytes`` are free; returns the bytes taken."""
        return self._containers().fill_disk(broker, leave_bytes=leave_bytes)

    def release_disk(self, broker: int) -> bool:
        """Give back what :meth:`fill_disk` took; False when nothing was taken."""
        return self._containers().release_disk(broker)

    def disk_usage(self, broker: int) -> tuple[int, int]:
        """``(total, free)`` bytes of the small data disk of ``broker``."""
        return self._containers().disk_usage(broker)

    def fail_log_dir(self, broker: int, index: int | None = None, *, timeout_s: float = 60.0) -> Path:
        """Make log dir ``index`` (default the last) of a JBOD broker (``--log-dirs N``) fail for
        real, both engines; returns the dir once the broker reports it offline
        (:class:`kops.sandbox.logdirs.LogDirFaults`)."""
        return self._log_dir_faults().fail(broker, index, timeout_s=timeout_s)

    def restore_log_dirs(self, broker: int, *, timeout_s: float = 120.0) -> list[Path]:
        """Put the failed log dirs of ``broker`` back and restart it (a running one) until it
        reports every dir online; returns the dirs restored."""
        return self._log_dir_faults().restore(broker, timeout_s=timeout_s)

    def offline_log_dirs(self, broker: int) -> list[str] | None:
        """The log dirs ``broker`` reports offline (DescribeLogDirs); None when it does not answer."""
        return self._log_dir_faults().offline(broker)

    def _log_dir_faults(self) -> LogDirFaults:
        if self._log_dirs is None:
            raise BadInput("log-dir faults need the sandbox itself")
        return self._log_dirs()

    def stop_node(self, node: Node, *, kill: bool = False, timeout_s: float = 60.0) -> None:
        """Stop ZooKeeper (``"zookeeper"``) or a KRaft controller (its id); brokers: ``Sandbox.stop``."""
        self._containers().stop_node(node, kill=kill, timeout_s=timeout_s)

    def start_node(self, node: Node, *, timeout_s: float = 60.0) -> None:
        """Start ZooKeeper or a KRaft controller stopped by :meth:`stop_node` again; wait until it serves."""
        self._containers().start_node(node, timeout_s=timeout_s)

    def restart_zookeeper(self, *, down_s: float = 0.0, kill: bool = False, timeout_s: float = 60.0) -> None:
        """Stop ZooKeeper, keep it down ``down_s`` seconds, start it again and wait for it."""
        if self._mode != "zookeeper":
            raise BadInput("a KRaft sandbox has no ZooKeeper")
        self.stop_node("zookeeper", kill=kill, timeout_s=timeout_s)
        time.sleep(down_s)
        self.start_node("zookeeper", timeout_s=timeout_s)


__all__ = ["SandboxFaults"]
