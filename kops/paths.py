"""Where kops keeps what it writes on this machine.

Its state, ``$KOPS_HOME`` (default ``~/.kops``; :func:`kops_home`):

- ``journal/<cluster-id>/``: local copies of reassignment journals (the cluster holds the other);
- ``leadership/``: demotion records (original replica orders) and the rebalance lock files;
- ``playbook-runs/``: playbook run state files.

(The sandbox's default work dir is ``~/.kops/sandbox``, or ``$KOPS_SANDBOX_DIR``.)

Its cache, ``$KOPS_CACHE_DIR`` (default ``$XDG_CACHE_HOME/kops`` or ``~/.cache/kops``;
:func:`cache_root`), anything in it fetched or built again when missing:

- ``kafka-<version>/libs/``: Apache Kafka's jars from Maven Central (:mod:`kops.sandbox.dist`);
- ``docker/``: the sandbox image's build inputs and a private dockerd's data (``engine/``);
- ``regex-check/``: the compiled Java checker of ``kops logs`` regexes (:mod:`kops.inputs.javaregex`).
"""

from __future__ import annotations

import os
from pathlib import Path


def kops_home() -> Path:
    return Path(os.environ.get("KOPS_HOME") or Path.home() / ".kops").expanduser()


def cache_root() -> Path:
    """``$KOPS_CACHE_DIR``, else ``$XDG_CACHE_HOME/kops``, else ``~/.cache/kops``."""
    env = os.environ.get("KOPS_CACHE_DIR")
    if env:
        return Path(env).expanduser().resolve()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return (base / "kops").resolve()
