"""The sandbox's state file (``<workdir>/sandbox.json``), its nodes' names and status."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kops.errors import ClusterError
from kops.sandbox.config import SandboxConfig

STATE_VERSION = 1
Log = Callable[[str], None]


def nolog(_msg: str) -> None:
    pass


@dataclass(frozen=True)
class NodeStatus:
    """One process of the sandbox, as :meth:`Sandbox.status` reports it."""

    name: str  # "zookeeper", "broker-1", "controller-1000"
    role: str  # zookeeper | broker | controller
    id: int | None
    rack: str | None
    port: int
    pid: int | None
    running: bool  # our JVM process runs
    registered: bool | None  # broker: in /brokers/ids (ZK) / cluster metadata (KRaft); else None
    alive: bool  # running and (brokers) registered
    controller: bool = False  # this broker is the active controller (ZooKeeper mode)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def node_key(node: str | int, cfg: SandboxConfig) -> str:
    if node == "zookeeper":
        return "zookeeper"
    if isinstance(node, int) and node in cfg.controller_ids:
        return f"controller-{node}"
    return f"broker-{int(node)}"


def describe_diff(key: str, old: SandboxConfig, new: SandboxConfig) -> str:
    if key == "racks":
        return f"racks: running {old.rack_map}, asked {new.rack_map}"
    if key == "ports":
        return f"ports: running {old.all_ports()}, asked {new.all_ports()}"
    return f"{key}: running {getattr(old, key)!r}, asked {getattr(new, key)!r}"


def log_time(line: str) -> float:
    """Epoch seconds of a ``[2026-01-02 03:04:05,678] ...`` log4j line (local time); 0 if none."""
    if not line.startswith("[") or len(line) < 25:
        return 0.0
    try:
        t = time.strptime(line[1:20], "%Y-%m-%d %H:%M:%S")
        return time.mktime(t) + int(line[21:24]) / 1000.0
    except ValueError:
        return 0.0


def read_state(workdir: Path) -> dict[str, Any] | None:
    f = workdir / "sandbox.json"
    try:
        doc = json.loads(f.read_text())
    except FileNotFoundError:
        return None
    except ValueError as e:
        raise ClusterError(f"the sandbox state file {f} is unreadable ({e}); remove it to start afresh") from None
    if not isinstance(doc, dict) or doc.get("kops_sandbox") != STATE_VERSION or "config" not in doc:
        raise ClusterError(f"{f} is not a kops sandbox state file (version {STATE_VERSION})")
    return doc
