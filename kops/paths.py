"""Where kops keeps its local state: ``$KOPS_HOME`` (default ``~/.kops``).

- ``journal/<cluster-id>/``: local copies of reassignment journals (the cluster holds the other);
- ``leadership/``: demotion records (original replica orders) and the rebalance lock files;
- ``playbook-runs/``: playbook run state files.
"""

from __future__ import annotations

import os
from pathlib import Path


def kops_home() -> Path:
    return Path(os.environ.get("KOPS_HOME") or Path.home() / ".kops").expanduser()
