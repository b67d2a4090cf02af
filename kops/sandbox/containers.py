"""The sandbox on a Docker engine: one container per ZooKeeper / KRaft controller / broker, on a
bridge network the sandbox creates, driven through testcontainers (``--engine docker``).

Same cluster, same API and same work dir layout as the JVM sandbox
(:class:`kops.sandbox.cluster.Sandbox`, which this class extends): the work dir is mounted
into every container at the same path, so configs, data dirs, logs (``server.log``,
``state-change.log``, ``console.out``) and the readiness checks are the JVM sandbox's own. What
differs is only where a node runs (a container of the image from :mod:`kops.sandbox.image`)
and how it is addressed:

- inside the network, node ``broker-<id>`` / ``zookeeper`` / ``controller-<id>`` by name; the
  brokers talk to each other on their ``INTERNAL`` listener (port 9091);
- from this machine, every broker's ``EXTERNAL`` listener and ZooKeeper are published on
  127.0.0.1 only, on the ports the configuration names (``bootstrap_servers`` as usual).

Faults that only containers allow, for game days and the fault suite:

- :meth:`partition` cuts brokers (a rack) off from every other node of the cluster, both ways
  (iptables in the containers); the host still reaches them unless ``from_host``;
- :meth:`slow` delays and drops a share of the packets they send (netem where the kernel has
  it; else iptables' statistic match for the loss and an NFQUEUE delayer for the delay);
- :meth:`heal` removes every fault. Faults are recorded in ``sandbox.json`` and applied again
  to a container that restarts, until healed.
"""

from __future__ import annotations

import hashlib
import shlex
import time
from pathlib import Path
from typing import Any

from kops.errors import BadInput, ClusterError
from kops.sandbox import engine
from kops.sandbox.cluster import Sandbox
from kops.sandbox.nodes import node_key
from kops.inputs.properties import render_properties
from kops.sandbox.config import SandboxConfig

INTERNAL_PORT = 9091
FAULT_CHAIN = "KOPS-FAULT"
NFQUEUE_NUM = 7
LABEL = "org.kops.sandbox"


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


