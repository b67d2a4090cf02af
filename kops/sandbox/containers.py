"""The sandbox on a Docker engine: one container per ZooKeeper / KRaft controller / broker, on a
bridge network the sandbox creates, driven through testcontainers (``--engine docker``).

:class:`ContainerNodes` is the node engine a :class:`kops.sandbox.cluster.Sandbox` holds for
``engine="docker"``: same cluster, same API and same work dir layout as with local JVMs
(:class:`kops.sandbox.hosts.LocalNodes`): the work dir is mounted into every container at the
same path, so configs, data dirs, logs (``server.log``, ``state-change.log``, ``console.out``)
and the readiness checks are the same. What differs is only where a node runs (a container of
the image from :mod:`kops.sandbox.image`) and how it is addressed:

- inside the network, node ``broker-<id>`` / ``zookeeper`` / ``controller-<id>`` by name; the
  brokers talk to each other on their ``INTERNAL`` listener (port 9091);
- from this machine, every broker's ``EXTERNAL`` listener and ZooKeeper are published on
  127.0.0.1 only, on the ports the configuration names (``bootstrap_servers`` as usual).

Faults that only containers allow, for game days and the fault suite, are
:class:`kops.sandbox.netfaults.NetworkFaults` (``ContainerNodes.faults``): a rack cut off, slow
links; small data disks that can really fill are here (:meth:`ContainerNodes.fill_disk`).
"""

from __future__ import annotations

import hashlib
import shlex
import time
from pathlib import Path
from typing import Any

from kops.errors import BadInput, ClusterError
from kops.sandbox import dist, engine
from kops.sandbox.hosts import Nodes
from kops.sandbox.nodes import Log
from kops.sandbox.readiness import failure_details
from kops.sandbox.state import Node, SandboxState

INTERNAL_PORT = 9091
LABEL = "org.kops.sandbox"

#: Java security properties for the JVMs in containers (``-Djava.security.properties``): look a
#: name up again at once after a failure. Java caches a failed lookup for 10 s by default and a
#: stopped container's name does not resolve, so after a restart of ZooKeeper (down a few
#: seconds) brokers kept failing to resolve ``zookeeper`` for up to 10 s more -- past their
#: session timeout (6 s then): every restart expired the brokers' sessions (a controller failover and
#: partitions waiting for a new LeaderAndIsr), which a real cluster, whose ZooKeeper hosts keep
#: their DNS names, does not see. Names that resolve are kept 5 s (a restarted container may get
#: another address).
DNS_CACHE = "networkaddress.cache.ttl=5\nnetworkaddress.cache.negative.ttl=0\n"


def parse_duration_ms(text: str) -> float:
    """``300ms`` / ``0.3s`` / ``300`` (ms) -> milliseconds; BadInput otherwise."""
    t = str(text).strip().lower()
    try:
        if t.endswith("ms"):
            v = float(t[:-2])
        elif t.endswith("s"):
            v = float(t[:-1]) * 1000
        else:
            v = float(t)
    except ValueError:
        raise BadInput(f"--delay {text!r}: expected a duration like 300ms or 0.3s") from None
    if not (0 <= v <= 60_000) or v != v:
        raise BadInput(f"--delay {text!r}: expected 0..60s")
    return v


def parse_percent(text: str) -> float:
    """``5%`` / ``5`` -> 5.0; BadInput unless 0..100."""
    t = str(text).strip().rstrip("%")
    try:
        v = float(t)
    except ValueError:
        raise BadInput(f"--loss {text!r}: expected a percentage like 5%") from None
    if not (0 <= v <= 100):
        raise BadInput(f"--loss {text!r}: expected 0..100%")
    return v


#: :meth:`ContainerNodes.exec`'s exit code for a container that is not running (Docker's own
#: code for a command that could not be run)
NOT_RUNNING = 125


