"""The sandbox's shape on a Docker engine: ``docker/compose.yml`` through testcontainers.

Used by the test fixture when ``KOPS_TEST_CLUSTER=docker``. Same API as
:class:`kops.sandbox.cluster.Sandbox` where it matters to tests (connection strings, racks,
stop/start of brokers and racks with the same registration checks, status, log dirs).

Not exercised on our machines (no Docker engine there); written to the testcontainers 4.x
``DockerCompose`` API and Docker Compose v2.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

from kops.errors import BadInput, ClusterError

COMPOSE_DIR = Path(__file__).resolve().parents[2] / "docker"
COMPOSE_FILE = "compose.yml"
BROKERS = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
HOST = "127.0.0.1"
ZK_PORT = 2181
BASE_PORT = 9092


class DockerComposeSandbox:
    """ZooKeeper + 6 brokers (racks a,a,b,b,c,c) from ``docker/compose.yml``."""

    mode = "zookeeper"
    kafka_version = "3.9 (Confluent Platform 7.9)"

    def __init__(self, compose_dir: str | Path | None = None, *, start_timeout_s: float = 180.0):
        self.compose_dir = Path(compose_dir or os.environ.get("KOPS_COMPOSE_DIR") or COMPOSE_DIR)
        if not (self.compose_dir / COMPOSE_FILE).is_file():
            raise ClusterError(f"no {COMPOSE_FILE} in {self.compose_dir}")
        self.start_timeout_s = start_timeout_s
        self._compose = None

    # -- shape ---------------------------------------------------------------------------------
    @property
    def broker_ids(self) -> list[int]:
        return sorted(BROKERS)

    @property
    def racks(self) -> dict[int, str]:
        return dict(BROKERS)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{HOST}:{BASE_PORT + b}" for b in self.broker_ids)

    @property
    def zookeeper_connect(self) -> str:
        return f"{HOST}:{ZK_PORT}"

    @property
    def workdir(self) -> Path:
        return self.compose_dir

    def rack_of(self, broker_id: int) -> str:
        if broker_id not in BROKERS:
            raise BadInput(f"no broker {broker_id}; brokers: {self.broker_ids}")
        return BROKERS[broker_id]

    def brokers_in_rack(self, rack: str) -> list[int]:
        ids = [b for b, r in BROKERS.items() if r == rack]
        if not ids:
            raise BadInput(f"no rack {rack!r}; racks: {sorted(set(BROKERS.values()))}")
        return ids

    def broker_address(self, broker_id: int) -> str:
        return f"{HOST}:{BASE_PORT + broker_id}"

    def broker_port(self, broker_id: int) -> int:
        return BASE_PORT + broker_id

    def broker_log_dir(self, broker_id: int) -> Path:
        self.rack_of(broker_id)
        return self.compose_dir / "logs" / f"broker-{broker_id}"

    def broker_data_dir(self, broker_id: int) -> Path:
        raise NotImplementedError("broker data lives inside the container (/var/lib/kafka/data)")

    # -- lifecycle -----------------------------------------------------------------------------
    def _service(self, broker_id: int) -> str:
        return f"kafka-{broker_id}"

    def _docker_compose(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        cmd = ["docker", "compose", "-f", str(self.compose_dir / COMPOSE_FILE), *args]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        if p.returncode != 0:
            raise ClusterError(f"{' '.join(cmd)} failed", details=(p.stdout + p.stderr).splitlines()[-20:])
        return p

    def up(self) -> DockerComposeSandbox:
        from testcontainers.compose import DockerCompose

        for b in self.broker_ids:
            d = self.broker_log_dir(b)
            d.mkdir(parents=True, exist_ok=True)
            d.chmod(0o777)  # the cp-kafka image runs as uid 1000
        self._compose = DockerCompose(context=str(self.compose_dir), compose_file_name=COMPOSE_FILE, wait=True)
        self._compose.start()
        self._wait(present=set(self.broker_ids), absent=set(), timeout_s=self.start_timeout_s)
        return self

    def down(self, *, purge: bool = True) -> list[str]:
        if self._compose is not None:
            self._compose.stop(down=True)
            self._compose = None
        return ["zookeeper", *(self._service(b) for b in self.broker_ids)]

    def stop(self, broker: int | None = None, *, rack: str | None = None, kill: bool = False,
             wait: bool = True, timeout_s: float = 60.0) -> list[int]:
        ids = [broker] if broker is not None else self.brokers_in_rack(rack or "")
        services = [self._service(b) for b in ids]
        if kill:
            self._docker_compose("kill", "-s", "SIGKILL", *services)
        else:
            self._docker_compose("stop", "-t", str(int(timeout_s)), *services, timeout=timeout_s + 30)
        if wait:
            self._wait(present=set(), absent=set(ids), timeout_s=max(30.0, timeout_s))
        return ids

    def start(self, broker: int | None = None, *, rack: str | None = None, timeout_s: float = 120.0) -> list[int]:
        ids = [broker] if broker is not None else self.brokers_in_rack(rack or "")
        self._docker_compose("start", *(self._service(b) for b in ids))
        self._wait(present=set(ids), absent=set(), timeout_s=timeout_s)
        return ids

    def registered_brokers(self) -> set[int]:
        from kops.sandbox import probe

        try:
            with probe.zk_client(self.zookeeper_connect, timeout_s=5.0) as zk:
                return set(probe.zk_registrations(zk))
        except ClusterError:
            return set()

    def controller_id(self) -> int | None:
        from kops.sandbox import probe

        with probe.zk_client(self.zookeeper_connect, timeout_s=5.0) as zk:
            return probe.zk_controller(zk)

    def status(self) -> list[Any]:
        from kops.sandbox.nodes import NodeStatus

        regs = self.registered_brokers()
        out = [NodeStatus("zookeeper", "zookeeper", None, None, ZK_PORT, None, True, None, True)]
        for b in self.broker_ids:
            reg = b in regs
            out.append(NodeStatus(f"broker-{b}", "broker", b, BROKERS[b], BASE_PORT + b, None, reg, reg, reg))
        return out

    def _wait(self, *, present: set[int], absent: set[int], timeout_s: float) -> None:
        from kops.sandbox import probe

        deadline = time.monotonic() + timeout_s
        last: Any = None
        while time.monotonic() < deadline:
            try:
                with probe.zk_client(self.zookeeper_connect, timeout_s=5.0) as zk:
                    regs = set(probe.zk_registrations(zk))
                    ctrl = probe.zk_controller(zk)
                last = (sorted(regs), ctrl)
                if present <= regs and not (absent & regs) and ctrl is not None and ctrl in regs:
                    return
            except ClusterError as e:
                last = e.message
            time.sleep(0.5)
        raise ClusterError(
            f"docker cluster: want brokers {sorted(present)} registered and {sorted(absent)} gone; last seen {last}"
        )
