"""Which sandbox a work directory holds: attach to it, or open it for ``kops sandbox up``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kops.errors import ClusterError
from kops.sandbox.config import SandboxConfig, default_workdir
from kops.sandbox.cluster import Sandbox
from kops.sandbox.nodes import Log, read_state


def attach(workdir: str | Path | None = None, *, log: Log | None = None) -> Sandbox:
    """The sandbox recorded in ``workdir`` (default ``$KOPS_SANDBOX_DIR`` / ``~/.kops/sandbox``),
    on the engine it was made with (local JVMs or containers)."""
    wd = Path(workdir or default_workdir()).expanduser().absolute()
    state = read_state(wd)
    if state is None:
        raise ClusterError(f"no sandbox in {wd} (start one with `kops sandbox up --workdir {wd}`)")
    cfg = SandboxConfig.from_dict({**state["config"], "workdir": str(wd)})
    return Sandbox(cfg, log=log)


def exists(workdir: str | Path | None = None) -> bool:
    """Whether ``workdir`` holds a sandbox."""
    wd = Path(workdir or default_workdir()).expanduser().absolute()
    return read_state(wd) is not None

def open_sandbox(workdir: str | Path | None = None, *, log: Log | None = None, **overrides: Any) -> Sandbox:
    """The sandbox for ``kops sandbox up``: the recorded config of ``workdir`` (if any) with
    ``overrides`` (only the settings the user gave) on top; defaults otherwise."""
    wd = Path(workdir or default_workdir()).expanduser().absolute()
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if "base_port" in overrides:
        overrides.setdefault("broker_ports", None)
    if "controller_base_port" in overrides:
        overrides.setdefault("controller_ports", None)
    state = read_state(wd)
    if state is not None:
        base = SandboxConfig.from_dict({**state["config"], "workdir": str(wd)})
        if "mode" in overrides and overrides["mode"] != base.mode and "kafka_version" not in overrides:
            overrides["kafka_version"] = None  # the new mode's default version
        if "brokers" in overrides and overrides["brokers"] != base.brokers:
            overrides.setdefault("racks", None)
            overrides.setdefault("broker_ports", None)
            overrides.setdefault("extra_brokers", {})
            overrides.setdefault("removed_brokers", ())
        cfg = base.with_(**overrides) if overrides else base
        return Sandbox(cfg, log=log)
    if overrides.get("mode") == "kraft" and "kafka_version" not in overrides:
        overrides["kafka_version"] = None
    cfg = SandboxConfig(workdir=wd, **overrides)
    return Sandbox(cfg, log=log)
