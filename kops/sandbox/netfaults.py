"""Network faults of the containerised sandbox, for game days and the fault lab:

- :meth:`NetworkFaults.partition` cuts brokers (a rack) off from every other node of the cluster,
  both ways (iptables in the containers); the host still reaches them unless ``from_host``;
- :meth:`NetworkFaults.cut_host` cuts this machine off from every node while the nodes still
  reach each other: the host where kops runs loses the cluster, the cluster goes on;
- :meth:`NetworkFaults.slow` delays and drops a share of the packets they send (netem where the
  kernel has it; else iptables' statistic match for the loss and an NFQUEUE delayer for the
  delay);
- :meth:`NetworkFaults.heal` removes every fault.

Faults are recorded in the sandbox's state file (``faults``) and applied again to a container
that restarts, until healed.
"""

from __future__ import annotations

import shlex
from typing import Any, Protocol

from kops.errors import BadInput, ClusterError
from kops.sandbox.nodes import Log
from kops.sandbox.state import Node, SandboxState

FAULT_CHAIN = "KOPS-FAULT"
NFQUEUE_NUM = 7


class Containers(Protocol):
    """What the faults need of the containerised node engine (:class:`kops.sandbox.containers.ContainerNodes`)."""

    state: SandboxState
    log: Log

    def running(self, node: Node) -> bool: ...

    def ip(self, node: Node) -> str | None: ...

    def gateway(self) -> str | None: ...

    def exec(self, node: Node, cmd: list[str], *, check: bool = True, detach: bool = False) -> tuple[int, str]: ...


