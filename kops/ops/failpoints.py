"""Crash points for fault-injection tests: ``KOPS_FAILPOINT=<name>`` makes the kops process kill
itself (SIGKILL, like ``kill -9``: no cleanup, no flush) when it reaches that point.

The cluster tests use them to kill kops at the exact moments that matter for recovery (after
taking the lock but before journaling, after applying throttles but before journaling them,
after submitting a wave but before recording it), instead of hoping a timed ``kill -9`` lands
there. Unset (always, outside tests), :func:`reach` is a dictionary lookup.

Names: ``lock.topic-created``, ``execute.lock-taken``, ``throttles.applied``, ``wave.submitted``.
"""

from __future__ import annotations

import os
import signal

ENV = "KOPS_FAILPOINT"


def reach(name: str) -> None:
    if os.environ.get(ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
