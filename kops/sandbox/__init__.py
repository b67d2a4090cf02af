"""A real local multi-rack Kafka cluster for the demo and the tests (see docs/sandbox.md).

    from kops.sandbox import Sandbox, SandboxConfig
    sb = Sandbox(SandboxConfig(brokers=6)).up()     # ZooKeeper + 6 brokers, racks a,a,b,b,c,c
    sb.bootstrap_servers, sb.zookeeper_connect
    sb.stop(rack="b", kill=True); sb.start(rack="b")
    sb.down()

Kafka's jars come from Maven Central (:mod:`kops.sandbox.dist`); names are imported lazily so
``import kops.sandbox`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kops.sandbox.cluster import Sandbox
    from kops.sandbox.nodes import NodeStatus
    from kops.sandbox.opening import attach, open_sandbox
    from kops.sandbox.config import SandboxConfig, parse_racks
    from kops.sandbox.dist import ensure_kafka, java_tool, kafka_classpath

_LAZY = {
    "Sandbox": "kops.sandbox.cluster",
    "NodeStatus": "kops.sandbox.nodes",
    "attach": "kops.sandbox.opening",
    "open_sandbox": "kops.sandbox.opening",
    "SandboxConfig": "kops.sandbox.config",
    "parse_racks": "kops.sandbox.config",
    "ensure_kafka": "kops.sandbox.dist",
    "kafka_classpath": "kops.sandbox.dist",
    "java_tool": "kops.sandbox.dist",
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'kops.sandbox' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(mod), name)


__all__ = sorted(_LAZY)