class NetworkFaults:
    """The faults of one containerised sandbox, kept in its state (``faults``)."""

    def __init__(self, nodes: Containers):
        self.nodes = nodes
        self.state = nodes.state

    def recorded(self) -> list[dict[str, Any]]:
        """The faults in force, as the state file records them."""
        return self.state.extras.setdefault("faults", [])

    def forget(self) -> None:
        """The containers are gone, and their faults with them."""
        self.state.extras["faults"] = []

    def partition(self, brokers: list[int], *, from_host: bool = False) -> list[int]:
        """Cut ``brokers`` off from every other node of the cluster, both ways; with ``from_host``
        also from this machine (clients here lose them too)."""
        if from_host and not self.nodes.gateway():  # (else the host's packets would still pass)
            raise ClusterError("cannot cut brokers off from this host: Docker names no gateway of the "
                               "sandbox's network (is any container running?)")
        with self.state.updating():
            self._check_running(brokers)
            self.recorded().append({"kind": "partition", "brokers": brokers, "from_host": bool(from_host)})
            self.apply()
        self.nodes.log(f"brokers {brokers} are cut off from the rest of the cluster"
                       + (" and from this host" if from_host else ""))
        return brokers

    def cut_host(self) -> None:
        """Cut this machine off from every node of the cluster (brokers, ZooKeeper, controllers),
        both ways; the nodes still reach each other: a client host (where kops runs) that loses
        the cluster, not a cluster that fails."""
        if not self.nodes.gateway():
            raise ClusterError("cannot cut this host off: Docker names no gateway of the sandbox's network "
                               "(is any container running?)")
        with self.state.updating():
            self.recorded().append({"kind": "host", "brokers": []})
            self.apply()
        self.nodes.log("this host is cut off from every node of the cluster")

    def slow(self, brokers: list[int], *, delay_ms: float = 0.0, loss_pct: float = 0.0) -> list[int]:
        """Delay by ``delay_ms`` and drop ``loss_pct`` % of the packets ``brokers`` send."""
        if delay_ms <= 0 and loss_pct <= 0:
            raise BadInput("give a --delay above 0 or a --loss above 0%")
        with self.state.updating():
            self._check_running(brokers)
            self.recorded().append({"kind": "slow", "brokers": brokers, "delay_ms": delay_ms, "loss_pct": loss_pct})
            self.apply()
        self.nodes.log(f"brokers {brokers}: {delay_ms:.0f} ms delay, {loss_pct:g}% loss on what they send")
        return brokers

    def _check_running(self, brokers: list[int]) -> None:
        """A fault set on a stopped broker would not bite: BadInput naming it, nothing recorded.
        Asked of the state just read under the lock (another process may have given a broker a
        new container since this object last read it)."""
        stopped = [b for b in brokers if not self.nodes.running(b)]
        if stopped:
            raise BadInput(f"brokers {stopped} are not running: a network fault aimed at them would not bite; "
                           "start them first (`kops sandbox start --broker ID`)")

    def heal(self) -> int:
        """Remove every partition, host cut and slow link; returns how many faults were removed."""
        with self.state.updating():
            n = len(self.recorded())
            self.forget()
            self.apply()
        return n

    def apply(self) -> None:
        """Make every running container's fault rules match the recorded faults."""
        running = [n for n in self.state.nodes() if self.nodes.running(n)]
        ips = {n: self.nodes.ip(n) for n in running}
        rules: dict[Any, list[list[str]]] = {n: [] for n in running}
        slow: dict[Any, tuple[float, float]] = {}
        gateway = self.nodes.gateway()
        for f in self.recorded():
            cut = [b for b in f["brokers"] if b in ips]
            if f["kind"] == "host":
                for n in running:
                    rules[n] += [["-s", gateway, "-j", "DROP"], ["-d", gateway, "-j", "DROP"]] if gateway else []
            elif f["kind"] == "partition":
                others = [n for n in running if n not in f["brokers"]]
                for b in cut:
                    for o in others:
                        if ips.get(o):
                            rules[b] += [["-s", ips[o], "-j", "DROP"], ["-d", ips[o], "-j", "DROP"]]
                            rules[o] += [["-s", ips[b], "-j", "DROP"], ["-d", ips[b], "-j", "DROP"]] if ips[b] else []
                    if f.get("from_host") and gateway:
                        rules[b] += [["-s", gateway, "-j", "DROP"], ["-d", gateway, "-j", "DROP"]]
            else:
                for b in cut:
                    slow[b] = (f["delay_ms"], f["loss_pct"])
        for n in running:
            self._set_rules(n, rules[n], *slow.get(n, (0.0, 0.0)))

    def _set_rules(self, node: Any, drops: list[list[str]], delay_ms: float, loss_pct: float) -> None:
        from kops.sandbox import image as img

        script = [
            f"iptables -N {FAULT_CHAIN} 2>/dev/null || iptables -F {FAULT_CHAIN}",
            f"iptables -C INPUT -j {FAULT_CHAIN} 2>/dev/null || iptables -I INPUT -j {FAULT_CHAIN}",
            f"iptables -C OUTPUT -j {FAULT_CHAIN} 2>/dev/null || iptables -I OUTPUT -j {FAULT_CHAIN}",
            f"pkill -f '^python3 {img.NETDELAY}' || true",
        ]
        script += [f"iptables -A {FAULT_CHAIN} {shlex.join(r)}" for r in drops]
        netem = False
        if delay_ms > 0 or loss_pct > 0:
            cmd = f"tc qdisc replace dev eth0 root netem delay {delay_ms:.0f}ms loss {loss_pct:g}%"
            netem = self.nodes.exec(node, ["sh", "-c", cmd], check=False)[0] == 0
            if not netem:  # no sch_netem in this kernel: iptables + the NFQUEUE delayer
                if loss_pct > 0:
                    script.append(f"iptables -A {FAULT_CHAIN} -o eth0 -m statistic --mode random "
                                  f"--probability {loss_pct / 100:.4f} -j DROP")
                if delay_ms > 0:
                    script.append(f"iptables -A {FAULT_CHAIN} -o eth0 -j NFQUEUE --queue-num {NFQUEUE_NUM} "
                                  "--queue-bypass")
        if not netem:
            script.append("tc qdisc del dev eth0 root 2>/dev/null || true")
        self.nodes.exec(node, ["sh", "-ec", "\n".join(script)])
        if delay_ms > 0 and not netem:
            self.nodes.exec(node, ["sh", "-c", f"exec python3 {img.NETDELAY} {NFQUEUE_NUM} {delay_ms:.0f} "
                                               ">/tmp/netdelay.log 2>&1"], detach=True)


__all__ = ["FAULT_CHAIN", "NFQUEUE_NUM", "NetworkFaults"]