class ContainerNodes(Nodes):
    """Each node a container on the sandbox's own bridge network (see the module doc)."""

    kind = "docker"

    def __init__(self, state: SandboxState, log: Log):
        super().__init__(state, log)
        self._client: Any = None
        self._image: str | None = None
        self._daemon: engine.PrivateDaemon | None = None
        from kops.sandbox.netfaults import NetworkFaults

        self.faults = NetworkFaults(self)

    @property
    def config(self):
        return self.state.config

    # -- names ---------------------------------------------------------------------------------
    @property
    def prefix(self) -> str:
        """``kops-<digest of the work dir>``: names of the network and the containers."""
        return "kops-" + hashlib.sha1(str(self.state.workdir).encode()).hexdigest()[:10]

    @property
    def network_name(self) -> str:
        return self.prefix

    def container_name(self, node: Node) -> str:
        return f"{self.prefix}-{self.state.key(node)}"

    @staticmethod
    def hostname(node_key: str) -> str:
        return node_key  # zookeeper, broker-0, controller-1000

    @property
    def internal_bootstrap(self) -> str:
        """Bootstrap servers for a client inside the sandbox's network (e.g. kops in a container)."""
        return ",".join(f"{self.hostname(f'broker-{b}')}:{INTERNAL_PORT}" for b in self.config.broker_ids)

    @property
    def internal_zookeeper(self) -> str | None:
        if self.config.mode != "zookeeper":
            return None
        return f"zookeeper:{self.config.zookeeper_port}{self.config.zk_chroot or ''}"

    # -- engine --------------------------------------------------------------------------------
    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = self._engine_client()
        return self._client

    def _engine_client(self) -> Any:
        """The engine at $DOCKER_HOST (or the default socket); else the private dockerd this
        sandbox started earlier (recorded in the state), or a new one (root and docker.io)."""
        rec = self.state.extras.get("engine_daemon") or {}
        daemon = engine.ensure(Path(rec["root"]) if rec.get("root") else None, log=self.log)
        if daemon is not None:
            self._daemon = daemon
            self.state.extras["engine_daemon"] = {"root": str(daemon.root), "pid": daemon.pid, "host": daemon.host}
        return engine.client()

    def image(self) -> str:
        if self._image is None:
            from kops.sandbox import image

            self._image = image.kafka_image(self.client, self.config.kafka_version, log=self.log)
        return self._image

    def _container(self, node: Node) -> Any:
        import docker

        try:
            return self.client.containers.get(self.container_name(node))
        except docker.errors.NotFound:
            return None

    def network(self) -> Any:
        """The sandbox's network as a testcontainers ``Network`` (for ``with_network``), e.g. to
        run a client in a container next to the brokers (``internal_bootstrap``)."""
        from testcontainers.core.network import Network

        self._ensure_network()
        net = Network()
        net.name = self.network_name  # an existing network: testcontainers only needs its name
        return net

    def _ensure_network(self) -> None:
        """The sandbox's bridge network, on a /24 of its own so that every node keeps one address
        across restarts (:meth:`_static_ip`): a restarted container would otherwise take a new
        address, and the old one could go to another restarted node while the brokers' JVMs
        still resolve the name to it (30 s DNS cache) -- a follower then fetched from the wrong
        broker and never rejoined the ISR (fresh-clone run I). Other containers on the network
        get addresses from .224 up."""
        import docker

        try:
            self.client.networks.get(self.network_name)
        except docker.errors.NotFound:
            from testcontainers.core.network import Network

            digest = int(hashlib.sha1(str(self.state.workdir).encode()).hexdigest(), 16)
            for i in range(64):  # a /24 in 10.100-199.x.x the host's other networks leave free
                n = (digest + i) % (100 * 256)
                base = f"10.{100 + n // 256}.{n % 256}."
                ipam = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(
                    subnet=base + "0/24", iprange=base + "224/27", gateway=base + "1")])
                net = Network(docker_network_kw={"driver": "bridge", "labels": {LABEL: self.prefix}, "ipam": ipam})
                net.name = self.network_name
                try:
                    net.create()
                    return
                except docker.errors.APIError as e:
                    if "overlap" not in str(e).lower():
                        raise
            raise ClusterError("no free /24 in 10.100.0.0-10.199.255.0 for the sandbox's network")

    def _static_ip(self, node: Node) -> str | None:
        """The node's own address on the sandbox's network: ZooKeeper .2, controllers .10 up,
        broker B .50+B (None: a network without its own subnet, made by an older kops, or an id
        past the range -- Docker then picks)."""
        net = self.client.networks.get(self.network_name)
        cfg = (net.attrs.get("IPAM") or {}).get("Config") or []
        subnet = (cfg[0] or {}).get("Subnet") if cfg else None
        if not subnet or not subnet.endswith(".0/24") or cfg[0].get("IPRange") != subnet[:-len("0/24")] + "224/27":
            return None  # (not made by _ensure_network: Docker refuses fixed addresses on its own subnets)
        key = self.state.key(node)
        if key == "zookeeper":
            host: int | None = 2
        elif key.startswith("controller-"):
            i = sorted(self.config.controller_ids).index(int(node))
            host = 10 + i if i < 40 else None
        else:
            host = 50 + int(node) if 0 <= int(node) < 174 else None
        return subnet[:-len("0/24")] + str(host) if host is not None else None

    def ip(self, node: Node) -> str | None:
        """The running node's address on the sandbox's network."""
        c = self._container(node)
        if c is None or c.status != "running":
            return None
        return c.attrs["NetworkSettings"]["Networks"].get(self.network_name, {}).get("IPAddress") or None

    def gateway(self) -> str | None:
        """The network's gateway: this host, as the containers see it."""
        for node in self.state.nodes():  # what Docker gave the running containers: always there
            c = self._container(node)
            if c is not None and c.status == "running":
                gw = c.attrs["NetworkSettings"]["Networks"].get(self.network_name, {}).get("Gateway")
                if gw:
                    return gw
        try:  # (the network's own record names it only when it was given at creation)
            net = self.client.networks.get(self.network_name)
            return net.attrs["IPAM"]["Config"][0].get("Gateway")
        except Exception:  # noqa: BLE001
            return None

    def exec(self, node: Node, cmd: list[str], *, check: bool = True, detach: bool = False) -> tuple[int, str]:
        """Run ``cmd`` in the node's container: (exit code, output). ClusterError, with ``check``,
        when the command fails or the container is not running (nothing ran: a fault aimed at a
        stopped node must not pass for set); without ``check``, a container not running answers
        :data:`NOT_RUNNING` (a readiness probe then keeps waiting, never takes it for up)."""
        c = self._container(node)
        if c is None or c.status != "running":
            if check:
                raise ClusterError(f"{self.container_name(node)} is not running: {shlex.join(cmd)} was not run")
            return NOT_RUNNING, ""
        r = c.exec_run(cmd, detach=detach)
        out = (r.output or b"").decode(errors="replace") if not detach else ""
        if check and not detach and r.exit_code != 0:
            raise ClusterError(f"in {self.container_name(node)}: {shlex.join(cmd)} failed (exit {r.exit_code})",
                               details=out.strip().splitlines()[-5:])
        return r.exit_code or 0, out

    # -- configuration inside the containers -----------------------------------------------------
    def _voters(self) -> str:
        return ",".join(f"{c}@{self.hostname(f'controller-{c}')}:{self.config.controller_port(c)}"
                        for c in self.config.controller_ids)

    def overrides(self, node: Node, secrets: Any = None) -> dict[str, str]:
        """Where a node listens and how it is reached in a container: ZooKeeper and controllers on
        every address, by name; brokers on :meth:`broker_overrides`."""
        cfg = self.config
        if node == "zookeeper":
            return {"clientPortAddress": "0.0.0.0"}
        if node in cfg.controller_ids:
            return {"listeners": f"CONTROLLER://0.0.0.0:{cfg.controller_port(int(node))}",
                    "controller.quorum.voters": self._voters()}
        over = self.broker_overrides(int(node), secrets)
        if cfg.secured:  # the listener named by inter.broker.listener.name says it (Kafka refuses both)
            over["security.inter.broker.protocol"] = None  # type: ignore[assignment]
        return over

    def broker_overrides(self, b: int, secrets: Any = None) -> dict[str, str]:
        """Listeners of a broker in a container: INTERNAL (by name, between nodes) and EXTERNAL
        (published on 127.0.0.1 with the same port, for clients on this machine). Secured, both
        speak the sandbox's protocol (SASL_PLAINTEXT / SASL_SSL, SCRAM-SHA-512): the brokers log
        in to each other as the super user on INTERNAL, and check each other's certificate
        against their container names."""
        cfg = self.config
        port = cfg.broker_port(b)
        host = self.hostname(f"broker-{b}")
        out = {
            "listeners": f"INTERNAL://0.0.0.0:{INTERNAL_PORT},EXTERNAL://0.0.0.0:{port}",
            "advertised.listeners": f"INTERNAL://{host}:{INTERNAL_PORT},EXTERNAL://{cfg.host}:{port}",
            "inter.broker.listener.name": "INTERNAL",
        }
        if cfg.mode == "zookeeper":
            out["listener.security.protocol.map"] = "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT"
            out["zookeeper.connect"] = f"zookeeper:{cfg.zookeeper_port}{cfg.zk_chroot or ''}"
        else:
            out["listener.security.protocol.map"] = "CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT"
            out["controller.quorum.voters"] = self._voters()
        if cfg.secured:  # (ZooKeeper mode only: SandboxConfig says so)
            from kops.sandbox import security

            proto = cfg.listener_protocol
            out["listener.security.protocol.map"] = f"INTERNAL:{proto},EXTERNAL:{proto}"
            login = security.scram_jaas(security.ADMIN_USER, secrets.admin_password if secrets else "<generated>")
            mech = security.SCRAM_MECHANISM.lower()
            for name in ("internal", "external"):
                out[f"listener.name.{name}.{mech}.sasl.jaas.config"] = login
        return out

    def certificate_names(self) -> tuple[str, ...]:
        """The brokers' container host names: other brokers reach them by these (INTERNAL)."""
        return tuple(self.hostname(f"broker-{b}") for b in self.config.broker_ids)

    # -- processes as containers --------------------------------------------------------------------
    def prepare(self) -> None:
        dist.ensure_kafka(self.config.kafka_version, log=self.log)
        for b in self.config.data_disk_mb:
            self._mount_disk(b)  # before anything is written into the data dir (KRaft: meta.properties)
        self.image()

    def _start(self, node: Node) -> dict[str, Any]:
        from testcontainers.core.container import DockerContainer

        from kops.sandbox import image as img

        cfg = self.config
        key = self.state.key(node)
        if isinstance(node, int) and node in cfg.data_disk_mb:
            self._mount_disk(node)
        old = self._container(node)
        if old is not None:
            old.remove(force=True)
        cmd = cfg.jvm_command(node, java="java", classpath=f"{img.KAFKA_LIBS}/*")
        dns = cfg.config_dir / "jvm-dns.security"
        dns.write_text(DNS_CACHE)
        cmd.insert(1, f"-Djava.security.properties={dns}")
        shell = f"exec {shlex.join(cmd)} >> {shlex.quote(str(cfg.stdout_file(node)))} 2>&1"
        net = self.network()
        ip = self._static_ip(node)
        extra: dict[str, Any] = {}
        if ip:  # the endpoint testcontainers makes, with the node's own address
            from docker.types import EndpointConfig

            extra["networking_config"] = {net.name: EndpointConfig(
                self.client.api.api_version, aliases=[self.hostname(key)], ipv4_address=ip)}
        c = (
            DockerContainer(self.image())
            .with_name(self.container_name(node))
            .with_network(net)
            .with_network_aliases(self.hostname(key))
            .with_command(["sh", "-c", shell])
            .with_volume_mapping(str(self.state.workdir), str(self.state.workdir), "rw")
            .with_kwargs(hostname=self.hostname(key), cap_add=["NET_ADMIN"], working_dir=str(cfg.node_dir(node)),
                         labels={LABEL: self.prefix, "org.kops.node": key}, **extra)
        )
        if Path("/etc/localtime").exists():
            c.with_volume_mapping("/etc/localtime", "/etc/localtime", "ro")
        port = self.state.port_of(node)
        if node == "zookeeper" or node in cfg.broker_ids:
            c.ports[f"{port}/tcp"] = (cfg.host, port)  # 127.0.0.1 only (with_bind_ports binds 0.0.0.0)
        c.start()
        info = c.get_wrapped_container()
        info.reload()
        return {"container": info.id, "pid": info.attrs["State"]["Pid"], "started": info.attrs["State"]["StartedAt"]}

    def after_launch(self, node: Node) -> None:
        if self.faults.recorded():
            self.faults.apply()

    def running(self, node: Node) -> bool:
        rec = self.state.procs.get(self.state.key(node))
        if not rec or not rec.get("container"):
            return False
        c = self._container(node)
        return c is not None and c.id == rec["container"] and c.status == "running"

    def signal_and_wait(self, nodes: list[Node], sig: int, t_end: float, timeout_s: float) -> None:
        running = {n: self._container(n) for n in nodes if self.running(n)}
        for c in running.values():
            try:
                c.kill(signal=sig)
            except Exception:  # noqa: BLE001 - exited meanwhile
                pass
        for n, c in running.items():
            if not self._wait_exited(c, t_end):
                self.log(f"{self.state.key(n)} did not stop within {timeout_s:.0f}s: SIGKILL")
                try:
                    c.kill(signal=9)
                except Exception:  # noqa: BLE001
                    pass
                self._wait_exited(c, time.monotonic() + 20)

    @staticmethod
    def _wait_exited(c: Any, deadline: float) -> bool:
        while True:
            try:
                c.reload()
            except Exception:  # noqa: BLE001 - removed
                return True
            if c.status != "running":
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)

    def discard(self, keys: list[str]) -> None:
        for key in keys:
            node: Node = "zookeeper" if key == "zookeeper" else int(key.partition("-")[2])
            c = self._container(node)
            if c is not None:
                c.remove(force=True)
            self.state.procs.pop(key, None)

    def cleanup(self) -> None:
        """Remove the containers and the network (data and logs stay in the work dir), unmount the
        data disks, forget the faults (they went with the containers), stop the private dockerd
        the sandbox started unless other containers still run on it."""
        try:
            for c in self.client.containers.list(all=True, filters={"label": f"{LABEL}={self.prefix}"}):
                c.remove(force=True)
            for net in self.client.networks.list(names=[self.network_name]):
                net.remove()
        finally:
            self._unmount_disks()
            self.faults.forget()
            daemon = self._daemon or self._recorded_daemon()
            if daemon is not None:
                daemon.stop_if_idle()

    def _recorded_daemon(self) -> engine.PrivateDaemon | None:
        rec = self.state.extras.get("engine_daemon")
        if not rec:
            return None
        return engine.PrivateDaemon(Path(rec["root"]), pid=rec.get("pid"))

    def describe(self) -> dict[str, Any]:
        return {"engine": "docker", "network": self.network_name,
                "containers": {self.state.key(n): self.container_name(n) for n in self.state.nodes()},
                "faults": self.faults.recorded()}

    # -- ZooKeeper and controllers stopped and started on their own ---------------------------------
    def stop_node(self, node: Node, *, kill: bool = False, timeout_s: float = 60.0) -> None:
        """Stop ZooKeeper (``"zookeeper"``) or a KRaft controller (its id): SIGTERM, or SIGKILL with
        ``kill``; the container stays, for :meth:`start_node`. Brokers: ``Sandbox.stop``."""
        key = self.state.key(node)
        if node != "zookeeper" and node not in self.config.controller_ids:
            raise BadInput(f"{node!r} is not ZooKeeper or a controller of this sandbox (brokers: stop/start)")
        c = self._container(node)
        if c is None or not self.running(node):
            raise ClusterError(f"{key} is not running")
        self.log(("killing " if kill else "stopping ") + key)
        c.kill(signal=9 if kill else 15)
        if not self._wait_exited(c, time.monotonic() + timeout_s):
            c.kill(signal=9)
            self._wait_exited(c, time.monotonic() + 20)

    def start_node(self, node: Node, *, timeout_s: float = 60.0) -> None:
        """Start the same container of ZooKeeper or a KRaft controller again (data in the work
        dir) and wait until it serves (ZooKeeper answers ruok; a controller listens)."""
        from kops.sandbox import probe

        key = self.state.key(node)
        c = self._container(node)
        if c is None:
            raise ClusterError(f"{key} has no container; run `kops sandbox up`")
        c.start()
        deadline = time.monotonic() + timeout_s
        port = self.state.port_of(node)
        while True:
            c.reload()
            up = (probe.zk_ruok(self.config.host, port) if node == "zookeeper"
                  else self.exec(node, ["sh", "-c", f"nc -z 127.0.0.1 {port}"], check=False)[0] == 0)
            if up:
                break
            if c.status != "running":
                raise ClusterError(f"{key} exited after its restart", details=failure_details(self.config, node))
            if time.monotonic() > deadline:
                raise ClusterError(f"{key} did not serve within {timeout_s:.0f}s of its restart",
                                   details=failure_details(self.config, node))
            time.sleep(0.2)
        with self.state.updating():
            self.state.procs[key]["pid"] = c.attrs["State"]["Pid"]
            if self.faults.recorded():
                self.faults.apply()
        self.log(f"{key} is back")

    # -- small data disks (kops.sandbox.disks) ------------------------------------------------------
    def _mount_disk(self, b: int) -> None:
        """Mount every data disk of broker ``b`` (one per log dir) that is not mounted."""
        from kops.sandbox import disks

        size = self.config.data_disk_mb.get(b)
        for image, mount_point in self.config.data_disks(b):
            disks.ensure(image, mount_point, size)

    def _unmount_disks(self) -> None:
        from kops.sandbox import disks

        for b in self.config.data_disk_mb:
            for _image, mount_point in self.config.data_disks(b):
                disks.unmount(mount_point)

    def fill_disk(self, broker: int, *, leave_bytes: int) -> int:
        """Fill the small data disk of ``broker`` until ``leave_bytes`` are free (its replicas
        stay); returns the bytes taken. Only brokers started with a data disk; with several log
        dirs, the disk of the first (``data``)."""
        from kops.sandbox import disks

        self.state.check_broker(broker)
        if broker not in self.config.data_disk_mb:
            raise BadInput(f"broker {broker} has no data disk of its own (`kops sandbox up --engine docker "
                           f"--data-disk {broker}:256m`); its data dir is on this machine's disk")
        taken = disks.fill(self.config.data_dir(broker), leave_bytes)
        self.log(f"broker {broker}: data disk filled, {leave_bytes / 2**20:.1f} MiB left free")
        return taken

    def release_disk(self, broker: int) -> bool:
        from kops.sandbox import disks

        self.state.check_broker(broker)
        return disks.release(self.config.data_dir(broker))

    def disk_usage(self, broker: int) -> tuple[int, int]:
        from kops.sandbox import disks

        return disks.usage(self.config.data_dir(broker))


__all__ = ["NOT_RUNNING", "ContainerNodes", "INTERNAL_PORT", "LABEL", "parse_duration_ms", "parse_percent"]