class DockerSandbox(Sandbox):
    """A sandbox whose nodes are containers (see the module doc)."""

    def __init__(self, config: SandboxConfig | None = None, **kw: Any):
        super().__init__(config, **kw)
        self._client: Any = None
        self._image: str | None = None

    # -- names ---------------------------------------------------------------------------------
    @property
    def prefix(self) -> str:
        """``kops-<digest of the work dir>``: names of the network and the containers."""
        return "kops-" + hashlib.sha1(str(self.workdir).encode()).hexdigest()[:10]

    @property
    def network_name(self) -> str:
        return self.prefix

    def container_name(self, node: str | int) -> str:
        return f"{self.prefix}-{node_key(node, self.config)}"

    @staticmethod
    def hostname(node_key: str) -> str:
        return node_key  # zookeeper, broker-0, controller-1000

    # -- engine --------------------------------------------------------------------------------
    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = self._engine_client()
        return self._client

    def _engine_client(self) -> Any:
        """The engine at $DOCKER_HOST (or the default socket); else the private dockerd this
        sandbox started earlier (recorded in the state), or a new one (root and docker.io)."""
        rec = (self._recorded or {}).get("engine_daemon") or {}
        daemon = engine.ensure(Path(rec["root"]) if rec.get("root") else None, log=self.log)
        if daemon is not None:
            self._daemon = daemon
        return engine.client()

    def image(self) -> str:
        if self._image is None:
            from kops.sandbox import image

            self._image = image.kafka_image(self.client, self.kafka_version, log=self.log)
        return self._image

    def _container(self, node: str | int) -> Any:
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

            digest = int(hashlib.sha1(str(self.workdir).encode()).hexdigest(), 16)
            for i in range(64):  # a /24 in 10.100-199.x.x the host's other networks leave free
                n = (digest + i) % (100 * 256)
                base = f"10.{100 + n // 256}.{n % 256}."
                ipam = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(
                    subnet=base + "0/24", iprange=base + "224/27")])
                net = Network(docker_network_kw={"driver": "bridge", "labels": {LABEL: self.prefix}, "ipam": ipam})
                net.name = self.network_name
                try:
                    net.create()
                    return
                except docker.errors.APIError as e:
                    if "overlap" not in str(e).lower():
                        raise
            raise ClusterError("no free /24 in 10.100.0.0-10.199.255.0 for the sandbox's network")

    def _static_ip(self, node: str | int) -> str | None:
        """The node's own address on the sandbox's network: ZooKeeper .2, controllers .10 up,
        broker B .50+B (None: a network without its own subnet, made by an older kops, or an id
        past the range -- Docker then picks)."""
        net = self.client.networks.get(self.network_name)
        cfg = (net.attrs.get("IPAM") or {}).get("Config") or []
        subnet = (cfg[0] or {}).get("Subnet") if cfg else None
        if not subnet or not subnet.endswith(".0/24") or cfg[0].get("IPRange") != subnet[:-len("0/24")] + "224/27":
            return None  # (not made by _ensure_network: Docker refuses fixed addresses on its own subnets)
        key = node_key(node, self.config)
        if key == "zookeeper":
            host: int | None = 2
        elif key.startswith("controller-"):
            i = sorted(self.config.controller_ids).index(int(node))
            host = 10 + i if i < 40 else None
        else:
            host = 50 + int(node) if 0 <= int(node) < 174 else None
        return subnet[:-len("0/24")] + str(host) if host is not None else None

    # -- state ---------------------------------------------------------------------------------
    def _state_doc(self) -> dict[str, Any]:
        doc = super()._state_doc()
        daemon = getattr(self, "_daemon", None)
        if daemon is not None:
            doc["engine_daemon"] = {"root": str(daemon.root), "pid": daemon.pid, "host": daemon.host}
        elif (self._recorded or {}).get("engine_daemon"):
            doc["engine_daemon"] = self._recorded["engine_daemon"]  # started by another kops process
        if self._faults():
            doc["faults"] = self._faults()
        return doc

    def _load_state(self) -> None:
        super()._load_state()
        self.__dict__.pop("_fault_list", None)  # the faults recorded now, not those read before

    def _faults(self) -> list[dict[str, Any]]:
        if not hasattr(self, "_fault_list"):
            self._fault_list = list((self._recorded or {}).get("faults") or [])
        return self._fault_list

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "engine": "docker", "network": self.network_name,
                "containers": {node_key(n, self.config): self.container_name(n) for n in self._nodes()},
                "faults": self._faults()}

    # -- configuration inside the containers -----------------------------------------------------
    def _write_configs(self) -> None:
        for b in self.config.data_disk_mb:
            self._mount_disk(b)  # before anything is written into the data dir (KRaft: meta.properties)
        super()._write_configs()
        cfg = self.config
        if self.mode == "zookeeper":
            zk = cfg.zookeeper_properties() | {"clientPortAddress": "0.0.0.0"}
            cfg.properties_file("zookeeper").write_text(render_properties(zk, "kops sandbox (docker): ZooKeeper"))
        for c in self.controller_ids:
            props = cfg.controller_properties(c) | {
                "listeners": f"CONTROLLER://0.0.0.0:{cfg.controller_port(c)}",
                "controller.quorum.voters": self._voters(),
            }
            cfg.properties_file(c).write_text(render_properties(props, f"kops sandbox (docker): KRaft controller {c}"))
        secrets = None
        if cfg.secured:
            from kops.sandbox import security

            secrets = security.load_secrets(cfg.security_files)
        for b in self.broker_ids:
            props = cfg.broker_properties(b, secrets) | self.broker_overrides(b, secrets)
            if cfg.secured:  # the listener named by inter.broker.listener.name says it (Kafka refuses both)
                props.pop("security.inter.broker.protocol", None)
            text = render_properties(props, f"kops sandbox (docker): broker {b}")
            if secrets is not None:  # holds the inter-broker SCRAM password: 0600
                from kops.sandbox.security import write_private

                write_private(cfg.properties_file(b), text)
            else:
                cfg.properties_file(b).write_text(text)

    def certificate_names(self) -> tuple[str, ...]:
        """The brokers' container host names: other brokers reach them by these (INTERNAL)."""
        return tuple(self.hostname(f"broker-{b}") for b in self.broker_ids)

    def _voters(self) -> str:
        return ",".join(f"{c}@{self.hostname(f'controller-{c}')}:{self.config.controller_port(c)}"
                        for c in self.controller_ids)

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
        if self.mode == "zookeeper":
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

    @property
    def internal_bootstrap(self) -> str:
        """Bootstrap servers for a client inside the sandbox's network (e.g. kops in a container)."""
        return ",".join(f"{self.hostname(f'broker-{b}')}:{INTERNAL_PORT}" for b in self.broker_ids)

    @property
    def internal_zookeeper(self) -> str | None:
        if self.mode != "zookeeper":
            return None
        return f"zookeeper:{self.config.zookeeper_port}{self.config.zk_chroot or ''}"

    # -- processes as containers --------------------------------------------------------------------
    def _spawn(self, node: str | int, classpath: str) -> int:
        from testcontainers.core.container import DockerContainer

        from kops.sandbox import image as img

        cfg = self.config
        key = node_key(node, cfg)
        if isinstance(node, int) and node in cfg.data_disk_mb:
            self._mount_disk(node)
        for d in (cfg.log_dir(node), cfg.data_dir(node)):
            d.mkdir(parents=True, exist_ok=True)
        old = self._container(node)
        if old is not None:
            old.remove(force=True)
        cmd = cfg.jvm_command(node, java="java", classpath=f"{img.KAFKA_LIBS}/*")
        shell = f"exec {shlex.join(cmd)} >> {shlex.quote(str(cfg.stdout_file(node)))} 2>&1"
        server_log = cfg.log_dir(node) / "server.log"
        log_offset = server_log.stat().st_size if server_log.exists() else 0
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
            .with_volume_mapping(str(self.workdir), str(self.workdir), "rw")
            .with_kwargs(hostname=self.hostname(key), cap_add=["NET_ADMIN"], working_dir=str(cfg.node_dir(node)),
                         labels={LABEL: self.prefix, "org.kops.node": key}, **extra)
        )
        if Path("/etc/localtime").exists():
            c.with_volume_mapping("/etc/localtime", "/etc/localtime", "ro")
        port = self._port_of(node)
        if node == "zookeeper" or node in self.broker_ids:
            c.ports[f"{port}/tcp"] = (cfg.host, port)  # 127.0.0.1 only (with_bind_ports binds 0.0.0.0)
        c.start()
        info = c.get_wrapped_container()
        info.reload()
        self._procs[key] = {
            "container": info.id,
            "pid": info.attrs["State"]["Pid"],
            "started": info.attrs["State"]["StartedAt"],
            "launched_ms": int(time.time() * 1000),
            "log_offset": log_offset,
            "port": port,
            "rack": cfg.rack_map.get(node) if isinstance(node, int) else None,
        }
        self._save_state()
        self.started_now.append(key)
        if self._faults():
            self._apply_faults()
        return info.attrs["State"]["Pid"]

    def _running(self, node: str | int) -> bool:
        rec = self._procs.get(node_key(node, self.config))
        if not rec or not rec.get("container"):
            return False
        c = self._container(node)
        return c is not None and c.id == rec["container"] and c.status == "running"

    def _signal_and_wait(self, nodes: list[Any], sig: int, t_end: float, timeout_s: float) -> None:
        running = {n: self._container(n) for n in nodes if self._running(n)}
        for c in running.values():
            try:
                c.kill(signal=sig)
            except Exception:  # noqa: BLE001 - exited meanwhile
                pass
        for n, c in running.items():
            if not self._wait_exited(c, t_end):
                self.log(f"{node_key(n, self.config)} did not stop within {timeout_s:.0f}s: SIGKILL")
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

    def _stop_started_now(self) -> None:
        for key in list(self.started_now):
            node: str | int = "zookeeper" if key == "zookeeper" else int(key.split("-", 1)[1])
            c = self._container(node)
            if c is not None:
                c.remove(force=True)
            self._procs.pop(key, None)
        try:
            self._save_state()
        except OSError:
            pass

    def down(self, *, purge: bool = False, timeout_s: float | None = None) -> list[str]:
        """Stop the nodes as the JVM sandbox does (controlled shutdown), then remove the
        containers and the network (data and logs stay in the work dir unless ``purge``)."""
        try:
            stopped = super().down(purge=False, timeout_s=timeout_s)
        finally:  # whatever failed above, nothing of the sandbox stays: containers, network, mounts
            try:
                for c in self.client.containers.list(all=True, filters={"label": f"{LABEL}={self.prefix}"}):
                    c.remove(force=True)
                for net in self.client.networks.list(names=[self.network_name]):
                    net.remove()
            finally:
                self._unmount_disks()
                if not purge and self.config.state_file.exists():
                    with self._updating_state():
                        self._fault_list = []  # they went with the containers
        if purge:
            with self._lock():
                self._purge_files()
        daemon = getattr(self, "_daemon", None) or self._recorded_daemon()
        if daemon is not None:
            daemon.stop()
        return stopped

    # -- small data disks (kops.sandbox.disks) ------------------------------------------------------
    def _disk(self, b: int) -> tuple[Path, Path]:
        """(image file, mount point = the broker's data dir)."""
        return self.config.node_dir(b) / "disk.img", self.config.data_dir(b)

    def _mount_disk(self, b: int) -> None:
        from kops.sandbox import disks

        size = self.config.data_disk_mb.get(b)
        if size:
            disks.ensure(*self._disk(b), size)

    def _unmount_disks(self) -> None:
        from kops.sandbox import disks

        for b in self.config.data_disk_mb:
            disks.unmount(self._disk(b)[1])

    def fill_disk(self, broker: int, *, leave_bytes: int) -> int:
        """Fill the small data disk of ``broker`` until ``leave_bytes`` are free (its replicas
        stay); returns the bytes taken. Only brokers started with a data disk."""
        from kops.sandbox import disks

        self._check_broker(broker)
        if broker not in self.config.data_disk_mb:
            raise BadInput(f"broker {broker} has no data disk of its own (`kops sandbox up --engine docker "
                           f"--data-disk {broker}:256m`); its data dir is on this machine's disk")
        taken = disks.fill(self._disk(broker)[1], leave_bytes)
        self.log(f"broker {broker}: data disk filled, {leave_bytes / 2**20:.1f} MiB left free")
        return taken

    def release_disk(self, broker: int) -> bool:
        from kops.sandbox import disks

        self._check_broker(broker)
        return disks.release(self._disk(broker)[1])

    def disk_usage(self, broker: int) -> tuple[int, int]:
        from kops.sandbox import disks

        return disks.usage(self._disk(broker)[1])

    def _recorded_daemon(self) -> engine.PrivateDaemon | None:
        rec = (self._recorded or {}).get("engine_daemon")
        if not rec:
            return None
        return engine.PrivateDaemon(Path(rec["root"]), pid=rec.get("pid"))

    def stop_node(self, node: str | int, *, kill: bool = False, timeout_s: float = 60.0) -> None:
        """Stop ZooKeeper (``"zookeeper"``) or a KRaft controller (its id): SIGTERM, or SIGKILL with
        ``kill``; the container stays, for :meth:`start_node`. Brokers: use :meth:`stop`."""
        key = node_key(node, self.config)
        if node != "zookeeper" and node not in self.controller_ids:
            raise BadInput(f"{node!r} is not ZooKeeper or a controller of this sandbox (brokers: stop/start)")
        c = self._container(node)
        if c is None or not self._running(node):
            raise ClusterError(f"{key} is not running")
        self.log(("killing " if kill else "stopping ") + key)
        c.kill(signal=9 if kill else 15)
        if not self._wait_exited(c, time.monotonic() + timeout_s):
            c.kill(signal=9)
            self._wait_exited(c, time.monotonic() + 20)

    def start_node(self, node: str | int, *, timeout_s: float = 60.0) -> None:
        """Start the same container of ZooKeeper or a KRaft controller again (data in the work
        dir) and wait until it serves (ZooKeeper answers ruok; a controller listens)."""
        from kops.sandbox import probe

        key = node_key(node, self.config)
        c = self._container(node)
        if c is None:
            raise ClusterError(f"{key} has no container; run `kops sandbox up`")
        c.start()
        deadline = time.monotonic() + timeout_s
        port = self._port_of(node)
        while True:
            c.reload()
            up = (probe.zk_ruok(self.config.host, port) if node == "zookeeper"
                  else self._exec(node, ["sh", "-c", f"nc -z 127.0.0.1 {port}"], check=False)[0] == 0)
            if up:
                break
            if c.status != "running":
                raise ClusterError(f"{key} exited after its restart", details=self._failure_details(node))
            if time.monotonic() > deadline:
                raise ClusterError(f"{key} did not serve within {timeout_s:.0f}s of its restart",
                                   details=self._failure_details(node))
            time.sleep(0.2)
        with self._updating_state():
            self._procs[key]["pid"] = c.attrs["State"]["Pid"]
            if self._faults():
                self._apply_faults()
        self.log(f"{key} is back")

    def restart_zookeeper(self, *, down_s: float = 0.0, kill: bool = False, timeout_s: float = 60.0) -> None:
        """Stop ZooKeeper, keep it down ``down_s`` seconds, start it again and wait for it."""
        if self.mode != "zookeeper":
            raise BadInput("a KRaft sandbox has no ZooKeeper")
        self.stop_node("zookeeper", kill=kill, timeout_s=timeout_s)
        time.sleep(down_s)
        self.start_node("zookeeper", timeout_s=timeout_s)

    def active_controller(self) -> int | None:
        """ZooKeeper mode: the controller broker; KRaft: the leader of the metadata quorum
        (DescribeMetadataQuorum through the brokers)."""
        if self.mode == "zookeeper":
            return self.controller_id()
        from kops.cluster.connection import Connection
        from kops.cluster.topology import kraft_controller

        conn = Connection.from_options(bootstrap_server=self.bootstrap_servers, command_config=None, zookeeper=None,
                                       timeout_s=10.0)
        try:
            return kraft_controller(conn)
        finally:
            conn.close()

    # -- faults --------------------------------------------------------------------------------
    def _targets(self, broker: int | None, rack: str | None) -> list[int]:
        return self._select(broker, rack)

    def _ip(self, node: str | int) -> str | None:
        c = self._container(node)
        if c is None or c.status != "running":
            return None
        return c.attrs["NetworkSettings"]["Networks"].get(self.network_name, {}).get("IPAddress") or None

    def _exec(self, node: str | int, cmd: list[str], *, check: bool = True, detach: bool = False) -> tuple[int, str]:
        c = self._container(node)
        if c is None or c.status != "running":
            return 0, ""
        r = c.exec_run(cmd, detach=detach)
        out = (r.output or b"").decode(errors="replace") if not detach else ""
        if check and not detach and r.exit_code != 0:
            raise ClusterError(f"in {self.container_name(node)}: {shlex.join(cmd)} failed (exit {r.exit_code})",
                               details=out.strip().splitlines()[-5:])
        return r.exit_code or 0, out

    def partition(self, broker: int | None = None, *, rack: str | None = None, from_host: bool = False) -> list[int]:
        """Cut brokers (one, or a rack) off from every other node of the cluster, both ways;
        with ``from_host`` also from this machine (clients here lose them too)."""
        ids = self._targets(broker, rack)
        with self._updating_state():
            self._faults().append({"kind": "partition", "brokers": ids, "from_host": bool(from_host)})
            self._apply_faults()
        self.log(f"brokers {ids} are cut off from the rest of the cluster" + (" and from this host" if from_host else ""))
        return ids

    def slow(self, broker: int | None = None, *, rack: str | None = None, delay_ms: float = 0.0,
             loss_pct: float = 0.0) -> list[int]:
        """Delay by ``delay_ms`` and drop ``loss_pct`` % of the packets the brokers send."""
        ids = self._targets(broker, rack)
        if delay_ms <= 0 and loss_pct <= 0:
            raise BadInput("give a --delay above 0 or a --loss above 0%")
        with self._updating_state():
            self._faults().append({"kind": "slow", "brokers": ids, "delay_ms": delay_ms, "loss_pct": loss_pct})
            self._apply_faults()
        self.log(f"brokers {ids}: {delay_ms:.0f} ms delay, {loss_pct:g}% loss on what they send")
        return ids

    def heal(self) -> int:
        """Remove every partition and slow link; returns how many faults were removed."""
        with self._updating_state():
            n = len(self._faults())
            self._fault_list = []
            self._apply_faults()
        return n

    def _apply_faults(self) -> None:
        """Make every running container's fault rules match the recorded faults."""
        running = [n for n in self._nodes() if self._running(n)]
        ips = {n: self._ip(n) for n in running}
        rules: dict[Any, list[list[str]]] = {n: [] for n in running}
        slow: dict[Any, tuple[float, float]] = {}
        gateway = self._gateway()
        for f in self._faults():
            cut = [b for b in f["brokers"] if b in ips]
            if f["kind"] == "partition":
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

    def _gateway(self) -> str | None:
        try:
            net = self.client.networks.get(self.network_name)
            return net.attrs["IPAM"]["Config"][0].get("Gateway")
        except Exception:  # noqa: BLE001
            return None

    def _set_rules(self, node: str | int, drops: list[list[str]], delay_ms: float, loss_pct: float) -> None:
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
            netem = self._exec(node, ["sh", "-c", cmd], check=False)[0] == 0
            if not netem:  # no sch_netem in this kernel: iptables + the NFQUEUE delayer
                if loss_pct > 0:
                    script.append(f"iptables -A {FAULT_CHAIN} -o eth0 -m statistic --mode random "
                                  f"--probability {loss_pct / 100:.4f} -j DROP")
                if delay_ms > 0:
                    script.append(f"iptables -A {FAULT_CHAIN} -o eth0 -j NFQUEUE --queue-num {NFQUEUE_NUM} "
                                  "--queue-bypass")
        if not netem:
            script.append("tc qdisc del dev eth0 root 2>/dev/null || true")
        self._exec(node, ["sh", "-ec", "\n".join(script)])
        if delay_ms > 0 and not netem:
            self._exec(node, ["sh", "-c", f"exec python3 {img.NETDELAY} {NFQUEUE_NUM} {delay_ms:.0f} "
                                          ">/tmp/netdelay.log 2>&1"], detach=True)
