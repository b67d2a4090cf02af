"""docker/compose.yml runs as shipped: 6 brokers over 3 racks that `kops cluster describe` reads,
on the locally built image, with Debian's docker-compose (what `./scripts/test.sh` installs;
Docker's `docker compose` plugin reads the same file)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from tests.faults.helpers import kops, wait_for

pytestmark = pytest.mark.faults

COMPOSE = Path(__file__).resolve().parents[2] / "docker" / "compose.yml"


def _compose_cmd() -> list[str]:
    exe = shutil.which("docker-compose")
    if exe:
        return [exe]
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    raise AssertionError("no compose implementation: apt-get install docker-compose (./scripts/test.sh does)")


def test_compose_file_gives_a_six_broker_three_rack_cluster(docker_engine, tmp_path):
    from kops.sandbox import engine, image
    from kops.sandbox.procs import free_ports

    image.kafka_image(engine.client())  # builds or reuses it, tags kops/kafka:<the sandbox's default version>
    ports = free_ports(7)
    env = {**os.environ, "KOPS_ZOOKEEPER_PORT": str(ports[0]),
           **{f"KOPS_BROKER{i}_PORT": str(p) for i, p in enumerate(ports[1:])}}
    project = f"kopstest{uuid.uuid4().hex[:6]}"
    compose = [*_compose_cmd(), "-f", str(COMPOSE), "-p", project]
    bootstrap = f"127.0.0.1:{ports[1]}"
    try:
        up = subprocess.run([*compose, "up", "-d"], capture_output=True, text=True, env=env, timeout=300)
        assert up.returncode == 0, up.stdout + up.stderr

        def described():
            r = kops("cluster", "describe", "--bootstrap-server", bootstrap, "--zookeeper", f"127.0.0.1:{ports[0]}",
                     "--output", "json", timeout=60)
            if r.returncode != 0:
                return None
            doc = json.loads(r.stdout)
            return doc if len(doc["brokers"]) == 6 else None

        doc = wait_for(described, 180, 2, "the compose cluster's 6 brokers in `kops cluster describe`")
        assert {b["id"]: b["rack"] for b in doc["brokers"]} == {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
        assert doc["controller"] in range(6)
        assert {(b["host"], b["port"]) for b in doc["brokers"]} == {("127.0.0.1", p) for p in ports[1:]}
    finally:
        down = subprocess.run([*compose, "down", "-v", "--remove-orphans"], capture_output=True, text=True, env=env,
                              timeout=300)
        assert down.returncode == 0, down.stdout + down.stderr
