"""A sandbox's configuration files: each node's properties and the logging configuration, in
``<workdir>/config/``, and a secured sandbox's security files."""

from __future__ import annotations

import shutil

from kops.inputs.properties import render_properties
from kops.sandbox import dist
from kops.sandbox.hosts import Nodes
from kops.sandbox.modes import MetadataMode
from kops.sandbox.state import SandboxState


def _merged(base: dict[str, str], over: dict[str, str]) -> dict[str, str]:
    """``base`` with ``over`` on top; a value None in ``over`` removes the key."""
    return {k: v for k, v in (base | over).items() if v is not None}


def write_node_configs(state: SandboxState, nodes: Nodes, meta: MetadataMode) -> None:
    """Every node's properties: the configuration's (:class:`kops.sandbox.config.SandboxConfig`,
    the metadata mode's for ZooKeeper or the controllers) with the node engine's on top (where a
    node listens and how it is reached); the logging configuration of the sandbox's Kafka; a
    secured sandbox's certificates, credentials and client files. Files holding a secret are
    written 0600."""
    cfg = state.config
    cfg.config_dir.mkdir(parents=True, exist_ok=True)
    for version in cfg.versions:  # (the nodes upgraded to another Kafka: its logging configuration too)
        shutil.copyfile(dist.resource_path(dist.log4j_resource(version)), cfg.log4j_file_of(version))
    secrets = None
    if cfg.secured:
        from kops.sandbox import security

        secrets = security.write_security_files(cfg.security, cfg.security_files, cfg.host,
                                                names=nodes.certificate_names())
    for n in state.base_nodes():
        what = "ZooKeeper" if n == "zookeeper" else f"KRaft controller {n}"
        text = render_properties(_merged(meta.base_properties(n, secrets), nodes.overrides(n)),
                                 f"kops sandbox: {what} (generated)")
        _write(cfg.properties_file(n), text, private=secrets is not None and n != "zookeeper")
    for b in cfg.broker_ids:
        text = render_properties(_merged(cfg.broker_properties(b, secrets), nodes.overrides(b, secrets)),
                                 f"kops sandbox: broker {b} (generated)")
        _write(cfg.properties_file(b), text, private=secrets is not None)


def _write(path, text: str, *, private: bool) -> None:
    """A node's properties; ``private``: it holds a password (SCRAM, PLAIN): 0600."""
    if private:
        from kops.sandbox.security import write_private

        write_private(path, text)
    else:
        path.write_text(text)


__all__ = ["write_node_configs"]
